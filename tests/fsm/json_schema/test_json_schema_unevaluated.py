"""``unevaluatedProperties``/``unevaluatedItems`` of a schema with no in-place applicator (they
are ``additionalProperties`` / ``items`` there), settled per schema before any ``allOf`` merge:
a cousin's properties never count as evaluated. ``jsonschema`` is the reference."""

from __future__ import annotations

import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema

from .._reference import assert_agrees_with_jsonschema

CASES = [
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "unevaluatedProperties": False,
        },
        ["{}", '{"a":1}'],
        ['{"a":1,"b":2}', '{"b":2}'],
    ),
    (
        {
            "type": "object",
            "patternProperties": {"^x": {"type": "null"}},
            "unevaluatedProperties": False,
        },
        ['{"xa":null}', "{}"],
        ['{"b":2}', '{"xa":1}'],
    ),
    (
        {"type": "object", "additionalProperties": True, "unevaluatedProperties": False},
        ['{"b":2}'],
        [],
    ),
    # the cousin's "foo" is not evaluated for the subschema holding unevaluatedProperties
    (
        {"allOf": [{"properties": {"foo": True}}, {"unevaluatedProperties": False}]},
        ["{}", "1"],
        ['{"foo":1}'],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "string"}], "unevaluatedItems": False},
        ["[]", '["a"]'],
        ['["a",1]', "[1]"],
    ),
    (
        {"type": "array", "items": {"type": "integer"}, "unevaluatedItems": False},
        ["[1,2]"],
        ['["a"]'],
    ),
    ({"unevaluatedItems": {"type": "null"}}, ["[null]", '"s"', "{}"], ["[1]"]),
]


@pytest.mark.parametrize(("schema", "good", "bad"), CASES)
def test_unevaluated_without_applicators(schema, good, bad) -> None:
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    assert_agrees_with_jsonschema(grammar, schema, good, bad)


@pytest.mark.parametrize(
    "schema",
    [
        {
            "properties": {"a": True},
            "allOf": [{"properties": {"b": True}}],
            "unevaluatedProperties": False,
        },
        {
            "$ref": "#/$defs/a",
            "$defs": {"a": {"properties": {"a": True}}},
            "unevaluatedProperties": False,
        },
        {"type": "array", "contains": {"type": "null"}, "unevaluatedItems": False},
    ],
)
def test_unevaluated_next_to_applicators_stays_a_strict_error(schema) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword in ("unevaluatedProperties", "unevaluatedItems")
