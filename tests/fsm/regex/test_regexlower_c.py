"""The C token loop of the regex lowering (csrc/regexlower.c) against its Python loop.

Both must write the same terms in the same order into the arena, leave the same memo,
and return the same result (a term, None for syntax left to ``re``, or the same error),
text after text with shared definitions; the Python loop is itself checked against
``re``'s parser in test_lower.py.
"""

from __future__ import annotations

import random

import pytest

from structgen.errors import GrammarTooComplexError, StructgenError
from structgen.fsm.deadline import NEVER, Deadline
from structgen.fsm.regex import lower, parse
from structgen.fsm.regex.lower import HAVE_C_LOWER, fast_lower
from structgen.fsm.regex.terms import TermArena

from .test_lower import CORNERS, _random_regex, converter_texts

pytestmark = pytest.mark.skipif(not HAVE_C_LOWER, reason="csrc/regexlower.c is not built")


def _lower_all(texts: list[str], use_c: bool, max_terms: int = 5_000_000):
    lower._ATOM_RECIPES.clear()  # both loops start from the same recipe cache
    arena = TermArena(max_terms=max_terms)
    shared: list[int] = []
    memo: dict = {}
    results: list = []
    for text in texts:
        try:
            term = fast_lower(
                text,
                parse._Lowering(arena, text, NEVER, shared),
                memo,
                parse.MAX_NESTING,
                use_c=use_c,
            )
        except StructgenError as exc:
            results.append((type(exc).__name__, str(exc)))
            break
        results.append(term)
        shared.append(1 if term is None else term)
    return results, arena.kind, arena.args, arena.nullable, arena.first, arena.depth, memo


def _assert_same(texts: list[str], **kw) -> None:
    c_side = _lower_all(texts, True, **kw)
    py_side = _lower_all(texts, False, **kw)
    names = ("results", "kind", "args", "nullable", "first", "depth", "memo")
    for name, a, b in zip(names, c_side, py_side):
        assert a == b, (name, texts)


@pytest.mark.parametrize("text", CORNERS)
def test_corner_cases(text: str) -> None:
    _assert_same([text])


def test_random_regexes_with_definitions() -> None:
    rng = random.Random(11)
    for _ in range(300):
        _assert_same([_random_regex(rng) for _ in range(rng.randint(1, 3))])


def test_placeholders_in_literal_runs() -> None:
    p0, p1, p9 = (
        chr(parse.PLACEHOLDER_BASE),
        chr(parse.PLACEHOLDER_BASE + 1),
        chr(parse.PLACEHOLDER_BASE + 9),
    )
    _assert_same(["(?:ab|c)+", f"x{p0}y", f"é{p0}{p1}ü{p9}z", f"{p1}?", f"[a]{p0}\ud800{p1}"])


def test_converter_output() -> None:
    checked = 0
    for texts in converter_texts(3):
        _assert_same(texts)
        checked += 1
    assert checked >= 20


def test_term_budget_error_is_the_same() -> None:
    texts = ['"(?:[^"\\\\]|\\\\.)*"', "a" * 300 + "(?:b|c)" * 40]
    _assert_same(texts, max_terms=60)
    results = _lower_all(texts, True, max_terms=60)[0]
    assert results[-1][0] == GrammarTooComplexError.__name__


def test_deadline_is_checked() -> None:
    arena = TermArena()
    text = "(?:a|b)" * 3000  # more than 1024 tokens: the loop asks for the deadline
    with pytest.raises(GrammarTooComplexError, match="time budget"):
        fast_lower(
            text, parse._Lowering(arena, text, Deadline(0.0), []), {}, parse.MAX_NESTING, use_c=True
        )
