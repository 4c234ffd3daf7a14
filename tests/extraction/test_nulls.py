"""Nullable properties made required for generation (``structgen.extraction.nulls``)."""

from __future__ import annotations

import random

import jsonschema
import pytest

from structgen.extraction.nulls import accepts_null, nullable_required

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "title": {"type": ["string", "null"]},
        "kind": {"enum": ["a", "b", None]},
        "level": {"enum": ["a", "b"]},
        "agent": {"$ref": "#/$defs/agent"},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/agent"}},
        "price": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "free": {},
    },
    "required": ["name"],
    "$defs": {
        "agent": {
            "type": ["object", "null"],
            "properties": {"phone": {"type": ["string", "null"]}, "x": {"type": "integer"}},
        }
    },
}


@pytest.mark.parametrize(
    ("sub", "want"),
    [
        ({"type": ["string", "null"]}, True),
        ({"type": "string"}, False),
        ({"enum": ["a", None]}, True),
        ({"enum": ["a"]}, False),
        ({"const": None}, True),
        ({"anyOf": [{"type": "number"}, {"type": "null"}]}, True),
        ({"oneOf": [{"type": "number"}, {"type": "string"}]}, False),
        ({"$ref": "#/$defs/agent"}, True),
        ({}, True),
        ({"description": "anything"}, False),  # only an explicit null counts
    ],
)
def test_accepts_null(sub, want):
    assert accepts_null(SCHEMA, sub) is want


def test_nullable_properties_become_required_at_every_level():
    out = nullable_required(SCHEMA)
    assert out["required"] == ["name", "title", "kind", "agent", "price", "free"]
    assert out["$defs"]["agent"]["required"] == ["phone"]
    assert "required" not in SCHEMA["$defs"]["agent"]  # the argument is not changed
    assert SCHEMA["required"] == ["name"]


def test_what_the_new_schema_accepts_the_old_one_does():
    """Brute force: random objects valid under the generation schema are valid under
    the original, and the original's objects with every nullable key present are
    valid under the generation schema."""
    out = nullable_required(SCHEMA)
    rng = random.Random(5)
    choices = {
        "name": ["x"],
        "title": ["t", None],
        "kind": ["a", None],
        "level": ["a", "b"],
        "agent": [None, {"phone": None}, {"phone": "1", "x": 2}],
        "price": [1.5, None],
        "free": [None, 3],
    }
    for _ in range(300):
        obj = {k: rng.choice(v) for k, v in choices.items() if k == "name" or rng.random() < 0.7}
        new_ok = jsonschema.Draft202012Validator(out).is_valid(obj)
        old_ok = jsonschema.Draft202012Validator(SCHEMA).is_valid(obj)
        assert not new_ok or old_ok
        full = {k: obj.get(k) for k in ("name", "title", "kind", "agent", "price", "free")}
        full.update({k: v for k, v in obj.items() if k not in full})
        if isinstance(full["agent"], dict):
            full["agent"] = {"phone": None, **full["agent"]}
        assert jsonschema.Draft202012Validator(out).is_valid(full) == (
            jsonschema.Draft202012Validator(SCHEMA).is_valid(full)
        )


def test_extract_writes_every_nullable_property(tiny_engine):
    from structgen.extraction import extract

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 4},
            "b": {"type": ["integer", "null"], "maximum": 9},
            "c": {"enum": ["x", "y", None]},
        },
        "required": ["a"],
    }
    texts = ["a 1 x", "b 2 y", "nothing"]
    got = extract(tiny_engine, schema, texts, write_nulls=True, evidence=False)
    for value in got:
        assert set(value) == {"a", "b", "c"}  # the random model never leaves one out
        jsonschema.validate(value, schema)
