"""``patternProperties`` with several patterns whose schemas differ: each key is valued by
its pattern's schema; exact (no warning) when the patterns' automata show that no key
matches two of them, else the strict error. ``jsonschema`` is the reference."""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema

DISJOINT = {
    "type": "object",
    "additionalProperties": False,
    "patternProperties": {
        "^S_": {"type": "string"},
        "^I_": {"type": "integer", "minimum": 0},
        "^[0-9]+$": {"const": True},
    },
}
TEXTS = [
    "{}",
    '{"S_a":"x"}',
    '{"S_a":1}',
    '{"I_n":3}',
    '{"I_n":-1}',
    '{"I_n":"3"}',
    '{"12":true}',
    '{"12":false}',
    '{"S_":"","I_":0,"7":true}',
    '{"x":1}',
    '{"S_a":"x","I_b":2}',
    '{"I_b":2,"S_a":3}',
    '{"1a":true}',
]


def test_disjoint_patterns_are_exact() -> None:
    grammar = compile_json_schema(DISJOINT)
    assert not grammar.warnings, grammar.warnings
    validator = jsonschema.Draft202012Validator(DISJOINT)
    results = [validator.is_valid(json.loads(t)) for t in TEXTS]
    assert any(results) and not all(results)
    for text, ok in zip(TEXTS, results):
        assert grammar.matches(text) == ok, text


def test_overlapping_patterns_strict_error_and_non_strict_keys() -> None:
    """MaskBench Handwritten test.NoType: patterns 'a' and 'b' overlap ('ab'); its valid
    instance {"a":15,"b":5} was rejected (every key valued by the first pattern's schema)."""
    schema = {
        "type": "object",
        "allOf": [
            {"type": "object", "patternProperties": {"a": {"type": "number", "minimum": 10}}},
            {"type": "object", "patternProperties": {"b": {"type": "number", "minimum": 3}}},
        ],
        "minProperties": 1,
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == "patternProperties"
    grammar = compile_json_schema(schema, strict=False)
    validator = jsonschema.Draft202012Validator(schema)
    for text in ['{"a":15,"b":5}', '{"a":15,"b":2}', '{"a":9,"b":5}', '{"a":5}', '{"b":3}']:
        assert grammar.matches(text) == validator.is_valid(json.loads(text)), text


LISTED_AND_PATTERNS = {
    "type": "object",
    "properties": {"ab": {"type": "integer"}, "x-id": {"const": 1}},
    "patternProperties": {"^a": {"type": "string"}, "^x-": {}},
}
LISTED_TEXTS = [
    "{}",
    '{"ab":1}',  # listed and matching ^a: both schemas apply
    '{"ab":"s"}',
    '{"ax":"s"}',
    '{"ax":1}',
    '{"x-id":1}',
    '{"x-id":2}',
    '{"x-y":[1]}',
    '{"b":1}',
    '{"b":true}',
    '{"b":"s"}',
    '{"ab":1,"ac":"x","x-q":null}',
    '{"ab":1,"b":false}',
]


@pytest.mark.parametrize(
    "extra", [None, False, {"type": "boolean"}], ids=["absent", "false", "schema"]
)
@pytest.mark.parametrize("allow", [False, True])
def test_patterns_matching_listed_names_and_additional_properties(extra, allow):
    # a pattern that matches a listed name (the name keeps its property, the pattern's
    # other keys their own schema) and additionalProperties beside the patterns (keys
    # matching neither): exact, against jsonschema
    schema = dict(LISTED_AND_PATTERNS)
    if extra is not None:
        schema["additionalProperties"] = extra
    grammar = compile_json_schema(schema, allow_extra_properties=allow)
    for text in LISTED_TEXTS:
        valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        undeclared = extra is None and not allow and '"b"' in text  # structgen's default
        assert grammar.matches(text) == (valid and not undeclared), (schema, allow, text)
