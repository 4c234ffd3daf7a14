r"""``pattern`` anchors: ``^``/``\A`` at the start and ``$``/``\Z`` at the end of the pattern
or of any top-level alternative anchor that alternative (search semantics otherwise), also
where ``re``'s parser factors a common prefix out of the alternatives and where groups at
a branch's ends hold them; against jsonschema.
"""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema

PATTERNS = [
    "^a|^b$",  # parsed as ^(?:a|b$)
    "^a$|^b$",
    "^ab|cd$|^ef$",
    r"\Aab\Z",
    "^(?:a|b$)",
    "a|b$",
    "^a|b",
    "^$",
    "^",
    "$",
    "^^a$$",
    "^(a|b)c$",
    "^a(?:b|c)$|d",
    # groups and alternations at a branch's ends, opened (corpus: "(^$)|(^[a-f0-9]{8}...$)")
    "(^a)b",
    "(^$)|(^ab$)",
    "(^a|b)c",
    "^(a$|b)",
    "(?:^|x)a",
    "(a|^b)c",
    "(^a$)",
    "((^a))|b$",
]


def _texts() -> list[str]:
    alphabet = "abcdefx\n"
    return ["".join(p) for n in range(4) for p in itertools.product(alphabet, repeat=n)]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_anchors_agree_with_jsonschema(pattern: str) -> None:
    schema = {"type": "string", "pattern": pattern}
    grammar = compile_json_schema(schema)
    # ECMA-262's ``$`` is the end of the string; Python's also matches before a final
    # newline (the test suite's optional/ecmascript-regex.json): the reference uses ``\Z``
    validator = jsonschema.Draft202012Validator({**schema, "pattern": pattern.replace("$", r"\Z")})
    outcomes = set()
    for s in _texts():
        expected = validator.is_valid(s)
        outcomes.add(expected)
        assert grammar.matches(json.dumps(s)) is expected, (pattern, s)
    assert outcomes == {True, False} or pattern in ("^", "$")


@pytest.mark.parametrize(
    ("pattern", "detail"),
    [
        ("x^y", "anchor"),
        ("a$b|c", "anchor"),
        ("(^a)*", "anchor"),
        ("^(?i:a)$", "(?i)"),  # no ECMA-262 syntax; ignoring it would accept "A" for [^a]
        ("(?m)^a", "(?m)"),
        ("(?i)^[^a]$", "(?i)"),
    ],
)
def test_pattern_anchors_elsewhere_are_refused(pattern: str, detail: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema({"type": "string", "pattern": pattern})
    assert info.value.pointer == "/pattern" and detail in str(info.value)


def test_pattern_anchors_with_length() -> None:
    schema = {"type": "string", "pattern": "^a|^b$", "maxLength": 3}
    grammar = compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator({**schema, "pattern": r"^a|^b\Z"})
    for s in _texts():
        assert grammar.matches(json.dumps(s)) is validator.is_valid(s), s
