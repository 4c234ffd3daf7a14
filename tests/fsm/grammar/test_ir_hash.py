"""The IR's composite nodes (``Seq``, ``Alt``, ``Repeat``) keep their hash after the first
call (``ir._Composite``): equal nodes still hash alike, the cached value never travels in a
pickle or a copy, and the lowering builds the same ``CfgGrammar`` as from fresh nodes.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import random

from structgen.fsm.grammar import lower
from structgen.fsm.grammar.front import parse_grammar
from structgen.fsm.grammar.ir import Alt, Literal, Pattern, Ref, Repeat, Seq
from structgen.fsm.grammar.lower import lower_grammar


def _random_expr(rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.3:
        kind = rng.randrange(3)
        if kind == 0:
            return Ref(rng.choice("abc"), rng.randrange(3), 0)
        if kind == 1:
            return Literal(rng.choice(["x", "y", ""]))
        return Pattern(rng.choice(["[0-9]+", "a|b"]), rng.randrange(3))
    kind = rng.randrange(3)
    if kind == 2:
        hi = rng.choice([None, 1, 3])
        return Repeat(_random_expr(rng, depth - 1), rng.choice([0, 1]), hi)
    items = tuple(_random_expr(rng, depth - 1) for _ in range(rng.randrange(0, 4)))
    return Seq(items) if kind == 0 else Alt(items)


def _all_nodes(expr):
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, (Seq, Alt)):
            stack.extend(e.items)
        elif isinstance(e, Repeat):
            stack.append(e.item)


def test_equal_nodes_hash_alike_and_sets_agree():
    """Two independently built equal trees are equal and hash alike, whether or not either
    was hashed before; set and dict membership follow equality (the reference: the
    trees compared field by field, and each pair of distinct trees too)."""
    for seed in range(200):
        rng = random.Random(seed)
        a = _random_expr(rng, 4)
        b = _random_expr(random.Random(seed), 4)
        c = _random_expr(random.Random(seed + 1000), 4)
        assert a == b
        hash(a)  # a's hash cached first, b's computed fresh
        assert hash(a) == hash(b)
        assert (b in {a}) and (a in {b: 1})
        assert (c in {a}) == (c == a)
        if c == a:
            assert hash(c) == hash(a)


def test_pickle_and_copies_leave_the_cached_hash_behind():
    expr = Seq((Ref("a", 1, 2), Repeat(Alt((Literal("x"), Pattern("[0-9]"))), 0, None)))
    hash(expr)
    assert b"_hash" not in pickle.dumps(expr)
    back = pickle.loads(pickle.dumps(expr))
    assert back == expr and "_hash" not in back.__dict__
    assert hash(back) == hash(expr)
    for other in (copy.copy(expr), copy.deepcopy(expr)):
        assert other == expr and "_hash" not in other.__dict__
    swapped = dataclasses.replace(expr, items=expr.items[:1])
    assert swapped != expr and hash(swapped) == hash(Seq((Ref("a", 1, 2),)))
    assert repr(expr).startswith("Seq(items=(Ref(name='a'")


def test_lowering_is_the_same_with_hashes_cached():
    """A grammar lowered from a freshly parsed definition and from one whose every node was
    hashed before gives the same productions, names and terminals."""
    text = """
    start: item+ ("," item)* ";"?
    item: "(" start ")" | NAME ("=" NAME)? | "[" (item ("," item)*)? "]"
    NAME: /[a-z]+/
    """
    fresh = lower_grammar(parse_grammar(text, "lark", None))
    hashed_def = parse_grammar(text, "lark", None)
    for expr in hashed_def.rules.values():
        for node in _all_nodes(expr):
            hash(node)
    hashed = lower_grammar(hashed_def)
    for field in ("terminals", "lhs", "rhs", "names", "ignore", "sources"):
        assert getattr(hashed, field) == getattr(fresh, field), field


def test_closed_entry_without_refs_gives_the_same_productions():
    """``_closed_entry(..., refs=False)`` (what ``_add_closed`` asks) hands back the stored
    productions unchanged, and the references only when asked."""
    lower.clear_closed()
    expr = Alt((Literal("x"), Seq((Literal("["), Ref("r", 3, 4), Literal("]")))))
    refs, frag = lower._closed_entry("k", "r", expr)
    assert frag is not None and refs == (Ref("r", 3, 4),)
    assert lower._closed_entry("k", "r", expr, refs=False) == ((), frag)
    assert lower._closed_entry("k", "s", expr)[0] == (Ref("s", 3, 4),)
    lower.clear_closed()
