"""A schema that accepts no value fails to compile with its cause, keyword and pointer."""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.errors import UnsatisfiableSchemaError, UnsupportedSchemaError
from structgen.fsm import compile_json_schema

# values jsonschema must reject for every case (the reference: the schema is empty)
POOL = [None, True, False, 0, 1, 2, 3, 5, -1, 1.5, "", "a", "abcdef", [], [1], {}, {"a": 1}]

CASES = [
    ({"enum": []}, "enum", "#", "'enum' lists no value"),
    (False, "false", "#", "the schema is false"),
    ({"type": "integer", "minimum": 5, "maximum": 1}, "maximum", "#", "'minimum' 5 is above"),
    ({"type": "number", "exclusiveMinimum": 3, "maximum": 3}, "maximum", "#", "not below"),
    ({"type": "integer", "minimum": 1.2, "maximum": 1.8}, "maximum", "#", "no integer lies"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "maxLength", "#", "'minLength' 5"),
    ({"type": "array", "minItems": 3, "maxItems": 1}, "maxItems", "#", "'minItems' 3"),
    ({"type": "string", "const": 5}, "const", "#", "'const' 5 is not valid"),
    ({"type": "string", "enum": [1, 2]}, "enum", "#", "no value of 'enum'"),
    (
        {"type": "object", "properties": {"a": {"enum": []}}, "required": ["a"]},
        "enum",
        "/properties/a",
        "'enum' lists no value",
    ),
    (
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        "false",
        "/properties/a",
        "the schema is false",
    ),
    ({"type": "array", "items": {"enum": []}, "minItems": 1}, "enum", "/items", "'enum'"),
]


@pytest.mark.parametrize(("schema", "keyword", "where", "phrase"), CASES)
def test_empty_schema_names_its_cause(schema, keyword, where, phrase):
    validator = jsonschema.Draft202012Validator(schema)
    assert not any(validator.is_valid(v) for v in POOL), "the case must be empty"
    with pytest.raises(UnsatisfiableSchemaError) as info:
        compile_json_schema(schema)
    err = info.value
    assert isinstance(err, UnsupportedSchemaError)  # callers catching the parent still do
    assert err.keyword == keyword
    assert (err.pointer or "#") == where
    assert phrase in str(err) and "accepts no value" in str(err)
    assert f"at {where}" in str(err)


@pytest.mark.parametrize(
    "schema",
    [
        {"anyOf": [{"enum": []}, {"type": "string", "maxLength": 0}]},
        {"type": "object", "properties": {"a": {"enum": []}}},  # a absent is fine
        {"type": "integer", "minimum": 3, "maximum": 3},
        {"type": "array", "items": False},  # the empty array
    ],
)
def test_schema_with_an_empty_part_but_some_value_compiles(schema):
    grammar = compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in ['""', "{}", "3", "[]"]:
        assert grammar.matches(text) == validator.is_valid(json.loads(text)), text


def test_empty_through_one_of_names_the_root():
    with pytest.raises(UnsatisfiableSchemaError, match="oneOf, not or if/then/else"):
        compile_json_schema({"oneOf": [{"type": "string"}, {"type": "string"}]})
