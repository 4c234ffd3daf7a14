"""Regex -> ByteDFA agrees with Python ``re.fullmatch`` (ASCII classes), errors are typed."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.errors import GrammarTooComplexError, RegexError, UnsupportedRegexError
from structgen.fsm import compile_regex, regex_to_dfa

PATTERNS = [
    r"abc",
    r"a|b|cd",
    r"[a-z]+",
    r"[^a-z]+",
    r'[^"\\]*',
    r"a{2,4}",
    r"(ab){1,3}c?",
    r"x*y+z?",
    r"(?:foo|bar)baz",
    r"\d{3}-\d{4}",
    r"\w+@\w+\.com",
    r"\s*\S+",
    r"[A-Fa-f0-9]{2,}",
    r".{0,3}",
    r"a.b",
    r"[à-ÿ]+",
    r"[😀-🙏]+",
    r"[😨]+",
    r"é+|ü",
    r"日本語?",
    r"[^é]",
    r"[\x00-\x7f]*",
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r"(true|false|null)",
    r"[a-c]{0,2}[x-z]{1,2}",
    r"(a|ab)(c|bcd)",
    r"((a|b)c)*",
    r"[\[\]\-]+",
    r"\.\*\+",
    r"(?:[ab]{2}){2}",
    r"[^\n]*\n",
    r"\D\W",
    r"[ -~]{1,5}",
    r"(?:é|è)+",
]

alphabet = st.characters(
    codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc"), exclude_characters="\r\x0b\x0c"
)
_settings = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _agree(pattern: str, text: str) -> None:
    grammar = compile_regex(pattern)
    expected = re.fullmatch(pattern, text, flags=re.ASCII) is not None
    assert grammar.matches(text) is expected, (pattern, text)


@pytest.mark.parametrize("pattern", PATTERNS)
@_settings
@given(data=st.data())
def test_regex_agrees_with_re(pattern: str, data) -> None:
    positive = data.draw(st.from_regex(pattern, fullmatch=True), "positive")
    _agree(pattern, positive)
    _agree(pattern, data.draw(st.text(alphabet=alphabet, max_size=8), "negative"))
    # mutations of a positive: a dropped, a doubled and a replaced character
    if positive:
        i = data.draw(st.integers(0, len(positive) - 1))
        c = data.draw(alphabet)
        for text in (
            positive[:i] + positive[i + 1 :],
            positive[:i] + positive[i] + positive[i:],
            positive[:i] + c + positive[i + 1 :],
        ):
            _agree(pattern, text)


def test_multibyte_character_boundaries() -> None:
    dfa = regex_to_dfa(r"[😀-🙏]+")
    emoji = "😨".encode()
    assert dfa.accepts(emoji * 3)
    state = dfa.walk(dfa.initial, emoji[:2])  # token ends inside a character
    assert state >= 0 and not dfa.is_accepting(state)
    assert dfa.walk(state, emoji[2:] + emoji) >= 0  # ... and the next one starts inside it
    assert dfa.walk(dfa.initial, "🚀".encode()[:3]) == -1  # U+1F680 is outside: dies at byte 3
    assert not dfa.accepts("😀".encode()[:3])


def test_negated_class_covers_all_unicode_but_no_invalid_utf8() -> None:
    dfa = regex_to_dfa(r'[^"\\]')
    for cp in (0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF):
        assert dfa.accepts(chr(cp).encode()), hex(cp)
    assert not dfa.accepts(b'"') and not dfa.accepts(b"\\")
    for bad in (
        b"\xed\xa0\x80",
        b"\xc0\x80",
        b"\xe0\x80\x80",
        b"\xf4\x90\x80\x80",
        b"\xff",
        b"\x80",
    ):
        assert not dfa.accepts(bad), bad
        assert dfa.walk(dfa.initial, bad) == -1, bad  # not even a live prefix


def test_dfa_is_trimmed_and_dense() -> None:
    dfa = regex_to_dfa(r"(ab|ac)d|e{2,3}")
    assert dfa.transitions.dtype == np.int32 and dfa.transitions.shape == (dfa.num_states, 256)
    # every state reaches acceptance: walk backwards from the accepting states
    live = dfa.accepting.copy()
    for _ in range(dfa.num_states):
        succ = np.where(dfa.transitions >= 0, live[np.maximum(dfa.transitions, 0)], False)
        live |= succ.any(axis=1)
    assert live.all()
    assert dfa.num_states == len({0}) + 5  # minimal: start, a, ab|ac, e, ee, final-ish
    assert dfa.accepts(b"abd") and dfa.accepts(b"eee") and not dfa.accepts(b"ad")


def test_minimal_state_counts() -> None:
    assert regex_to_dfa(r"(a|b)*c").num_states == 2
    assert regex_to_dfa(r"[a-z]+|[a-z]+").num_states == 2
    assert regex_to_dfa(r"a{3}").num_states == 4


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("(", RegexError),
        ("[a-", RegexError),
        ("a**", RegexError),
        ("(?=a)b", UnsupportedRegexError),
        ("a(?!b)", UnsupportedRegexError),
        ("(?<=a)b", UnsupportedRegexError),
        (r"(a)\1", UnsupportedRegexError),
        ("a^bc", UnsupportedRegexError),  # an anchor inside (at the ends: test_anchors)
        ("(" * 20000 + ")" * 20000, GrammarTooComplexError),  # large counts: test_automaton
        ("(?i)" + "(?:" * 400 + "a" + ")" * 400, GrammarTooComplexError),  # re path: RE_MAX_NESTING
    ],
)
def test_regex_errors(pattern: str, error: type) -> None:
    with pytest.raises(error):
        regex_to_dfa(pattern)
    assert issubclass(error, ValueError)


def test_state_budget_is_enforced() -> None:
    with pytest.raises(GrammarTooComplexError):
        regex_to_dfa(r"[a-z]{50}", max_states=20)


@pytest.mark.parametrize(
    "pattern",
    [
        "(?i)abc",
        "(?i)[a-c]+x",
        "(?i:straße)",
        "a(?i:b)c",
        "(?i)[^k]",
        "(?i)é+",
        "(?i)[a-zé]{2}",
        "(?i)ſ|K",
        "(?i)(?:hello|world)!",
        "(?i)[0-9a-f]{4}",
    ],
)
def test_ignorecase_matches_python_re(pattern) -> None:
    rng = random.Random(pattern)
    alpha = "abcxABCXkK\u212a\u017fsSß\u1e9eéÉhelloWORLD!0123456789fF\u0130i\u0131I"
    words = {"".join(rng.choice(alpha) for _ in range(rng.randint(0, 5))) for _ in range(1500)}
    words |= {
        "abc",
        "ABC",
        "STRAßE",
        "K",
        "\u212a",
        "\u017f",
        "s",
        "k",
        "hello!",
        "WORLD!",
        "É",
        "aBx",
        "aBc",
        "éÉ",
        "0aF9",
        "zÉ",
    }
    grammar = compile_regex(pattern)
    accepted = 0
    for w in words:
        expected = re.fullmatch(pattern, w) is not None
        assert grammar.matches(w) == expected, (pattern, w)
        accepted += expected
    assert accepted > 0


def test_ignorecase_huge_class_is_a_clear_error() -> None:
    with pytest.raises(UnsupportedRegexError, match="case-insensitive"):
        compile_regex("(?i)[\\U00010400-\\U00010500]")


def test_case_variants_equal_a_scan_of_every_code_point() -> None:
    """The fold table scans up to ``CASED_MAX``; the reference scans all of Unicode."""
    import _sre

    from structgen.fsm.regex import parse

    reference: dict[int, list[int]] = {}
    for cp in range(0x10FFFF + 1):
        reference.setdefault(_sre.unicode_tolower(cp), []).append(cp)
    assert (
        max(cp for cp in range(0x10FFFF + 1) if _sre.unicode_tolower(cp) != cp) <= parse.CASED_MAX
    )
    for low in list(parse._fold_table()) + [ord("a"), ord("1"), 0x10400, 0x10FFFF, 0xE000]:
        assert sorted(parse._case_variants(low)) == reference.get(low, [])
    for low, cps in reference.items():
        if len(cps) > 1:
            assert sorted(parse._case_variants(low)) == cps
