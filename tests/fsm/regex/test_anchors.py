r"""Anchors under whole-output matching: ``^``/``\A`` at the start and ``$``/``\Z`` at the end
(of the pattern or of a top-level alternative) are no-ops, checked against ``re.fullmatch``;
any other anchor is a clear error naming its position.
"""

from __future__ import annotations

import itertools
import random
import re
import sys

import pytest

from structgen import template
from structgen.errors import RegexError, UnsupportedRegexError
from structgen.fsm import compile_regex, compile_spec
from structgen.fsm.regex.anchors import strip_end_anchors
from structgen.fsm.spec import Regex

ACCEPTED = [
    "^(|.*)$",
    "^a|^b$",
    "^a$|^b$",
    "^ab|cd$|^ef$",
    r"\Aabc\Z",
    r"^abc\Z",
    "(?i)^ab$",
    "(?m)^a$",
    "(?s)^a.b$",
    "^^a$$",
    "^",
    "$",
    "^$",
    "a|^",
    "$|a",
    "^(?:a|b)+$",
    "^[a-z]+$",
    "^[$^]+$",
    r"^\^a\$$",
    "^(?#^ comment $)a$",
    "^a{1,2}$",
    "^[^^]$",
    "^(a|b)(c|d)$",
    "^a|b|c$",
    r"^\\$",
]
ALPHABET = ["", "a", "b", "c", "d", "e", "f", "A", "B", "^", "$", "\\", "\n", "x"]


def _texts() -> list[str]:
    return ["".join(p) for n in range(4) for p in itertools.product(ALPHABET[1:], repeat=n)]


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_end_anchors_are_no_ops_under_fullmatch(pattern: str) -> None:
    grammar = compile_regex(pattern)
    agreed = 0
    for text in _texts():
        expected = re.fullmatch(pattern, text) is not None
        assert grammar.matches(text) is expected, (pattern, text)
        agreed += expected
    assert agreed > 0


def test_anchors_through_the_regex_spec_and_a_trigger() -> None:
    grammar = compile_spec(Regex("^[0-9]+$", trigger="ANSWER:"))
    assert grammar.matches("think... ANSWER:42")
    assert not grammar.matches("think... ANSWER:4a")


@pytest.mark.parametrize(
    ("pattern", "position", "what"),
    [
        ("a^b", 1, "^"),
        ("(^a)", 1, "^"),
        ("a$b", 1, "$"),
        ("x|a^", 3, "^"),
        ("a$\n", 1, "$"),  # Python's $ before a final newline: not at the end here
        ("(a|^b)", 3, "^"),
        ("$^", 0, "$"),
        ("a(?i:b$)", 6, "$"),
        (r"a\Z|b\A", 5, r"\A"),
        (r"\bword", 0, r"\b"),
        (r"^word\B", 5, r"\B"),
        (r"\\^a", 2, "^"),  # an escaped backslash, then an anchor
        ("^(?:a|^b)", 6, "^"),
        ("[^a]^", 4, "^"),
        ("^(?:a|b$)", 7, "$"),  # inside a group: refused, though at the end here
    ],
)
def test_anchors_elsewhere_name_their_position(pattern: str, position: int, what: str) -> None:
    with pytest.raises(UnsupportedRegexError, match=f"at position {position} of") as info:
        compile_regex(pattern)
    assert repr(what) in str(info.value)


@pytest.mark.parametrize("pattern", ["^*a", "(a^", "^{3}", "a$*"])
def test_syntax_errors_come_first(pattern: str) -> None:
    with pytest.raises(RegexError) as info:
        compile_regex(pattern)
    assert not isinstance(info.value, UnsupportedRegexError)
    assert "cannot parse" in str(info.value)


def test_verbose_patterns_keep_the_general_refusal() -> None:
    with pytest.raises(UnsupportedRegexError, match="anchor"):
        compile_regex("(?x) ^ a b $")
    assert strip_end_anchors("(?x)^a$") == ("(?x)^a$", None)


@pytest.mark.parametrize(
    ("pattern", "text", "stray"),
    [
        ("^(|.*)$", "(|.*)", None),
        ("^a|^b$", "a|b", None),
        (r"(?i)\A^a$\Z", "(?i)a", None),
        ("[$]^a$", "[$]^a", 3),
        ("a", "a", None),
    ],
)
def test_strip_end_anchors(pattern: str, text: str, stray: int | None) -> None:
    assert strip_end_anchors(pattern) == (text, stray)


def test_template_regex_hole_with_anchors() -> None:
    t = template("Code: {code:regex=^[A-Z]{2}[0-9]$}.")
    assert compile_regex(t.pattern).matches("AB1.")
    assert not compile_regex(t.pattern).matches("AB.")
    assert t.parse("AB1.") == {"code": "AB1"}


def test_backslash_z_follows_the_dialect() -> None:
    if sys.version_info >= (3, 14):  # ``\z`` is ``\Z`` there
        assert compile_regex(r"^ab\z").matches("ab")
    else:
        with pytest.raises(RegexError, match="bad escape"):
            compile_regex(r"^ab\z")


def _random_anchored(rng: random.Random, depth: int = 0) -> str:
    """A small random regex with anchors (``^ $ \\A \\Z \\b``) at random places."""
    atoms = ["a", "b", "[ab]", "[^a]", ".", "ab", "^", "$", r"\A", r"\Z", r"\b", r"\^", "[$]"]
    parts = []
    for _ in range(rng.randint(1, 4)):
        if depth < 2 and rng.random() < 0.25:
            inner = "|".join(_random_anchored(rng, depth + 1) for _ in range(rng.randint(1, 3)))
            atom = rng.choice(["(?:", "("]) + inner + ")"
        else:
            atom = rng.choice(atoms)
        quantified = atom not in ("^", "$", r"\A", r"\Z", r"\b") and rng.random() < 0.3
        parts.append(atom + (rng.choice(["*", "+", "?", "{2}"]) if quantified else ""))
    return "|".join(parts) if depth == 0 and rng.random() < 0.3 else "".join(parts)


def test_random_patterns_agree_with_re_or_name_an_anchor() -> None:
    rng = random.Random(20)
    texts = [t for t in _texts() if len(t) <= 3]
    accepted = refused = 0
    for _ in range(300):
        pattern = _random_anchored(rng)
        try:
            grammar = compile_regex(pattern)
        except UnsupportedRegexError as exc:
            pos = int(re.search(r"at position (\d+) of", str(exc)).group(1))
            assert pattern[pos] in "^$" or pattern[pos : pos + 2] in (r"\A", r"\Z", r"\b"), (
                pattern,
                exc,
            )
            refused += 1
            continue
        for text in texts:
            expected = re.fullmatch(pattern, text) is not None
            assert grammar.matches(text) is expected, (pattern, text)
        accepted += 1
    assert accepted >= 60 and refused >= 60, (accepted, refused)
