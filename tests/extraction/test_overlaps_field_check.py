"""``overlaps._field_check`` (a candidate checked against its field's subschema alone)
against the whole object validated again with the candidate in place, as
``_candidate_jobs`` did for every candidate: equal verdicts on every schema it accepts,
and None on the schemas whose way to the field judges the value elsewhere (where a
field-only check would be wrong: shown for each)."""

from __future__ import annotations

import itertools

import jsonschema
import pytest

from structgen.extraction import overlaps as ov
from structgen.extraction.choices import with_field

CANDIDATES = ["", "a", "Ann", "Ann Lee", "ann@example.com", "not an email", "x" * 12,
              "ABC-123", "Zoë Åström", "Lyon", "12", "2026-03-07", "a\"b\\c\nd"]  # fmt: skip


def _checker(schema):
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _string_paths(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _string_paths(v, path + (k,))
    elif isinstance(value, str) and path:
        yield path


CARD = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Card",
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8, "x-structgen-copy": True},
        "email": {"type": "string", "format": "email"},
        "code": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"},
        "city": {"anyOf": [{"type": "string", "minLength": 3}, {"enum": ["12"]}]},
        "org": {
            "type": "object",
            "description": "nested",
            "properties": {"name": {"type": "string", "minLength": 2}, "n": {"type": "integer"}},
            "required": ["name"],
            "additionalProperties": {"type": "integer"},
            "minProperties": 1,
        },
        "never": False,
    },
    "required": ["name", "email"],
    "additionalProperties": False,
    "$defs": {"unused": {"type": "string"}},
    "$comment": "a comment",
}
CARD_VALUE = {"name": "Ann", "email": "ann@example.com", "code": "AB-1", "city": "Lyon",
              "org": {"name": "Acme", "n": 3, "extra": 4}}  # fmt: skip

ACCEPTED = [
    (CARD, CARD_VALUE),
    ({**CARD, "$schema": "http://json-schema.org/draft-07/schema#"}, CARD_VALUE),
    ({**CARD, "$schema": "http://json-schema.org/draft-04/schema#"}, CARD_VALUE),
    (
        {"type": "object", "properties": {"a": True, "b": {"type": "string", "maxLength": 3}}},
        {"a": "zz", "b": "abc"},
    ),  # fmt: skip
]

# schemas whose way to a field judges its value elsewhere: (schema, valid value, field,
# a candidate the field's own subschema accepts and the whole schema rejects)
REFUSED = [
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "patternProperties": {"^a$": {"maxLength": 2}}}, {"a": "ab"}, ("a",), "abc"),
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "allOf": [{"properties": {"a": {"maxLength": 2}}}]}, {"a": "ab"}, ("a",), "abc"),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
      "if": {"properties": {"a": {"const": "x"}}}, "then": {"required": ["c"]}},
     {"a": "y", "b": "z"}, ("a",), "x"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "enum": [{"a": "y"}]},
     {"a": "y"}, ("a",), "x"),
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "not": {"properties": {"a": {"const": "x"}}}}, {"a": "y"}, ("a",), "x"),
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "dependentSchemas": {"a": {"properties": {"a": {"maxLength": 1}}}}},
     {"a": "y"}, ("a",), "xy"),
    ({"type": "object", "properties": {"o": {"$ref": "#/$defs/o"}},
      "$defs": {"o": {"type": "object", "properties": {"a": {"maxLength": 1}}}}},
     {"o": {"a": "y"}}, ("o", "a"), None),
    ({"type": "object", "properties": {"o": {"type": "object",
      "properties": {"a": {"type": "string"}}, "unevaluatedProperties": False,
      "propertyNames": {"maxLength": 1}}}}, {"o": {"a": "y"}}, ("o", "a"), None),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/s"}},
      "$defs": {"s": {"type": "string", "maxLength": 1}}}, {"a": "y"}, ("a",), None),
    ({"$id": "https://example.com/root", "type": "object",
      "properties": {"a": {"type": "string"}}}, {"a": "y"}, ("a",), None),
    ({"$schema": "http://json-schema.org/draft-03/schema#", "type": "object",
      "properties": {"a": {"type": "string"}}}, {"a": "y"}, ("a",), None),
]  # fmt: skip


@pytest.mark.parametrize("schema, value", ACCEPTED)
def test_field_check_equals_whole_validation(schema, value):
    checker = _checker(schema)
    assert checker.is_valid(value)
    paths = list(_string_paths(value))
    assert paths
    for keys in paths:
        check = ov._field_check(checker, schema, keys)
        assert check is not None, keys
        for c in CANDIDATES:
            assert check(c) == checker.is_valid(with_field(value, keys, c)), (keys, c)
    # both verdicts occur, so the comparison can tell them apart
    verdicts = {
        ov._field_check(checker, schema, k)(c) for k, c in itertools.product(paths, CANDIDATES)
    }
    assert verdicts == {True, False}


@pytest.mark.parametrize("schema, value, keys, wrong", REFUSED)
def test_field_check_refuses_ways_that_read_the_value(schema, value, keys, wrong):
    checker = _checker(schema)
    assert checker.is_valid(value)
    assert ov._field_check(checker, schema, keys) is None
    if wrong is not None:  # what a check of the field's subschema alone would get wrong
        sub = schema
        for k in keys:
            sub = ov._resolve(schema, sub)["properties"][k]
        leaf = checker.evolve(schema=ov._resolve(schema, sub))
        assert leaf.is_valid(wrong) and not checker.is_valid(with_field(value, keys, wrong))


def test_field_check_missing_field_or_not_an_object():
    checker = _checker(CARD)
    assert ov._field_check(checker, CARD, ("nope",)) is None
    assert ov._field_check(checker, CARD, ("name", "deeper")) is None
    assert ov._field_check(checker, CARD, ()) is None
