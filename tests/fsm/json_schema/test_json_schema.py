"""JSON Schema -> regex: golden table, round trips validated by jsonschema, errors."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from structgen.errors import InvalidSchemaError, UnsupportedSchemaError
from structgen.fsm import compile_json_schema, json_schema_to_regex, schema_for

OBJ = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["b"],
}

GOLDEN = [
    ({"type": "integer"}, ["0", "-0", "12", "-340"], ["01", "+1", "1.0", "", "-"]),
    (
        {"type": "number"},
        ["0", "-0", "1.5", "1e2", "1E+2", "-0.25e-3"],
        ["1.", ".5", "01", "1e", "NaN"],
    ),
    ({"type": "boolean"}, ["true", "false"], ["True", "1", ""]),
    ({"type": "null"}, ["null"], ["None", ""]),
    (
        {"type": "string"},
        ['""', '"a b"', '"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\u00e9"', '"é😀"'],
        ['"\\x"', '"\\\'"', '"\n"', '"\t"', '"a', '"\\u00g0"'],
    ),
    (
        {"type": "string", "minLength": 2, "maxLength": 3},
        ['"ab"', '"\\n\\t"', '"abc"', '"ééé"'],
        ['"a"', '"abcd"', '"\\n"'],
    ),
    (
        {"enum": ["a", 1, None, [1, 2], {"k": "é"}]},
        ['"a"', "1", "null", "[1,2]", '{"k":"é"}'],
        ['"b"', "2", "[1, 2]"],
    ),
    ({"const": "x.y*"}, ['"x.y*"'], ['"xxyy"']),
    ({"type": ["integer", "null"]}, ["1", "null"], ['"1"']),
    ({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}, ["5", '"a"'], ['"ab"']),
    (
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        ["[1]", "[1,2,3]"],
        ["[]", "[1,2,3,4]", "[1,]", "[,1]"],
    ),
    ({"type": "array", "items": {"type": "integer"}}, ["[]", "[1,-2]"], ["[1 ,2]", "[01]"]),
    (
        OBJ,
        ['{"b":""}', '{"a":1,"b":"x"}', '{"b":"x","c":true}', '{"a":1,"b":"x","c":false}'],
        ["{}", '{"a":1}', '{"b":"x","a":1}', '{"a":1,,"b":""}', '{"b":"x",}', '{"b":"x","d":1}'],
    ),
    (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        ["{}", '{"a":1}', '{"b":2}', '{"a":1,"b":2}'],
        ['{,"b":2}', '{"a":1,}', '{"b":2,"a":1}'],
    ),
    (
        {
            "$defs": {
                "p": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
            },
            "type": "array",
            "items": {"$ref": "#/$defs/p"},
        },
        ['[{"x":1},{"x":2.5}]'],
        ['[{"y":1}]'],
    ),
    ({"definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s"}, ['"q"'], ["1"]),
    ({"type": "string", "format": "date"}, ['"2024-02-29"'], ['"2024-13-01"', '"24-01-01"']),
    (
        {"type": "string", "format": "date-time"},
        ['"2024-01-01T10:20:30Z"', '"2024-01-01T10:20:30.5+02:00"'],
        ['"2024-01-01 10:20"'],
    ),
    ({"type": "string", "format": "uuid"}, ['"123e4567-e89b-12d3-a456-426614174000"'], ['"123"']),
    ({"type": "string", "format": "email"}, ['"a.b@example.com"'], ['"a@b"', '"@x.com"']),
    ({"type": "string", "pattern": "^[a-z]+$"}, ['"abc"'], ['"ab1"', '""']),
    ({"type": "string", "pattern": "b+"}, ['"b"', '"abba"', '"x\\"b"'], ['"a"', '""']),
    ({"type": "string", "pattern": '^a"\\\\$'}, ['"a\\"\\\\"'], ['"a"']),
    # ANY_VALUE_DEPTH = 10 containers: 10 accepted, 11 rejected (the documented bound)
    (
        {},
        [
            "1",
            '"x"',
            '{"k":[1,null]}',
            "[]",
            "[[[1]]]",
            "[" * 10 + "]" * 10,
            '{"a":[{"b":[{"c":{}}]}]}',
        ],
        ["", "{", "[" * 11 + "]" * 11],
    ),
    (
        {
            "title": "T",
            "description": "d",
            "examples": [1],
            "default": 1,
            "$comment": "c",
            "type": "integer",
        },
        ["1"],
        ["x"],
    ),
]


@pytest.mark.parametrize(("schema", "good", "bad"), GOLDEN)
def test_golden(schema, good, bad) -> None:
    grammar = compile_json_schema(schema)
    for text in good:
        assert grammar.matches(text), (schema, text)
    for text in bad:
        assert not grammar.matches(text), (schema, text)


def test_flexible_whitespace_is_bounded() -> None:
    grammar = compile_json_schema(OBJ, whitespace="flexible")
    assert grammar.matches('{\n  "a": 1,\n  "b": "x"\n}')
    assert grammar.matches('{ "b" : "x" }')
    assert not grammar.matches("{" + " " * 40 + '"b":"x"}')
    assert not grammar.matches(' {"b":"x"}')  # no whitespace outside the document
    assert compile_json_schema(OBJ, whitespace=2).matches('{  "b":"x"}')
    assert not compile_json_schema(OBJ).matches('{"b": "x"}')


def test_max_length_counts_characters() -> None:
    grammar = compile_json_schema({"type": "string", "maxLength": 200})
    assert grammar.matches('"' + "é" * 200 + '"')
    assert not grammar.matches('"' + "é" * 201 + '"')
    assert grammar.matches('"' + "\\n" * 200 + '"')


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        (
            {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}},
            "uniqueItems",
            "/properties/tags",
        ),
        # (number bounds, multipleOf 5, patternProperties, hostname and pattern with
        # min/maxLength are enforced now: tests/fsm/json_schema/test_string_pattern_length.py)
        # (multipleOf 0.3, 0.5, 2.5 on numbers are enforced now:
        # tests/fsm/json_schema/test_number_multiples.py; 0.07's regex is too large)
        ({"type": "number", "multipleOf": 0.07}, "multipleOf", ""),
        ({"type": "integer", "multipleOf": 7}, "multipleOf", ""),
        # (patternProperties beside additionalProperties is enforced now:
        # tests/fsm/json_schema/test_pattern_properties.py; beside propertyNames too:
        # tests/fsm/json_schema/test_extra_keys.py)
        ({"type": "string", "format": "regex"}, "format", ""),
        ({"type": "string", "pattern": "^a", "format": "date"}, "format", ""),
        ({"type": "string", "pattern": "^a+", "minLength": 50000}, "minLength", ""),
        # (overlapping oneOf, other not and if/then/else are enforced by automata now:
        # tests/fsm/json_schema/test_boolean_ops.py; what stays refused inside them:)
        (
            {"oneOf": [{"type": "integer"}, {"additionalProperties": {"type": "string"}}]},
            "additionalProperties",
            "/oneOf/1",
        ),
        (
            {"type": "array", "items": {"allOf": [{"pattern": "a"}, {"pattern": "b"}]}},
            "allOf",
            "/items",
        ),
        # (maxContains is enforced now: tests/fsm/json_schema/test_max_contains.py; contains
        # beside maxItems stays refused)
        ({"type": "array", "contains": {"type": "integer"}, "maxItems": 2}, "contains", ""),
        (
            {
                "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                "not": {"$ref": "#/$defs/t"},
            },
            "$ref",
            "/$defs/t/items",
        ),
        ({"$ref": "https://example.com/x.json"}, "$ref", ""),
    ],
)
def test_unsupported_keyword_names_keyword_and_pointer(schema, keyword, pointer) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == keyword and info.value.pointer == pointer
    assert keyword in str(info.value)


def test_non_strict_records_warnings() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "uniqueItems": True, "items": {"type": "integer"}}
        },
    }
    grammar = compile_json_schema(schema, strict=False)
    assert any("uniqueItems" in w and "/properties/tags" in w for w in grammar.warnings)
    assert grammar.matches('{"tags":[1,1]}')


def test_invalid_schema() -> None:
    with pytest.raises(InvalidSchemaError):
        compile_json_schema({"type": "object", "properties": {"a": {"type": "nope"}}})
    with pytest.raises(InvalidSchemaError):
        compile_json_schema({"type": "integer", "minLength": -1})
    with pytest.raises(InvalidSchemaError):
        compile_json_schema("{not json")
    with pytest.raises(InvalidSchemaError):
        schema_for(42)


def test_recursive_ref_unrolled_with_warning() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["v"],
            }
        },
        "$ref": "#/$defs/node",
    }
    grammar = compile_json_schema(schema, max_recursion_depth=3)
    assert grammar.matches('{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}')
    assert not grammar.matches('{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[{"v":4}]}]}]}')
    assert any("recursive $ref" in w for w in grammar.warnings)
    required = {
        "$defs": {
            "n": {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"]}
        },
        "$ref": "#/$defs/n",
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(required)
    assert info.value.keyword == "$ref"


class Address(BaseModel):
    street: str
    zip_code: str | None = None


class Person(BaseModel):
    name: str
    age: int
    tags: list[str] = []
    address: Address


def test_pydantic_model() -> None:
    grammar = compile_json_schema(Person)
    person = Person(name="Zoë", age=3, tags=["a"], address=Address(street="x"))
    assert grammar.matches(person.model_dump_json())
    assert grammar.matches('{"name":"a","age":1,"address":{"street":"s","zip_code":null}}')
    assert not grammar.matches('{"name":"a","address":{"street":"s"}}')
    assert json_schema_to_regex(Person) == json_schema_to_regex(Person.model_json_schema())


# ---- round trips: generated instances match, and jsonschema agrees ----------------------

ROUND_TRIP_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string", "maxLength": 8},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "kind": {"enum": ["a", "b", 3]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "inner": {
            "type": "object",
            "properties": {"x": {"type": ["integer", "null"]}},
            "required": ["x"],
            "additionalProperties": False,
        },
    },
    "required": ["id", "name"],
    "additionalProperties": False,
}

_text = st.text(st.characters(codec="utf-8"), max_size=8)
_instance = st.fixed_dictionaries(
    {"id": st.integers(-(10**12), 10**12), "name": _text},
    optional={
        "score": st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
        "ok": st.booleans(),
        "kind": st.sampled_from(["a", "b", 3]),
        "tags": st.lists(_text, max_size=3),
        "inner": st.fixed_dictionaries({"x": st.none() | st.integers()}),
    },
)


def _dump(instance: dict) -> str:
    ordered = {k: instance[k] for k in ROUND_TRIP_SCHEMA["properties"] if k in instance}
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(instance=_instance)
def test_round_trip_valid_instances(instance) -> None:
    grammar = compile_json_schema(ROUND_TRIP_SCHEMA)
    text = _dump(instance)
    jsonschema.validate(json.loads(text), ROUND_TRIP_SCHEMA)
    assert grammar.matches(text), text


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    instance=_instance,
    key=st.sampled_from(["id", "name", "tags", "kind", "extra"]),
    value=st.sampled_from(["x" * 9, 1.5, None, [1], "c", True]),
)
def test_round_trip_invalid_instances(instance, key, value) -> None:
    grammar = compile_json_schema(ROUND_TRIP_SCHEMA)
    instance = dict(instance)
    instance[key] = value
    text = _dump(instance) if key != "extra" else _dump(instance)[:-1] + ',"extra":1}'
    valid = jsonschema.Draft202012Validator(ROUND_TRIP_SCHEMA).is_valid(json.loads(text))
    assert grammar.matches(text) is valid, text


def test_cache_returns_same_object() -> None:
    a = compile_json_schema(OBJ)
    assert compile_json_schema(OBJ) is a
    assert compile_json_schema(OBJ, whitespace="flexible") is not a


@pytest.mark.parametrize(
    "pattern,what",
    [
        ("(a)\\1", "a backreference"),
        ("(?=a)b", "lookaround"),
        ("a(?!b)", "lookaround"),
        ("a\\bc", "an anchor"),
    ],
)
@pytest.mark.parametrize("bounds", [{}, {"maxLength": 5}])
def test_pattern_without_automaton_is_named_once(pattern: str, what: str, bounds: dict) -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": pattern, **bounds}},
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    msg = str(info.value)
    assert info.value.keyword == "pattern" and info.value.pointer == "/properties/code/pattern"
    assert msg.count("unsupported JSON Schema keyword") == 1, msg
    assert what in msg and repr(pattern) in msg, msg
    grammar = compile_json_schema(schema, strict=False)  # the pattern ignored, with a warning
    ignored = [w for w in grammar.warnings if "'pattern'" in w]
    assert len(ignored) == 1 and what in ignored[0], grammar.warnings
    assert grammar.matches('{"code":"zz"}')
    assert grammar.matches('{"code":"zzzzzzzz"}') == (not bounds)
