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
from structgen.fsm.regex.recipes import export_term, import_term
from structgen.fsm.regex.terms import ALT, TermArena

from .test_lower import CORNERS, _random_regex, converter_texts

pytestmark = pytest.mark.skipif(not HAVE_C_LOWER, reason="csrc/regexlower.c is not built")


def _lower_all(
    texts: list[str],
    use_c: bool,
    max_terms: int = 5_000_000,
    recipes: dict | None = None,
    prefill: tuple = (),
):
    lower._ATOM_RECIPES.clear()  # both loops start from the same recipe cache
    lower._ATOM_RECIPES.update(recipes or {})
    arena = TermArena(max_terms=max_terms)
    for recipe in prefill:
        import_term(arena, recipe)
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


def _recipes_of(texts: list[str]) -> dict:
    """The atom recipes lowering ``texts`` once leaves (what later compiles import)."""
    _lower_all(texts, False)
    return dict(lower._ATOM_RECIPES)


def _num_imported_nodes(recipes: dict) -> int:
    return sum(len(r) for r in recipes.values() if type(r) is tuple)


def test_imported_recipes_are_the_same() -> None:
    # a second compile imports the escapes' and classes' recipes instead of building them:
    # the C import must intern the same terms, in the same order, as recipes.import_term
    # the decoys, lowered first, intern some of the imported terms' parts under other ids, so
    # an alternation's members must be sorted again by the new ids
    decoys = [r"[^b\x00]", r"\D|\u00e9"]
    imported = 0
    for texts in converter_texts(3):
        warm = _recipes_of(texts)
        _assert_same(texts, recipes=warm)
        _assert_same(decoys + texts, recipes=warm)
        imported += _num_imported_nodes(warm)
    assert imported >= 1000  # the JSON string class alone is ~30 nodes per schema
    rng = random.Random(12)
    for _ in range(100):
        texts = [_random_regex(rng) for _ in range(rng.randint(1, 3))]
        warm = _recipes_of(texts + [r"[^\x00-\x1f]\d\W."])
        assert _num_imported_nodes(warm) > 30
        _assert_same(texts, recipes=warm)
        _assert_same(decoys + texts, recipes=warm)


def test_imported_alternation_members_are_sorted_by_the_new_ids() -> None:
    # an alternation's later members interned first (under smaller ids) than its earlier ones
    texts = [r'"(?:[^"\\\x00-\x1f]|\\u[0-9a-f]{4})*"', r"\w+\s"]
    recipes = _recipes_of(texts)
    source = TermArena()
    late = []
    for recipe in recipes.values():
        if type(recipe) is not tuple:
            continue
        top = import_term(source, recipe)
        for t in range(2, top + 1):
            if source.kind[t] == ALT:
                late.append(export_term(source, source.args[t][-1]))
    assert late
    # (an import that kept the recipe's member order fails here, not in the tests above)
    _assert_same(texts, recipes=recipes, prefill=tuple(late))


def test_imported_recipe_past_the_term_budget_is_the_same_error() -> None:
    texts = [r'"(?:[^"\\\x00-\x1f]|\\u[0-9a-f]{4})*"']
    recipes = _recipes_of(texts)
    for budget in (5, 12, 20):
        _assert_same(texts, max_terms=budget, recipes=recipes)
    assert _lower_all(texts, True, max_terms=12, recipes=recipes)[0][-1][0] == (
        GrammarTooComplexError.__name__
    )


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
