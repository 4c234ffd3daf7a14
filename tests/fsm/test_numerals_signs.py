"""Signed numerals (``structgen.fsm.numerals``): ``minus six``, ``minus 6``, ``−6`` read
as negative, against a token-level brute-force reader and an explicit table, and a
copied number field accepting exactly those values."""

from __future__ import annotations

import json
import random
from decimal import Decimal

import pytest

from structgen.fsm.compiler import compile_spec
from structgen.fsm.json_schema.copy import CopyJsonSchema
from structgen.fsm.numerals import numeral_spans, numerals


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("between minus six and minus one degrees", [("minus six", [-6]), ("minus one", [-1])]),
        ("low minus 6 °C", [("minus 6", [-6])]),
        ("Minus twenty-one", [("Minus twenty-one", [-21])]),
        ("minus 0.5 dB", [("minus 0.5", [Decimal("-0.5")])]),
        ("\u22126 °C, high -4", [("6", [-6, 6]), ("4", [-4, 4])]),
        # a subtraction: the sign word after a numeral signs nothing
        ("ten minus three", [("ten", [10]), ("three", [3])]),
        ("10 minus 3", [("10", [10]), ("3", [3])]),
        # not the word "minus" on its own
        ("Minuscule 5 and xminus 7", [("5", [5]), ("7", [7])]),
        ("minus the 2 fees", [("2", [2])]),
    ],
)
def test_signed_numerals_table(text, want):
    got = [(text[a:b], sorted(vs)) for a, b, vs in numeral_spans(text)]
    assert got == [(s, sorted(Decimal(v) for v in vs)) for s, vs in want]
    assert {v for _, vs in want for v in vs} == set(numerals(text))


_WORDS = {"one": 1, "six": 6, "ten": 10, "twenty": 20}
_VOCAB = ["minus", "minus", "six", "one", "twenty", "ten", "12", "45", "\u22127", "and", "°C", "x"]


def _reference(tokens: list[str]) -> list[list[Decimal]]:
    """Brute force over space-separated tokens: numerals (a tens word followed by a word
    under ten composes), each read negative only when the token before it is ``minus``
    and the token before that is no numeral; ``−7`` reads 7 and -7."""
    numerals_: list[tuple[int, int, int]] = []  # first token, last token, value
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t in _WORDS:
            v, j = _WORDS[t], i
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
            if t == "twenty" and nxt in _WORDS and _WORDS[nxt] < 10:
                v, j = v + _WORDS[nxt], i + 1
            numerals_.append((i, j, v))
            i = j + 1
        elif t.isdigit() or t.startswith("\u2212"):
            numerals_.append((i, i, int(t.lstrip("\u2212"))))
            i += 1
        else:
            i += 1
    last_tokens = {j for _, j, _ in numerals_}
    out: list[list[Decimal]] = []
    for i, _, v in numerals_:
        if tokens[i].startswith("\u2212"):
            out.append(sorted([Decimal(v), Decimal(-v)]))
        elif i > 0 and tokens[i - 1] == "minus" and i - 2 not in last_tokens:
            out.append([Decimal(-v)])
        else:
            out.append([Decimal(v)])
    return out


def test_signed_numerals_match_a_brute_force_reading():
    rng = random.Random(29)
    signed = 0
    for _ in range(1500):
        tokens = [rng.choice(_VOCAB) for _ in range(rng.randint(1, 9))]
        digits = [t.lstrip("\u2212").isdigit() for t in tokens]
        if any(a and b for a, b in zip(digits, digits[1:], strict=False)):
            continue  # "12 45" is one digit run with a space (the module's separators)
        text = " ".join(tokens)
        want = _reference(tokens)
        got = [sorted(vs) for _, _, vs in numeral_spans(text)]
        assert got == want, text
        assert set(numerals(text)) == {v for vs in want for v in vs}, text
        signed += any(len(vs) == 1 and vs[0] < 0 for vs in want)
    assert signed > 200


TEXT = "Sapporo: between minus six and minus one degrees, feels like \u22129 °C; 10 minus 3 lifts."


@pytest.mark.parametrize(
    ("field", "allowed"),
    [
        ({"type": "integer"}, {-6, -1, 9, -9, 10, 3}),
        ({"type": "number", "minimum": -60, "maximum": 60}, {-6, -1, 9, -9, 10, 3}),
        ({"type": "integer", "maximum": 0}, {-6, -1, -9}),
    ],
)
def test_copied_number_accepts_exactly_the_signed_numerals(field, allowed):
    schema = {"type": "object", "properties": {"n": field}, "required": ["n"]}
    grammar = compile_spec(CopyJsonSchema(schema, copy_from=(TEXT,)))
    for value in range(-70, 71):
        doc = json.dumps({"n": value}, separators=(",", ":"))
        assert grammar.matches(doc) == (value in allowed), value
