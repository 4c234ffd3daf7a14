"""``load_schema``: the torch-free precheck's lowering is the one the compile uses."""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.cli.inputs import load_schema
from structgen.fsm import clear_cache
from structgen.fsm.json_schema.convert import JsonSchemaConverter
from structgen.fsm.spec import JsonSchema

PLAIN = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
REF = {  # a $ref, no cycle: the rules-mode lowering gives a regex
    "$defs": {"n": {"type": "integer"}},
    "type": "object",
    "properties": {"a": {"$ref": "#/$defs/n"}},
    "required": ["a"],
}
RECURSIVE = {  # a $ref cycle: grammar rules
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["c"],
        }
    },
    "$ref": "#/$defs/node",
}
DOCS = [
    {"a": 1},
    {"a": "x"},
    {},
    {"c": []},
    {"c": [{"c": []}, {"c": [{"c": []}]}]},
    {"c": [{"d": 1}]},
]


@pytest.mark.parametrize("schema", [PLAIN, REF, RECURSIVE], ids=["plain", "ref", "recursive"])
def test_load_schema_lowers_once(schema, tmp_path, monkeypatch):
    """One conversion of the schema (counted at ``convert_root``) for the precheck and the
    compile together; the compiled grammar is the cached one, and it accepts exactly the
    documents ``jsonschema`` accepts."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    num_conversions = 0
    convert_root = JsonSchemaConverter.convert_root

    def counted(self, *args, **kwargs):
        nonlocal num_conversions
        num_conversions += 1
        return convert_root(self, *args, **kwargs)

    monkeypatch.setattr(JsonSchemaConverter, "convert_root", counted)
    clear_cache()
    try:
        assert load_schema(str(path)) == schema
        assert num_conversions == 1
        grammar = JsonSchema(schema, allow_extra_properties=False).compile(None)
        assert num_conversions == 1  # a cache hit: load_schema compiled this spec
    finally:
        clear_cache()
    for doc in DOCS:
        text = json.dumps(doc, separators=(",", ":"))
        valid = jsonschema.Draft202012Validator(schema).is_valid(doc)
        assert grammar.matches(text) == valid, (schema, text)
