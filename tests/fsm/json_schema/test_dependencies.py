"""``dependentRequired``, ``dependentSchemas`` and draft 3-7 ``dependencies``, judged by jsonschema.

Valid instances are written canonically (compact, listed properties in schema order, then
required keys that are not listed: a trigger key before the keys it requires) and must be
accepted; instances that break a dependency must be rejected. The exhaustive checks try
every subset of a few keys in every order: whatever the grammar accepts is valid, and every
valid subset is accepted in some order.
"""

from __future__ import annotations

import itertools
import json

import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.dependencies import MAX_DEPENDENCY_BRANCHES

from .._reference import assert_agrees_with_jsonschema, jsonschema_valid

DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT4 = "http://json-schema.org/draft-04/schema#"
CARD = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "credit_card": {"type": "integer"},
        "billing_address": {"type": "string"},
    },
    "required": ["name"],
}

CASES = [
    pytest.param(
        {**CARD, "dependentRequired": {"credit_card": ["billing_address"]}},
        [
            '{"name":"a"}',
            '{"name":"a","billing_address":"x"}',
            '{"name":"a","credit_card":1,"billing_address":"x"}',
        ],
        ['{"name":"a","credit_card":1}', '{"credit_card":1,"billing_address":"x"}'],
        id="dependentRequired-listed",
    ),
    pytest.param(
        {
            **CARD,
            "dependentRequired": {
                "credit_card": ["billing_address"],
                "billing_address": ["credit_card"],
            },
        },
        ['{"name":"a"}', '{"name":"a","credit_card":1,"billing_address":"x"}'],
        ['{"name":"a","credit_card":1}', '{"name":"a","billing_address":"x"}'],
        id="dependentRequired-both-ways",
    ),
    pytest.param(  # keys not listed: the trigger, then what it requires
        {"type": "object", "dependentRequired": {"quux": ["foo", "bar"]}},
        ["{}", '{"foo":1,"bar":2}', '{"quux":3,"foo":1,"bar":2}'],
        ['{"quux":1}', '{"quux":2,"foo":1}', '{"foo":1,"quux":2}'],
        id="dependentRequired-unlisted",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {}},
            "additionalProperties": False,
            "dependentRequired": {"a": ["c"]},
        },
        ["{}", '{"b":1}'],
        ['{"a":1}', '{"a":1,"c":2}', '{"a":1,"b":2}'],
        id="dependent-key-forbidden",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"kind": {"type": "string"}, "size": {}},
            "dependentSchemas": {
                "kind": {"properties": {"size": {"type": "integer"}}, "required": ["size"]}
            },
        },
        ["{}", '{"size":"big"}', '{"kind":"x","size":3}'],
        ['{"kind":"x"}', '{"kind":"x","size":"big"}'],
        id="dependentSchemas-properties",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "additionalProperties": False,
            "dependentSchemas": {"a": {"maxProperties": 1}},
        },
        ['{"a":1}', '{"b":1}', '{"a":{"b":1}}'],
        ['{"a":1,"b":2}', '{"a":1,"x":2}'],
        id="dependentSchemas-count",
    ),
    pytest.param(  # a subschema that adds additionalProperties: false
        {
            "type": "object",
            "properties": {"foo": {}, "bar": {}},
            "dependentSchemas": {
                "foo": {"properties": {"foo": {}, "bar": {}}, "additionalProperties": False}
            },
        },
        ['{"foo":1}', '{"foo":1,"bar":2}', '{"bar":2,"baz":3}'],
        ['{"foo":1,"baz":3}', '{"foo":1,"bar":2,"baz":3}'],
        id="dependentSchemas-closed",
    ),
    pytest.param(
        {"type": "object", "dependentSchemas": {"foo": True, "bar": False}},
        ["{}", '{"foo":1}'],
        ['{"bar":2}', '{"foo":1,"bar":2}'],
        id="dependentSchemas-booleans",
    ),
    pytest.param(  # a dependent schema with a dependency of its own
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "dependentSchemas": {"a": {"dependentRequired": {"b": ["c"]}}},
        },
        ['{"a":1}', '{"b":1}', '{"a":1,"c":1}', '{"a":1,"b":1,"c":1}'],
        ['{"a":1,"b":1}'],
        id="dependentSchemas-nested",
    ),
    pytest.param(
        {
            "$schema": DRAFT7,
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "dependencies": {"a": ["b"], "b": {"properties": {"a": {"type": "string"}}}},
        },
        ["{}", '{"b":1}', '{"a":"x","b":1}'],
        ['{"a":"x"}', '{"a":1,"b":1}'],
        id="draft7-dependencies",
    ),
    pytest.param(
        {
            "$schema": DRAFT4,
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "dependencies": {"a": ["b"]},
        },
        ["{}", '{"b":1}', '{"a":1,"b":1}'],
        ['{"a":1}'],
        id="draft4-dependencies",
    ),
    pytest.param(
        {
            "allOf": [
                {
                    "type": "object",
                    "properties": {"a": {}, "b": {}, "c": {}},
                    "dependentRequired": {"a": ["b"]},
                },
                {"dependentRequired": {"a": ["c"]}},
            ]
        },
        ["{}", '{"a":1,"b":1,"c":1}', '{"b":1}'],
        ['{"a":1,"b":1}', '{"a":1,"c":1}'],
        id="allOf-merged",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {
                "inner": {
                    "type": "object",
                    "properties": {"a": {}, "b": {}},
                    "dependentRequired": {"a": ["b"]},
                }
            },
        },
        ["{}", '{"inner":{}}', '{"inner":{"a":1,"b":2}}'],
        ['{"inner":{"a":1}}'],
        id="nested-object",
    ),
    pytest.param(  # only the object part of a type list has the dependency
        {"type": ["object", "integer"], "dependentRequired": {"a": ["b"]}},
        ["3", "{}", '{"a":1,"b":2}'],
        ['{"a":1}'],
        id="type-list",
    ),
]


@pytest.mark.parametrize(("schema", "good", "bad"), CASES)
def test_agrees_with_jsonschema(schema, good, bad) -> None:
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    assert_agrees_with_jsonschema(grammar, schema, good, bad)


VALUES = {"a": 1, "b": "s", "c": True, "x": None}
EXHAUSTIVE = [
    {"properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"a": ["b"], "b": ["c"]}},
    {"dependentRequired": {"a": ["b", "c"], "x": ["a"]}},
    {
        "properties": {"a": {}, "b": {}},
        "additionalProperties": False,
        "dependentSchemas": {"a": {"required": ["c"]}},
    },
    {"dependentSchemas": {"a": {"maxProperties": 2}, "c": {"minProperties": 3}}},
    {"required": ["a"], "properties": {"b": {"type": "string"}}, "dependentRequired": {"a": ["b"]}},
    {"anyOf": [{"dependentRequired": {"a": ["b"]}}, {"required": ["x"]}]},
    {"enum": [{"a": 1}, {"a": 1, "b": "s"}, {}], "dependentRequired": {"a": ["b"]}},
    {
        "properties": {"a": {}, "b": {}},
        "dependentSchemas": {"a": {"anyOf": [{"required": ["b"]}, {"required": ["c"]}]}},
    },
    {"$schema": DRAFT7, "dependencies": {"a": ["b"], "b": {"properties": {"c": {"const": True}}}}},
    # a trigger neither listed nor required, where patternProperties or propertyNames decide
    # the extra keys: its absent branch leaves it out of them too (it was refused)
    {
        "type": "object",
        "patternProperties": {"^[ab]": {}},
        "additionalProperties": False,
        "dependentRequired": {"a": ["c"]},
    },
    {
        "type": "object",
        "propertyNames": {"maxLength": 1},
        "additionalProperties": True,
        "dependentSchemas": {"a": {"required": ["c"]}},
    },
]


@pytest.mark.parametrize("schema", EXHAUSTIVE, ids=lambda s: json.dumps(s)[:60])
def test_exhaustive_subsets_and_orders(schema) -> None:
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    for size in range(len(VALUES) + 1):
        for keys in itertools.combinations(VALUES, size):
            valid = jsonschema_valid(schema, {k: VALUES[k] for k in keys})
            accepted = [
                grammar.matches(json.dumps({k: VALUES[k] for k in order}, separators=(",", ":")))
                for order in itertools.permutations(keys)
            ]
            assert valid or not any(accepted), keys  # never an invalid instance
            assert not valid or any(accepted), keys  # every valid key set in some order


def _independent(n: int) -> dict:
    names = [f"k{i}" for i in range(n)]
    return {
        "type": "object",
        "properties": {k: {} for k in names + ["t"]},
        "dependentRequired": {k: ["t"] for k in names},
    }


def test_branch_bound() -> None:
    """Up to MAX_DEPENDENCY_BRANCHES combinations of trigger keys are enforced; past the
    bound, strict compile names the keyword and the object's pointer, and non-strict
    compile warns (that dependency is then not enforced)."""
    n = MAX_DEPENDENCY_BRANCHES.bit_length() - 1  # 2**n combinations: within the bound
    grammar = compile_json_schema(_independent(n))
    assert grammar.matches('{"k0":1,"t":1}') and not grammar.matches('{"k0":1}')
    schema = {"type": "object", "properties": {"inner": _independent(n + 1)}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == "dependentRequired"
    assert info.value.pointer == "/properties/inner"
    warnings = compile_json_schema(schema, strict=False).warnings
    assert any("dependentRequired" in w and "combinations" in w for w in warnings)


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        (
            {
                "type": "object",
                "properties": {"a": {}},
                "patternProperties": {"^x": {}},
                "dependentSchemas": {"a": {"properties": {"b": {}}}},
            },
            "dependentSchemas",
        ),
    ],
)
def test_not_enforced_raises_or_warns(schema, keyword) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == keyword and info.value.pointer == ""
    warnings = compile_json_schema(schema, strict=False).warnings
    assert any(repr(keyword) in w for w in warnings), warnings


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"$schema": DRAFT7, "dependentRequired": {"a": ["b"]}}, "dependentRequired"),
        ({"dependencies": {"a": ["b"]}}, "dependencies"),  # 2020-12 has no `dependencies`
    ],
)
def test_keyword_of_another_draft_is_ignored(schema, keyword) -> None:
    """A dependency keyword outside the document's draft asserts nothing there (as
    jsonschema reads it): ignored under strict too, and named in the warnings."""
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    assert_agrees_with_jsonschema(grammar, schema, ['{"a":1}', '{"a":1,"b":2}', "{}"], [])
    assert any(repr(keyword) in w and "ignored unknown keyword" in w for w in grammar.warnings)


def test_unsatisfiable_property_counts() -> None:
    """A branch whose required keys exceed maxProperties (or min > max) has no object; before,
    the counts were not checked when every member was required."""
    schema = {
        "type": "object",
        "properties": {"a": {}, "b": {}},
        "dependentSchemas": {"a": {"required": ["b"], "maxProperties": 1}},
    }
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    assert_agrees_with_jsonschema(grammar, schema, ["{}", '{"b":1}'], ['{"a":1}', '{"a":1,"b":1}'])
    with pytest.raises(UnsupportedSchemaError, match="'required' lists 2 properties, above"):
        compile_json_schema({"type": "object", "required": ["a", "b"], "maxProperties": 1})
