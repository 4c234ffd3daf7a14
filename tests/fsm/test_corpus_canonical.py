"""The corpus helper's canonical form (``benchmarks/corpus.canonical``): object keys in schema
order and integer-valued numbers as integers, the one serialization the exactness tests, the
MaskBench ratchet and ``benchmarks/bench_maskbench.py`` write instances in. Reference:
``jsonschema`` (the rewrite never changes an instance's validity) and the compiled grammar
(the integer form is the one it writes)."""

from __future__ import annotations

import math

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.corpus import canonical, canonical_number, dump, integer_valued_floats_are_integers
from structgen.fsm import compile_json_schema

DRAFT4 = "http://json-schema.org/draft-04/schema#"


def _same_types(a, b) -> bool:
    """Equal values with equal Python types all the way down (``7 == 7.0`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_types(x, y) for x, y in zip(a, b))
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7.0, 7),
        (-0.0, 0),
        (1e3, 1000),
        (-12.0, -12),
        (1e20, 100000000000000000000),
        (2.5, 2.5),
        (1e-7, 1e-7),
        (7, 7),
        (True, True),
        (False, False),
        (None, None),
        ("7.0", "7.0"),
        (math.inf, math.inf),
    ],
)
def test_canonical_top_level_numbers(value, expected):
    assert _same_types(canonical(value, {}, {}), expected)


def test_canonical_nan_is_kept():
    out = canonical(math.nan, {}, {})
    assert isinstance(out, float) and math.isnan(out)


def test_canonical_number_respects_the_flag():
    assert _same_types(canonical_number(3.0), 3)
    assert _same_types(canonical_number(3.0, ints=False), 3.0)
    assert _same_types(canonical_number(True), True)


def test_canonical_nested_numbers_and_key_order():
    schema = {
        "type": "object",
        "properties": {
            "b": {"type": "array", "items": {"type": "number"}},
            "a": {
                "type": "object",
                "properties": {"y": {"type": "integer"}, "x": {"type": "number"}},
            },
        },
    }
    value = {"a": {"x": 1.5, "y": 2.0}, "extra": [{"k": 4.0}], "b": [1.0, 2.5, -0.0]}
    out = canonical(value, schema, schema)
    assert _same_types(out, {"b": [1, 2.5, 0], "a": {"y": 2, "x": 1.5}, "extra": [{"k": 4}]}), out
    assert dump(out) == '{"b":[1,2.5,0],"a":{"y":2,"x":1.5},"extra":[{"k":4}]}'
    assert value["a"]["y"] == 2.0 and isinstance(value["a"]["y"], float)  # input untouched


def test_canonical_numbers_under_any_of_branch_and_prefix_items():
    schema = {
        "anyOf": [
            {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]},
            {
                "type": "object",
                "properties": {"q": {"prefixItems": [{"type": "integer"}]}, "p": {}},
            },
        ]
    }
    out = canonical({"p": 3.0, "q": [5.0, 6.25]}, schema, schema)
    assert _same_types(out, {"q": [5, 6.25], "p": 3})


def test_draft4_keeps_integer_valued_floats():
    # draft 4 does not count 7.0 as an integer: rewriting it would flip its validity
    schema = {"$schema": DRAFT4, "type": "object", "properties": {"n": {"type": "integer"}}}
    assert not integer_valued_floats_are_integers(schema)
    assert _same_types(canonical({"n": 7.0}, schema, schema), {"n": 7.0})
    assert not jsonschema.Draft4Validator(schema).is_valid({"n": 7.0})
    assert not compile_json_schema(schema).matches(dump(canonical({"n": 7.0}, schema, schema)))


@pytest.mark.filterwarnings("ignore:The metaschema specified by:DeprecationWarning")
@pytest.mark.parametrize(
    "dialect",
    [None, "http://json-schema.org/draft-06/schema#", "http://json-schema.org/draft-07/schema#",
     "https://json-schema.org/draft/2020-12/schema", "http://example.com/unknown-dialect#"],
)  # fmt: skip
def test_later_drafts_count_integer_valued_floats_as_integers(dialect):
    schema = {"type": "integer"} if dialect is None else {"$schema": dialect, "type": "integer"}
    assert integer_valued_floats_are_integers(schema)
    assert jsonschema.validators.validator_for(schema)(schema).is_valid(7.0)
    # the grammar writes an integer one way, and the canonical instance is that way
    assert compile_json_schema(schema).matches(dump(canonical(7.0, schema, schema)))
    assert not compile_json_schema(schema).matches("7.0")


def test_non_string_dialect_falls_back_to_the_latest_draft():
    assert integer_valued_floats_are_integers({"$schema": 5})
    assert integer_valued_floats_are_integers(True)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-1000, 1000).map(float)
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
SCHEMAS = [
    {"type": "integer"},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "object", "additionalProperties": {"type": "integer", "multipleOf": 2}},
    {"enum": [1, 2.5, [3], {"a": 4}]},
    {"const": {"a": [1, 2]}},
    {"type": "array", "uniqueItems": True},
    {"not": {"type": "integer"}},
    {"type": "number", "maximum": 10, "exclusiveMinimum": -3},
]


@settings(max_examples=100, deadline=None)
@given(value=JSON, which=st.integers(0, len(SCHEMAS) - 1))
def test_canonical_keeps_validity(value, which):
    # key order never matters to validity; integer-valued floats are the same instance
    # as their ints under draft 6+ (the latest draft here), for every keyword
    schema = SCHEMAS[which]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(canonical(value, schema, schema)) == validator.is_valid(value)


def test_undeclared_keys_follow_their_additional_or_pattern_properties_schema():
    # an undeclared key's value is ordered (and its numbers rewritten) by the subschema
    # that applies to it: its patternProperties entry, else additionalProperties
    inner = {"type": "object", "properties": {"token": {}, "expires": {"type": "integer"}}}
    schema = {
        "type": "object",
        "properties": {"id": {}},
        "patternProperties": {"^x-": {"type": "object", "properties": {"b": {}, "a": {}}}},
        "additionalProperties": inner,
    }
    value = {"host": {"expires": 5.0, "token": "t"}, "x-y": {"a": 1, "b": 2}, "id": 1}
    out = canonical(value, schema, schema)
    assert dump(out) == '{"id":1,"host":{"token":"t","expires":5},"x-y":{"b":2,"a":1}}'
    assert compile_json_schema(schema).matches(dump(out))
    assert jsonschema.Draft202012Validator(schema).is_valid(out)


def test_keyless_objects_inside_a_construct_follow_its_key_order():
    """Inside an overlapping ``oneOf`` (canonical mode) the compiler writes the keys of an
    object no schema orders (here untyped ``items``) in the construct's per-level order
    (``boolean_ops.canonical_key_levels``: ``points`` before ``qid``, as ``zones`` declares them at
    that level), at every depth; the instance order is rejected, the canonical one kept
    (MaskBench Github_medium o57539, #20)."""
    zone = {
        "type": "object",
        "properties": {"points": {"type": "integer"}, "qid": {"type": "string"}},
    }
    schema = {
        "type": "object",
        "properties": {
            "groups": {"type": "array", "items": {}},
            "zones": {"type": "array", "items": zone},
        },
        "oneOf": [{"required": ["groups"]}, {"required": ["zones"]}],
    }
    value = {"groups": [{"qid": "a", "points": 1, "x": [{"qid": "b", "points": 2}]}]}
    assert jsonschema.Draft202012Validator(schema).is_valid(value)
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    text = dump(canonical(value, schema, schema))
    assert text == '{"groups":[{"points":1,"qid":"a","x":[{"points":2,"qid":"b"}]}]}'
    assert grammar.matches(text) and not grammar.matches(dump(value))
    # outside a construct such objects keep the instance's order (any order is taken)
    plain = {k: v for k, v in schema.items() if k != "oneOf"}
    assert dump(canonical(value, plain, plain)) == dump(value)
    assert compile_json_schema(plain, allow_extra_properties=True).matches(dump(value))
