"""An unsupported keyword is named with the JSON pointer where the document writes it,
however the converter reached it: through ``$ref``, ``allOf`` or a dependent schema
(the merged or referenced subschema's own location, not the instance path)."""

from __future__ import annotations

import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema

D12 = "https://json-schema.org/draft/2020-12/schema"
UNIQUE = {"type": "array", "uniqueItems": True}

CASES = [
    ({"type": "object", "properties": {"tags": UNIQUE}}, "/properties/tags"),
    (
        {
            "$schema": D12,
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "dependentSchemas": {"a": {"properties": {"c": UNIQUE}}},
        },
        "/dependentSchemas/a/properties/c",
    ),
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "dependencies": {"a": {"properties": {"c": UNIQUE}}},
        },
        "/dependencies/a/properties/c",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"allOf": [{"$ref": "#/$defs/t"}, {"properties": {"x": UNIQUE}}]}},
            "$defs": {"t": {"type": "object"}},
        },
        "/properties/a/allOf/1/properties/x",
    ),
    (
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}, "$defs": {"t": UNIQUE}},
        "/$defs/t",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/t"}},
            "$defs": {"t": {"type": "object", "properties": {"u": UNIQUE}}},
        },
        "/$defs/t/properties/u",
    ),
]


@pytest.mark.parametrize("schema,pointer", CASES)
def test_error_names_where_the_keyword_is_written(schema: dict, pointer: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == "uniqueItems" and info.value.pointer == pointer, str(info.value)
    warnings = compile_json_schema(schema, strict=False).warnings
    assert any(f"'uniqueItems' at {pointer}:" in w for w in warnings), warnings
