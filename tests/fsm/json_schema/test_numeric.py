"""Integer bounds: exact against jsonschema, including beyond 2**53 and float bounds."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.numeric import integer_range_regex

BOUNDED = [
    {"type": "integer", "minimum": 100},
    {"type": "integer", "maximum": 10},
    {"type": "integer", "minimum": -5, "maximum": 5},
    {"type": "integer", "exclusiveMinimum": 1.1},
    {"type": "integer", "exclusiveMaximum": 3.0},
    {"type": "integer", "minimum": 0, "maximum": 150},
    {"type": "integer", "minimum": -(2**60), "maximum": 2**60 + 17},
    {"type": "integer", "minimum": 2**53 + 1},
    {"type": "integer", "minimum": 7, "maximum": 7},
    {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "integer",
        "minimum": 3,
        "exclusiveMinimum": True,
        "maximum": 9,
        "exclusiveMaximum": True,
    },
]


@pytest.mark.parametrize("schema", BOUNDED, ids=[json.dumps(s) for s in BOUNDED])
@settings(max_examples=300, deadline=None)
@given(x=st.one_of(st.integers(-300, 300), st.integers(-(2**64), 2**64)))
def test_integer_bounds_agree_with_jsonschema(schema, x):
    grammar = compile_json_schema(schema)
    valid = jsonschema.validators.validator_for(schema)(schema).is_valid(x)
    assert grammar.matches(json.dumps(x)) == valid


def test_field_case_integer_bounds_are_masked():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 100},
            "b": {"type": "integer", "maximum": 10},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    g = compile_json_schema(schema)
    assert g.matches('{"a":100,"b":10}') and g.matches('{"a":100,"b":-3}')
    assert not g.matches('{"a":50,"b":1}') and not g.matches('{"a":100,"b":15}')


def test_empty_range_and_no_leading_zeros():
    assert integer_range_regex(5, 4) is None
    g = compile_json_schema({"type": "integer", "minimum": 0, "maximum": 20})
    for bad in ["01", "-0", "007", "+3", "21"]:
        assert not g.matches(bad), bad


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(
        [
            {"type": "integer", "minimum": 7, "multipleOf": 5},
            {"type": "integer", "maximum": -3, "multipleOf": 3},
            {"type": "integer", "minimum": -(10**6), "maximum": 10**9, "multipleOf": 4},
            {"type": "number", "exclusiveMinimum": 0, "multipleOf": 3},
        ]
    ),
    st.one_of(st.integers(-100, 100), st.integers(-(10**10), 10**10)),
)
def test_multiple_of_over_a_wide_or_open_range_is_exact(schema, x):
    # the range's automaton intersected with the residue automaton, against jsonschema
    grammar = compile_json_schema(schema)
    assert grammar.matches(str(x)) == jsonschema.Draft202012Validator(schema).is_valid(x)
