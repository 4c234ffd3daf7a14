"""Unicode classes of any size: exact against Python ``re.fullmatch``, valid UTF-8 only,
and a compact byte automaton (UTF-8 sequences split by length and shared leading bytes).
"""

from __future__ import annotations

import json
import random
import re

import jsonschema
import numpy as np
import pytest

from structgen.fsm import compile_json_schema, compile_regex, regex_to_dfa
from structgen.fsm.regex.utf8 import utf8_sequences

CLASSES = [
    r"[\uAC00-\uD7AF]",  # Hangul syllables
    r"[^\uAC00-\uD7AF]",
    r"[^\x00-\x7F]",
    r"[\u0000-\uFFFF]",
    r"[\U00010000-\U0010FFFF]",
    r"[\u0080-\U0010FFFF]",
    r"[\x00-\U0010FFFF]",
    r"[^a-z\u0400-\u04FF\U0001F600-\U0001F64F]",
    r"[\u00C0-\u00C5\u00D0-\u00D5\u3040-\u309F\U00020000-\U0002A6DF]",
    r"[\u07FF-\u0800\uD7FF\uE000\uFFFF-\U00010000]",  # the edges of every length, one each
    r"\W",
    r"\D",
    r".",
]
# every UTF-8 length boundary, the surrogate edges, continuation-byte carries
EDGES = [
    0x00, 0x0A, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xFFFF, 0x10000,
    0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF, 0x83F, 0x840, 0xAC00, 0xD7AF, 0xD7B0,
    0xABFF, 0x1F600, 0x1F64F, 0x1F650, 0x3FF, 0x400, 0x4FF, 0x500, 0x20000, 0x2A6DF, 0x2A6E0,
]  # fmt: skip
SURROGATES = [0xD800, 0xDBFF, 0xDC00, 0xDFFF]
INVALID_UTF8 = [
    b"\x80",  # lone continuation byte
    b"\xbf",
    b"\xc0\x80",  # overlong forms
    b"\xc1\xbf",
    b"\xe0\x80\x80",
    b"\xe0\x9f\xbf",
    b"\xf0\x80\x80\x80",
    b"\xf0\x8f\xbf\xbf",
    b"\xed\xa0\x80",  # surrogates (CESU-8)
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",  # past U+10FFFF
    b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xfe",
    b"\xff",
    b"\xc3\x28",  # a lead byte followed by a non-continuation byte
    b"\xe2\x82\x28",
]


def _samples(pattern: str, rng: random.Random) -> list[int]:
    """The edges, each edge of the class's own ranges (+-1), and random code points of
    every UTF-8 length."""
    cps = set(EDGES)
    for m in re.finditer(r"\\[uU]([0-9A-Fa-f]{4,8})|\\x([0-9A-Fa-f]{2})", pattern):
        cp = int(m.group(1) or m.group(2), 16)
        cps.update(c for c in (cp - 1, cp, cp + 1) if 0 <= c <= 0x10FFFF)
    for lo, hi in ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF)):
        cps.update(rng.randint(lo, hi) for _ in range(60))
    return sorted(c for c in cps if not 0xD800 <= c <= 0xDFFF)


def _reference(pattern: str, data: bytes) -> bool:
    """Python ``re`` (ASCII classes, the fsm's dialect) over the strictly decoded bytes;
    bytes that are not valid UTF-8 (surrogates and overlong forms included) match nothing."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return re.fullmatch(pattern, text, flags=re.ASCII) is not None


@pytest.mark.parametrize("pattern", CLASSES)
def test_class_agrees_with_re_on_sampled_code_points(pattern: str) -> None:
    rng = random.Random(pattern)
    grammar = compile_regex(pattern)
    accepted = rejected = 0
    for cp in _samples(pattern, rng):
        expected = re.fullmatch(pattern, chr(cp), flags=re.ASCII) is not None
        assert grammar.matches(chr(cp)) is expected, (pattern, hex(cp))
        accepted += expected
        rejected += not expected
    assert accepted and rejected or pattern in (r"[\x00-\U0010FFFF]",)
    repeated = compile_regex(f"(?:{pattern})+")
    text = "".join(chr(c) for c in _samples(pattern, rng) if re.fullmatch(pattern, chr(c)))
    assert repeated.matches(text) is (re.fullmatch(f"(?:{pattern})+", text, re.ASCII) is not None)


@pytest.mark.parametrize("pattern", CLASSES)
def test_class_rejects_invalid_utf8(pattern: str) -> None:
    dfa = regex_to_dfa(f"(?:{pattern})*")
    for cp in SURROGATES:  # no UTF-8 form: even a class that names them cannot match them
        assert not dfa.accepts(chr(cp).encode("utf-8", "surrogatepass")), hex(cp)
    for bad in INVALID_UTF8:
        assert not dfa.accepts(bad), bad
        assert not dfa.accepts(b"a" + bad), bad
    # random byte strings, biased to the bytes UTF-8 leads and continues with
    rng = random.Random(pattern)
    pool = list(range(0x80, 0x100)) + [0x41, 0x0A, 0x7F, 0x00]
    for _ in range(1500):
        data = bytes(rng.choice(pool) for _ in range(rng.randint(1, 6)))
        assert dfa.accepts(data) is _reference(f"(?:{pattern})*", data), (pattern, data)


def test_surrogate_range_matches_nothing_but_its_neighbours() -> None:
    grammar = compile_regex(r"[\uD7FF-\uE000]")
    assert grammar.matches("\ud7ff") and grammar.matches("\ue000")
    for cp in SURROGATES:
        assert not grammar.dfa.accepts(chr(cp).encode("utf-8", "surrogatepass"))


def test_utf8_sequences_split_by_length_and_leading_bytes() -> None:
    # U+AC00..U+D7AF = EA B0 80 .. ED 9E AF: one sequence per shared-leading-byte block
    assert utf8_sequences(0xAC00, 0xD7AF) == [
        [(0xEA, 0xEA), (0xB0, 0xBF), (0x80, 0xBF)],
        [(0xEB, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
        [(0xED, 0xED), (0x80, 0x9D), (0x80, 0xBF)],
        [(0xED, 0xED), (0x9E, 0x9E), (0x80, 0xAF)],
    ]
    # every code point but the surrogates: the 9 sequences of the UTF-8 definition (RFC 3629)
    every = utf8_sequences(0, 0xD7FF) + utf8_sequences(0xE000, 0x10FFFF)
    assert len(every) == 9


@pytest.mark.parametrize(
    ("pattern", "states"),
    [
        # start, after EA, after EB-EC, after ED, after ED 9E, one byte to go, final
        (r"[\uAC00-\uD7AF]", 7),
        (r"[\uAC00-\uD7AF]+", 7),
        # start, E0, ED, F0, F4, 1/2/3 bytes to go, final: the minimal DFA of one code point
        (r"[^\x00-\x7F]", 9),
        (r"[\x00-\U0010FFFF]*", 8),  # the final state is the start state
        (r"[\U00010000-\U0010FFFF]", 7),
        (r"[\u0000-\uFFFF]", 6),
    ],
)
def test_big_class_dfa_is_small(pattern: str, states: int) -> None:
    dfa = regex_to_dfa(pattern)
    assert dfa.explore()
    assert dfa.num_states == states, (pattern, dfa.num_states)  # minimal (and trimmed)


HANGUL_SCHEMA = {"type": "string", "pattern": "^[\\uAC00-\\uD7AF]+$"}


@pytest.mark.parametrize(
    "schema",
    [
        HANGUL_SCHEMA,
        {"type": "string", "pattern": "[^\\x00-\\x7F]"},
        {"type": "string", "pattern": "^[\\u0000-\\uFFFF]{2}$"},
        {"type": "string", "pattern": "^[\\U00010000-\\U0010FFFF]+$"},
        {"type": "string", "pattern": "^[^\\uAC00-\\uD7AF]$"},
    ],
)
def test_json_schema_big_class_agrees_with_jsonschema(schema: dict) -> None:
    grammar = compile_json_schema(schema)
    # ECMA-262's ``$`` (JSON Schema's dialect) is the end of the string, where Python's also
    # matches before a final newline (the test suite's optional/ecmascript-regex.json): ``\Z``
    reference = {**schema, "pattern": schema["pattern"].replace("$", "\\Z")}
    validator = jsonschema.Draft202012Validator(reference)
    rng = random.Random(schema["pattern"])
    cps = _samples(schema["pattern"], rng)
    texts = ["", "한국어", "abc", "가힣", "\U0001f600", '"', "\\", "\n", "a\u00e9", "\uffff\uffff"]
    texts += [chr(c) for c in cps]
    texts += ["".join(chr(rng.choice(cps)) for _ in range(rng.randint(1, 4))) for _ in range(200)]
    seen = set()
    for s in texts:
        # the grammar writes one JSON form per character: raw, short escapes, \u00XX controls
        text = json.dumps(s, ensure_ascii=False)
        expected = validator.is_valid(s)
        seen.add(expected)
        assert grammar.matches(text) is expected, (schema, s)
    assert seen == {True, False}


def _walk_token(dfa, state: int, data: bytes) -> int:
    for b in data:
        state = dfa.step(state, b)
        if state < 0:
            return -1
    return state


@pytest.mark.slow
def test_big_class_masks_exact_over_smollm2(smollm2_vocab) -> None:
    vocab = smollm2_vocab
    grammar = compile_json_schema(HANGUL_SCHEMA, vocab)
    dfa, index = grammar.dfa, grammar.token_index
    never = vocab.special_token_ids | vocab.eos_token_ids
    states = [dfa.walk(dfa.initial, p) for p in (b'"', '"한'.encode(), '"한'.encode()[:2])]
    assert all(s >= 0 for s in states)
    for state in states:
        nxt = index.next_states(state)
        expected = np.full(vocab.vocab_size, -1, dtype=np.int64)
        for tid, data in enumerate(vocab.token_bytes):
            if tid not in never and data:
                expected[tid] = _walk_token(dfa, state, data)
        for eos in vocab.eos_token_ids:
            expected[eos] = state if dfa.is_accepting(state) else -1
        actual = np.asarray(nxt[: vocab.vocab_size], dtype=np.int64)
        diff = np.nonzero(actual != expected)[0][:10].tolist()
        assert not diff, [(t, vocab.token_bytes[t], actual[t], expected[t]) for t in diff]
        assert (expected >= 0).sum() > 0


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [
        (r"(?i)\S+", re.ASCII),  # re folds no class of categories only: \S is \S
        (r"(?i)\W", re.ASCII),
        (r"(?i)[\D]", re.ASCII),
        (r"(?i)[\u0000-\uFFFF]", 0),  # the whole BMP (the fold table's size, not a cap)
        (r"(?i)[^\x00-\x7F]", 0),  # K (U+212A) folds to k: outside, as in re
        (r"(?i)[^\u00C0-\u00FF]", 0),
    ],
)
def test_ignorecase_big_classes_agree_with_re(pattern: str, flags: int) -> None:
    rng = random.Random(pattern)
    grammar = compile_regex(pattern)
    cps = _samples(pattern, rng) + [0x212A, 0x17F, 0x130, 0x131, 0xC0, 0xE0, 0xFF, 0x178, 0x1E9E]
    for cp in cps:
        expected = re.fullmatch(pattern, chr(cp), flags=flags) is not None
        assert grammar.matches(chr(cp)) is expected, (pattern, hex(cp))
