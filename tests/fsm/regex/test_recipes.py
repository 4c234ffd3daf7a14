"""Recipes (``regex.recipes``): a term exported from one arena and imported into another
is the very term lowering the same regex there gives (hash-consing makes equal
structure equal ids), whatever the other arena already holds."""

from __future__ import annotations

import random

from structgen.fsm.regex import parse
from structgen.fsm.regex.recipes import export_term, import_term
from structgen.fsm.regex.terms import EPS, TermArena

from .test_lower import _random_regex

TEXTS = [
    r'[^"\\\x00-\x1f]',
    ".",
    r"[\w\-é-ﬀ]",
    r"\d+(?:\.\d+)?",
    "(?:ab|a)*c{2,5}",
    "(?:x|)y?",
    "[\U0001f600-\U0001f64f]{1,3}",
]


def _lower(text: str, arena: TermArena) -> int:
    return parse.lower(text, arena)


def test_import_gives_the_term_of_a_fresh_build() -> None:
    rng = random.Random(7)
    texts = TEXTS + [_random_regex(rng) for _ in range(200)]
    for text in texts:
        source = TermArena()
        term = _lower(text, source)
        if term <= EPS:
            continue
        recipe = export_term(source, term)
        assert len(recipe) == len(set(recipe))  # shared subterms listed once
        target = TermArena()
        _lower(_random_regex(rng), target)  # other terms first: other ids
        imported = import_term(target, recipe)
        assert _lower(text, target) == imported, text
        assert len(export_term(target, imported)) == len(recipe)


def test_until_and_deep_chains_survive() -> None:
    source = TermArena()
    term = source.until(b"</think>", _lower("a" * 5000 + "(?:b|c)*", source))
    recipe = export_term(source, term)
    target = TermArena()
    got = import_term(target, recipe)
    assert len(export_term(target, got)) == len(recipe)
    assert target.until(b"</think>", _lower("a" * 5000 + "(?:b|c)*", target)) == got
