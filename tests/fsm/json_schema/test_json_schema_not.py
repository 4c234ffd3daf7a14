"""``not`` of a boolean or of a schema made of ``type``/``not``/``$ref``: the types left
(``not: {type: integer}`` leaves the numbers with a nonzero fraction digit; under drafts 3
and 4, every number written with a fraction or an exponent), intersected
with the sibling ``type``. ``jsonschema`` is the reference: every accepted text is valid,
every listed valid text is accepted; other ``not`` stays a strict error. Also ``if``/``then``/
``else`` where no instance is needed to decide (no ``if``, no branch, ``if`` a boolean)."""

from __future__ import annotations

import json

import pytest

from structgen.errors import UnsatisfiableSchemaError
from structgen.fsm import compile_json_schema

from .._reference import assert_agrees_with_jsonschema
from .._reference import jsonschema_valid as _valid

DRAFT4 = "http://json-schema.org/draft-04/schema#"
TEXTS = [
    "1",
    "-3",
    "1.0",
    "2.5",
    "-0.5",
    "1e2",
    "1.5e1",
    '"s"',
    "true",
    "null",
    "[]",
    "[1]",
    "{}",
    '{"a":1}',
]

CASES = [
    ({"not": {"type": "integer"}}, ['"s"', "2.5", "-0.5", "true", "null", "[1]", '{"a":1}']),
    ({"not": {"type": ["integer", "boolean"]}}, ['"s"', "2.5", "null"]),
    ({"not": {"type": "number"}}, ['"s"', "true", "null", "[]", "{}"]),
    ({"not": {"not": {"type": "string"}}}, ['"s"']),
    ({"not": False}, ["1", '"s"', "[1]", '{"a":1}']),
    ({"not": {"type": "string"}, "type": ["string", "integer"]}, ["1", "-3"]),
    ({"not": {"type": "integer"}, "type": "number"}, ["2.5", "-0.5"]),
    # drafts 3 and 4: 7.0 and 1e2 are numbers that are not integers
    ({"$schema": DRAFT4, "not": {"type": "integer"}}, ["7.0", "1e2", "-0.0", "2.5", '"s"']),
    ({"$schema": DRAFT4, "not": {"type": "integer"}, "type": "number"}, ["1.0", "1.5e1"]),
    (
        {
            "not": {"$ref": "#/$defs/s"},
            "$defs": {"s": {"type": ["string", "null", "object"]}},
            "type": ["string", "array"],
        },
        ["[]", "[1]"],
    ),
    (
        {"type": "object", "properties": {"gone": {"not": {}}, "b": {"not": True}}},
        ["{}", '{"a":1}'],
    ),
]


@pytest.mark.parametrize(("schema", "good"), CASES)
def test_not_of_types_agrees_with_jsonschema(schema, good) -> None:
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    for text in good:
        assert _valid(schema, json.loads(text)), text  # the case itself is right
        assert grammar.matches(text), text
    for text in TEXTS + ['{"gone":1}', '{"b":null}']:
        if grammar.matches(text):
            assert _valid(schema, json.loads(text)), text


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [  # other not: the complement of the operand's automaton (json_schema.boolean_ops)
        (
            {"not": {"type": "object", "properties": {"foo": {"type": "string"}}}},
            ['{"foo":1}', "1", '"s"'],
            ["{}", '{"foo":"x"}', '{"foo":"x","b":1}'],
        ),
        ({"not": {"type": "integer"}, "minimum": 2}, ["2.5", '"s"'], ["2", "1.5", "7"]),
        ({"not": {"minimum": 3}}, ["2", "-1.5"], ["3", "4.5", '"s"', "null"]),
        ({"$schema": DRAFT4, "not": {"type": "integer"}, "minimum": 2}, ["7.0"], ["7", "1.0"]),
    ],
)
def test_other_not_is_exact(schema, good, bad) -> None:
    grammar = compile_json_schema(schema)
    assert_agrees_with_jsonschema(grammar, schema, good, bad)


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"if": {"const": 0}}, ["1", '"s"'], []),  # if without then/else: no effect
        ({"then": {"const": 0}, "type": "integer"}, ["1", "0"], ['"s"']),  # then without if
        ({"else": False}, ["null"], []),
        ({"if": True, "then": {"const": "t"}, "else": {"const": "e"}}, ['"t"'], ['"e"', "1"]),
        ({"if": {}, "then": {"type": "integer"}}, ["1"], ['"s"']),
        ({"if": False, "then": {"const": "t"}, "else": {"const": "e"}}, ['"e"'], ['"t"']),
        ({"if": False, "then": {"const": "t"}, "type": "string"}, ['"t"', '"x"'], ["1"]),
    ],
)
def test_if_then_else_decided_without_an_instance(schema, good, bad) -> None:
    grammar = compile_json_schema(schema)
    assert_agrees_with_jsonschema(grammar, schema, good, bad)


def test_if_that_depends_on_the_instance_is_exact() -> None:
    schema = {"if": {"type": "string"}, "then": {"minLength": 2}}
    grammar = compile_json_schema(schema)
    assert_agrees_with_jsonschema(grammar, schema, ['"ab"', "1", "{}"], ['"a"', '""'])


# ---- not of required keys: properties false, no complement (combine.negated_required) ---

_KEYS = ("a", "b", "c")
_PROPS = {k: {"type": ["integer", "string"]} for k in _KEYS}
_EXTRA = {"type": "integer"}
_REQUIRED_NOTS = [  # each with properties a, b, c and extra keys of integers (unless false)
    {"not": {"required": ["a"]}},
    {"not": {"required": ["a", "b"]}},
    {"not": {"allOf": [{"required": ["a"]}, {"required": ["b"]}]}},
    {"not": {"anyOf": [{"required": ["a"]}, {"required": ["b", "c"]}]}},
    {"not": {"required": ["a"], "anyOf": [{"required": ["b"]}, {"required": ["c"]}]}},
    {"not": {"$ref": "#/$defs/ab"}, "$defs": {"ab": {"required": ["a", "b"]}}},
    {"not": {"required": []}},
    {"not": {"anyOf": [{"required": []}, {"required": ["a"]}]}},
    {"type": "object", "not": {"required": ["b"]}},
    {"type": ["object", "null"], "required": ["a"], "not": {"required": ["a", "c"]}},
    {"type": "object", "required": ["a"], "not": {"required": ["a"]}},
    {
        "additionalProperties": False,
        "not": {"anyOf": [{"required": ["a", "b"]}, {"required": ["c"]}]},
    },
]
_REQUIRED_NOTS = [
    {"properties": _PROPS, "additionalProperties": _EXTRA, **s} for s in _REQUIRED_NOTS
]


def _instances() -> list[str]:
    """Every object over the subsets of a, b, c (in that order, values 1 or "s"), the same
    with an extra key z, and one value of each other type."""
    out = ["1", '"s"', "null", "[]", "true", "2.5"]
    for bits in range(8):
        keys = [k for i, k in enumerate(_KEYS) if bits >> i & 1]
        for value in ("1", '"s"'):
            members = [f'"{k}":{value}' for k in keys]
            out.append("{" + ",".join(members) + "}")
            out.append("{" + ",".join(members + ['"z":1']) + "}")
    return out


@pytest.mark.parametrize("schema", _REQUIRED_NOTS, ids=lambda s: json.dumps(s)[:60])
def test_not_of_required_keys_is_exact_without_a_complement(schema) -> None:
    from structgen.fsm.regex.definitions import COMPLEMENT, INTERSECT

    texts = _instances()
    good = [t for t in texts if _valid(schema, json.loads(t))]
    bad = [t for t in texts if t not in good]
    try:
        grammar = compile_json_schema(schema, allow_extra_properties=True)
    except UnsatisfiableSchemaError as exc:
        assert not good, exc
        return
    assert_agrees_with_jsonschema(grammar, schema, good, bad)
    written = [grammar.pattern, *(grammar.definitions or ())]
    assert not any(COMPLEMENT in d or INTERSECT in d for d in written)


def test_not_of_required_keys_falls_back_where_properties_cannot_merge() -> None:
    """``patternProperties`` next to another subschema's properties: merge_all_of refuses,
    so the complement path takes it (still exact)."""
    schema = {
        "type": "object",
        "patternProperties": {"^x": {"type": "integer"}},
        "not": {"required": ["xa"]},
    }
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    assert_agrees_with_jsonschema(grammar, schema, ['{"xb":1}', "{}"], ['{"xa":1}', '{"xb":"s"}'])


def _small_values() -> list:
    """Every JSON value of a small alphabet nested at most two containers deep (arrays of
    at most two items, objects of at most two keys among "a", "b")."""
    scalars = [None, True, False, 0, 7, -1, 2.5, "", "s", "ab"]
    inner = scalars + [[], {}, [1], ["s"], {"a": 1}, {"b": "s"}]
    out = list(inner)
    out += [[x] for x in inner] + [[1, x] for x in inner[:6]]
    out += [{"a": x} for x in inner] + [{"a": 1, "b": x} for x in inner[:6]]
    return out


_LONE_NOTS = [  # ``not`` with no sibling keyword: the types path and the complement path
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": "array"},
    {"type": "object"},
    {"type": ["string", "null"]},
    {"type": ["object", "array"]},
    {"not": {"type": "object"}},
    {"type": "string", "minLength": 1},
    {"type": "string", "maxLength": 1},
    {"minLength": 1},
    {"type": "array", "minItems": 1},
    {"type": "array", "maxItems": 0},
    {"type": "number", "minimum": 0},
    {"const": "s"},
    {"enum": [7, "s", None]},
]


@pytest.mark.parametrize("negated", _LONE_NOTS)
@pytest.mark.parametrize("extra", [False, True])
def test_lone_not_accepts_what_jsonschema_accepts(negated, extra) -> None:
    """``{"not": X}`` alone accepts exactly jsonschema's instances over every small value,
    with and without ``allow_extra_properties``: the objects and arrays the types path
    leaves (``not: {type: string}``) are read as the complement path reads them
    (``not: {type: string, minLength: 1}``), any keys allowed, as ``true``'s are."""
    schema = {"not": negated}
    grammar = compile_json_schema(schema, allow_extra_properties=extra)
    wrong = [
        (text, want)
        for value in _small_values()
        for text in [json.dumps(value, separators=(",", ":"))]
        for want in [_valid(schema, value)]
        if grammar.matches(text) != want
    ]
    assert not wrong, wrong[:5]
