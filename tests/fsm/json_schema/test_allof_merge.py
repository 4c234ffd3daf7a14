"""``allOf`` merging of keywords that appear in several subschemas: two ``not`` (joined
as ``not: {anyOf: [A, B]}``), two ``anyOf`` / two ``oneOf`` (multiplied out into branch
pairs). ``jsonschema`` is the reference over a fixed set of JSON texts."""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema

TEXTS = [
    "1",
    "2",
    "3",
    "4",
    "6",
    "-1",
    "0",
    "2.5",
    '"a"',
    '"b"',
    '"ab"',
    '""',
    "true",
    "false",
    "null",
    "[]",
    "[1]",
    "{}",
    '{"a":1}',
    '{"b":"x"}',
    '{"a":1,"b":"x"}',
    '{"a":"s"}',
]

CASES = [
    {"enum": [1, 2, 3, 4, "a"], "allOf": [{"not": {"const": 1}}, {"not": {"enum": [3, "a"]}}]},
    {
        "allOf": [
            {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 2}]},
        ]
    },
    {
        "allOf": [
            {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
            {"oneOf": [{"const": 2}, {"const": True}, {"type": "null"}]},
        ]
    },
    {
        "type": "object",
        "allOf": [
            {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
            {
                "anyOf": [
                    {"properties": {"a": {"type": "integer"}}},
                    {"properties": {"b": {"const": "x"}}},
                ]
            },
        ],
        "properties": {"a": {}, "b": {}},
    },
]


@pytest.mark.parametrize("schema", CASES, ids=range(len(CASES)))
def test_merged_keywords_match_jsonschema(schema) -> None:
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    assert not grammar.warnings, grammar.warnings
    validator = jsonschema.Draft202012Validator(schema)
    hits = 0
    for text in TEXTS:
        ok = validator.is_valid(json.loads(text))
        hits += ok
        assert grammar.matches(text) == ok, text
    assert 0 < hits < len(TEXTS)


def test_too_many_branch_pairs_is_a_strict_error() -> None:
    many = [{"const": i} for i in range(9)]
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema({"allOf": [{"anyOf": many}, {"anyOf": many[::-1]}]})
    assert info.value.keyword == "allOf"


def test_handwritten_allany6_compiles_non_strict() -> None:
    """MaskBench Handwritten allany6: three anyOf under allOf ('cannot combine two
    different anyOf'); non-strict it compiles, the unenforceable `not`s listed."""
    schema = {
        "type": "number",
        "allOf": [
            {"minimum": -4000},
            {"maximum": -3000},
            {"$ref": "#/definitions/any1"},
            {"$ref": "#/definitions/any3"},
            {"not": {"multipleOf": 8}},
        ],
        "definitions": {
            "any1": {"anyOf": [{"multipleOf": 33}, {"multipleOf": 12}]},
            "any3": {"anyOf": [{"not": {"multipleOf": 11}}, {"multipleOf": 7}]},
        },
    }
    grammar = compile_json_schema(schema, strict=False)
    assert any("'not'" in w for w in grammar.warnings), grammar.warnings
    with pytest.raises(UnsupportedSchemaError):
        compile_json_schema(schema)


def test_branch_keys_come_before_later_subschemas_properties() -> None:
    # allOf: [{anyOf/oneOf branches}, {properties}] writes a branch's keys first, as the
    # subschemas are written (MaskBench Github_trivial o64859, Github_medium o60846)
    for key in ("anyOf", "oneOf"):
        branches = [
            {"properties": {"state": {"const": "run"}, "n": {"type": "integer"}}},
            {"properties": {"state": {"const": "stop"}}, "required": ["state"]},
        ]
        schema = {
            "type": "object",
            "allOf": [
                {"properties": {"id": {"type": "integer"}}},
                {key: branches},
                {"properties": {"builder": {"type": "string"}}, "required": ["builder"]},
            ],
        }
        grammar = compile_json_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        good = ['{"id":1,"state":"run","n":2,"builder":"b"}', '{"state":"stop","builder":"b"}']
        bad = [
            '{"id":1,"builder":"b","state":"run"}',  # valid value, but not in schema order
            '{"state":"run","n":"x","builder":"b"}',
            '{"state":"stop"}',
            '{"id":1,"state":"run","n":2,"builder":3}',
        ]
        for text in good:
            assert validator.is_valid(json.loads(text)) and grammar.matches(text), text
        for text in bad[1:]:
            assert not validator.is_valid(json.loads(text)) and not grammar.matches(text), text
        assert validator.is_valid(json.loads(bad[0])) and not grammar.matches(bad[0])


def test_own_allof_properties_come_before_own_branch_keys() -> None:
    # {allOf: [{properties: P}], anyOf: [branches]}: the schema's own allOf is merged
    # before its anyOf branches, as the corpus helper's canonical form writes the keys
    # (MaskBench JsonSchemaStore debugsettings, where each branch also holds a `not`;
    # the move into the branches above is only for a later subschema of the same allOf)
    from benchmarks.corpus import canonical, dump

    for negated in (True, False):
        path = {"properties": {"path": {"type": "string"}}}
        cmd = {"properties": {"cmd": {"type": "string"}}}
        if negated:
            path["not"], cmd["not"] = {"required": ["cmd"]}, {"required": ["path"]}
        schema = {
            "type": "object",
            "required": ["name"],
            "allOf": [{"properties": {"name": {"type": "string"}}}],
            "anyOf": [path, cmd],
        }
        grammar = compile_json_schema(schema, allow_extra_properties=True)
        validator = jsonschema.Draft202012Validator(schema)
        good = [{"path": "p", "name": "x"}, {"name": "x", "cmd": "c"}, {"name": "x"}]
        bad = [{"path": "p"}, {"name": 1, "path": "p"}] + (
            [{"name": "x", "path": "p", "cmd": "c"}, {"name": "x", "cmd": 1}] if negated else []
        )
        for value in good:
            text = dump(canonical(value, schema, schema))
            assert validator.is_valid(value) and grammar.matches(text), text
        assert dump(canonical(good[0], schema, schema)) == '{"name":"x","path":"p"}'
        for value in bad:
            text = dump(canonical(value, schema, schema))
            assert not validator.is_valid(value) and not grammar.matches(text), text
