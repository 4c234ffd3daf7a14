"""``pattern`` (or ``format``) together with ``minLength``/``maxLength``: enforced exactly.

Reference: ``jsonschema`` on the decoded string. Strings ending in a newline are left
out: Python's ``$`` (what ``jsonschema`` uses) matches before a final newline, ECMA-262's
(what JSON Schema specifies, and what structgen compiles) does not.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema

PATTERNS = [
    r"^(\d+\.\d+\.\d+.*)$",
    "ab",
    "^[a-z]{3,}$",
    "^[a-z]+$",
    "^(a|bc)*$",
    "a|^b$",
    "^a*b?$",
    r"x\d{2,4}",
    "^[^b]*$",
    "(ab)+",
    "^.{2}$",
    '^["\\\\]+$',
    "é+",
]
BOUNDS = [(0, 3), (1, None), (2, 5), (3, None), (4, 4), (0, 0), (5, None), (2, 8)]
_ALPHABET = ["a", "b", "c", "x", "1", "2", ".", "é", '"', "\\", "\n", "\t"]


def _strings() -> list[str]:
    rng = random.Random(0)
    out = ["", "1.2.3", "abc", "abcd", "x12", "x1234", "ababab", "aab", "b", "éé", "1.2.3-rc.1"]
    out += ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 9))) for _ in range(300)]
    return [s for s in out if not s.endswith("\n")]


STRINGS = _strings()


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_with_length_matches_jsonschema(pattern) -> None:
    for lo, hi in BOUNDS:
        schema = {"type": "string", "pattern": pattern, "minLength": lo}
        if hi is not None:
            schema["maxLength"] = hi
        validator = jsonschema.Draft202012Validator(schema)
        expected = [validator.is_valid(s) for s in STRINGS]
        try:
            grammar = compile_json_schema(schema)
        except UnsupportedSchemaError as exc:  # only when no string at all is valid
            assert "accepts no value" in str(exc) and not any(expected), (schema, exc)
            continue
        assert not grammar.warnings, grammar.warnings
        for s, ok in zip(STRINGS, expected):
            assert grammar.matches(json.dumps(s, ensure_ascii=False)) == ok, (schema, s)


def test_format_with_length() -> None:
    schema = {"type": "string", "format": "date", "maxLength": 10}
    grammar = compile_json_schema(schema)
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for s in ["2020-01-01", "2020-02-30", "2020-1-01", "20200-01-01", ""]:
        assert grammar.matches(json.dumps(s)) == checker.is_valid(s), s
    with pytest.raises(UnsupportedSchemaError, match="accepts no value"):
        compile_json_schema({"type": "string", "format": "date", "maxLength": 9})


def _dropped_keyword(schema: dict, keyword: str):
    """The strict compile raises naming ``keyword``; the non-strict grammar, which lists it
    in its warnings."""
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == keyword
    grammar = compile_json_schema(schema, strict=False)
    assert any(f"'{keyword}'" in w for w in grammar.warnings), grammar.warnings
    return grammar


def test_unrepresentable_is_a_strict_error_and_a_warning() -> None:
    schema = {"type": "string", "pattern": "^a+", "minLength": 50000}
    grammar = _dropped_keyword(schema, "minLength")
    assert grammar.matches('"aaa"') and not grammar.matches('"b"')  # the pattern is kept


def test_long_max_length_keeps_the_format() -> None:
    """MaskBench Github_easy o9778: email with maxLength 1024 is over the product cap; the
    length bound is what is dropped (non-strict), so an invalid email stays rejected."""
    schema = {"type": "string", "format": "email", "minLength": 3, "maxLength": 1024}
    grammar = _dropped_keyword(schema, "maxLength")
    assert not any("'format'" in w for w in grammar.warnings), grammar.warnings
    assert grammar.matches('"a@example.com"')
    assert not grammar.matches('"not an email"') and not grammar.matches('"@b.c"')


def test_snowplow_sp_335_instances() -> None:
    """MaskBench Snowplow sp_335: ``version`` has a pattern and maxLength 32; its
    invalid instance (``"version": "abc"``) was accepted while the pair was ignored."""
    path = (
        Path(__file__).resolve().parents[3].parent
        / "shared"
        / "corpora"
        / "jsonschemabench"
        / "plain"
        / "Snowplow"
        / "Snowplow---sp_335_Normalized.json"
    )
    if not path.exists():
        pytest.skip("corpus not present")
    doc = json.loads(path.read_text())
    schema = doc["schema"]
    grammar = compile_json_schema(schema, strict=False, allow_extra_properties=True)
    assert not any("pattern" in w for w in grammar.warnings), grammar.warnings
    for test in doc["tests"]:
        text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
        assert jsonschema.Draft202012Validator(schema).is_valid(test["data"]) == test["valid"]
        assert grammar.matches(text) == test["valid"], text


def test_untranslatable_pattern_with_length_keeps_the_length() -> None:
    """MaskBench Github_easy o21833: pattern '/^[0-9]{4}$/' (anchors inside) with a length:
    the pattern is what is reported (strict error naming it), non-strict the length stays."""
    schema = {"type": "string", "pattern": "/^[0-9]{4}$/", "maxLength": 6}
    grammar = _dropped_keyword(schema, "pattern")
    assert grammar.matches('"abc"') and not grammar.matches('"abcdefg"')


def test_a_pattern_with_a_formats_text_is_not_the_format() -> None:
    """A ``pattern`` (search) written as a ``format``'s regex text (fullmatch), both with a
    length, in one schema: each field keeps its own semantics (the product states' sharing
    keys name ``anchored``; they were shared, and the pattern field refused what it allows)."""
    from structgen.fsm.json_schema.formats import FORMATS

    schema = {
        "type": "object",
        "properties": {
            "f": {"type": "string", "format": "uuid", "maxLength": 60},
            "p": {"type": "string", "pattern": FORMATS["uuid"], "maxLength": 60},
        },
        "required": ["f", "p"],
    }
    grammar = compile_json_schema(schema)
    u = "123e4567-e89b-12d3-a456-426614174000"
    for doc in ({"f": u, "p": "x" + u + "y"}, {"f": u, "p": u}, {"f": "x" + u, "p": u}):
        valid = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.FormatChecker()
        ).is_valid(doc)
        assert grammar.matches(json.dumps(doc, separators=(",", ":"))) == valid, doc
