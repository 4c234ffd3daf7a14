"""Intersection and complement terms (``AND`` / ``NOT``) against a brute-force reference.

Random extended regexes over the bytes ``a``/``b`` are built both as arena terms and as
a tree that a direct membership test evaluates; the complete ``ByteDFA`` must agree with
the reference on every string up to length 6, and every live transition must lead to a
state from which acceptance is reachable (masks never offer a dead end).
"""

from __future__ import annotations

import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.errors import GrammarTooComplexError, UnsupportedRegexError
from structgen.fsm.deadline import Deadline
from structgen.fsm.regex.definitions import (
    COMPLEMENT,
    INTERSECT,
    PLACEHOLDER_BASE,
    expand_shared,
)
from structgen.fsm.regex.dfa import regex_to_dfa
from structgen.fsm.regex.lazy_dfa import ByteDFA
from structgen.fsm.regex.terms import EMPTY, INF, TermArena

ALPHABET = "ab"
MAX_LEN = 6

_leaf = st.sampled_from([("lit", "a"), ("lit", "b"), ("eps",), ("none",)])
_trees = st.recursive(
    _leaf,
    lambda sub: st.one_of(
        st.tuples(st.sampled_from(["cat", "alt", "and"]), sub, sub),
        st.tuples(st.sampled_from(["star", "not"]), sub),
    ),
    max_leaves=6,
)


def _member(tree, text: str) -> bool:
    @functools.cache
    def m(node, s: str) -> bool:
        op = node[0]
        if op == "lit":
            return s == node[1]
        if op == "eps":
            return s == ""
        if op == "none":
            return False
        if op == "cat":
            return any(m(node[1], s[:i]) and m(node[2], s[i:]) for i in range(len(s) + 1))
        if op == "alt":
            return m(node[1], s) or m(node[2], s)
        if op == "and":
            return m(node[1], s) and m(node[2], s)
        if op == "not":
            return not m(node[1], s)
        # star: the empty string, or a non-empty first piece then the rest
        return s == "" or any(m(node[1], s[:i]) and m(node, s[i:]) for i in range(1, len(s) + 1))

    return m(tree, text)


def _term(arena: TermArena, tree) -> int:
    op = tree[0]
    if op == "lit":
        return arena.byteset(1 << ord(tree[1]))
    if op == "eps":
        return 1
    if op == "none":
        return EMPTY
    if op == "cat":
        return arena.concat(_term(arena, tree[1]), _term(arena, tree[2]))
    if op == "alt":
        return arena.alt([_term(arena, tree[1]), _term(arena, tree[2])])
    if op == "and":
        return arena.intersect([_term(arena, tree[1]), _term(arena, tree[2])])
    if op == "not":
        return arena.complement(_term(arena, tree[1]))
    return arena.repeat(_term(arena, tree[1]), 0, INF)


def _strings():
    for n in range(MAX_LEN + 1):
        for chars in itertools.product(ALPHABET, repeat=n):
            yield "".join(chars)


def _can_accept(dfa: ByteDFA) -> set[int]:
    """States of the complete automaton from which an accepting state is reachable."""
    table = dfa.transitions
    live = {s for s in range(dfa.num_states) if dfa.is_accepting(s)}
    changed = True
    while changed:
        changed = False
        for s in range(dfa.num_states):
            if s not in live and any(int(t) in live for t in table[s] if t >= 0):
                live.add(s)
                changed = True
    return live


@settings(max_examples=300, deadline=None)
@given(_trees)
def test_boolean_terms_match_the_reference(tree):
    arena = TermArena()
    root = _term(arena, tree)
    language = {s for s in _strings() if _member(tree, s)}
    if root == EMPTY or arena.is_empty(root):
        assert not language  # an empty language (within MAX_LEN: checked below otherwise)
        return
    dfa = ByteDFA(arena, root)
    assert dfa.explore()
    for s in _strings():
        assert dfa.accepts(s.encode()) == (s in language), (tree, s)
    # liveness: every discovered state (all reached through live transitions) can accept
    assert _can_accept(dfa) == set(range(dfa.num_states)), tree


@settings(max_examples=200, deadline=None)
@given(_trees)
def test_is_empty_is_exact(tree):
    arena = TermArena()
    root = _term(arena, tree)
    empty = root == EMPTY or arena.is_empty(root)
    if not empty:  # a witness exists: the search found a nullable derivative
        dfa = ByteDFA(arena, root)
        assert dfa.explore()
        assert any(dfa.is_accepting(s) for s in range(dfa.num_states))
    else:  # no string at all; these small trees have short witnesses when non-empty
        assert not any(_member(tree, s) for s in _strings())


def test_named_cases():
    arena = TermArena()
    a, b = arena.byteset(1 << 97), arena.byteset(1 << 98)
    a_star = arena.repeat(a, 0, INF)
    assert arena.intersect([a, b]) == EMPTY  # no common first byte
    assert arena.intersect([a_star, arena.complement(a_star)]) == EMPTY
    assert arena.complement(arena.complement(a)) == a
    assert arena.complement(EMPTY) == arena.universe()
    # !(a*) & a* is syntactically caught; (aa)* & !(a*) is empty only semantically
    even = arena.repeat(arena.concat(a, a), 0, INF)
    t = arena.intersect([even, arena.complement(a_star)])
    assert t != EMPTY and arena.is_empty(t)
    # a dead byte is never offered: from a*&!(aa)* the byte b leads nowhere
    odd = arena.intersect([a_star, arena.complement(even)])
    dfa = ByteDFA(arena, odd)
    assert dfa.row(0)[ord("b")] == -1 and dfa.row(0)[ord("a")] >= 0
    assert dfa.accepts(b"a") and not dfa.accepts(b"aa") and dfa.accepts(b"aaa")


def test_boolean_definitions_lower_and_refuse_text():
    p = [chr(PLACEHOLDER_BASE + i) for i in range(4)]
    definitions = ["[a-c]*", "a*", COMPLEMENT + p[1], INTERSECT + p[0] + p[2]]
    dfa = regex_to_dfa(p[3], definitions=definitions)
    assert dfa.accepts(b"ab") and dfa.accepts(b"c")
    assert not dfa.accepts(b"") and not dfa.accepts(b"aa") and not dfa.accepts(b"d")
    with pytest.raises(UnsupportedRegexError, match="intersects or complements"):
        expand_shared(p[3], definitions)
    with pytest.raises(UnsupportedRegexError, match="malformed"):
        regex_to_dfa(p[1], definitions=["a", INTERSECT + p[0]])


def test_a_pattern_cannot_use_the_markers():
    # outside a definition the markers are plain code points, as any other
    dfa = regex_to_dfa(INTERSECT + "a")
    assert dfa.accepts((INTERSECT + "a").encode()) and not dfa.accepts(b"a")


def test_emptiness_search_budget():
    arena = TermArena(max_empty_checks=50)
    digit = arena.byteset(sum(1 << c for c in range(48, 58)))
    pairs = arena.repeat(arena.concat(digit, digit), 100, 100)  # not subsumed syntactically
    t = arena.intersect([pairs, arena.complement(arena.repeat(digit, 200, 200))])
    with pytest.raises(GrammarTooComplexError, match="empty"):
        arena.is_empty(t)


def test_emptiness_search_deadline():
    arena = TermArena()
    digit = arena.byteset(sum(1 << c for c in range(48, 58)))
    pairs = arena.repeat(arena.concat(digit, digit), 100, 100)
    t = arena.intersect([pairs, arena.complement(arena.repeat(digit, 200, 200))])
    arena.deadline = Deadline(0.0)  # spent: the search stops at its first time check
    with pytest.raises(GrammarTooComplexError, match="time budget"):
        arena.is_empty(t)
    arena.search_seconds = 0.0  # no compile budget (matching): each search has its own
    arena.deadline = None
    with pytest.raises(GrammarTooComplexError, match="EMPTY_SEARCH_SECONDS"):
        arena.is_empty(t)
    arena.search_seconds = 60.0
    assert arena.is_empty(t)  # (dd){100} lies inside d{200}


def test_emptiness_is_decided_from_the_parts():
    # a concatenation is empty when a part is, an alternation when every member is: the
    # search runs on the intersection alone (its verdict memoised for every context)
    arena = TermArena()
    a, b = arena.byteset(1 << 97), arena.byteset(1 << 98)
    a_star = arena.repeat(a, 0, INF)
    even = arena.repeat(arena.concat(a, a), 0, INF)
    dead = arena.intersect([even, arena.complement(a_star)])  # empty, not syntactically
    live = arena.intersect([a_star, arena.complement(even)])  # the odd counts of a
    assert arena.is_empty(arena.concat(b, arena.concat(dead, b)))
    assert arena.is_empty(arena.alt([arena.concat(a, dead), arena.concat(dead, b)]))
    assert not arena.is_empty(arena.alt([arena.concat(a, dead), arena.concat(live, b)]))
    assert not arena.is_empty(arena.repeat(dead, 0, 3))  # zero copies: the empty string
    assert arena.is_empty(arena.repeat(dead, 1, 3))
    assert arena.is_empty(arena.until(b"ab", dead)) and not arena.is_empty(arena.until(b"a", live))
    # the parts' verdicts agree with the whole automaton's
    for t in (arena.concat(live, b), arena.concat(b, arena.concat(dead, b))):
        dfa = ByteDFA(arena, t)
        assert dfa.explore()
        assert any(dfa.is_accepting(s) for s in range(dfa.num_states)) == (not arena.is_empty(t))


def test_deep_terms_are_decided_from_the_parts(monkeypatch):
    # a document-deep concatenation / alternation (a key state with the rest of the
    # document after it; depth past the recursive derivatives' limit) is decided from its
    # parts too, iteratively: only the intersections are searched, and each verdict equals
    # the whole-term search's (a fresh arena) and the trees' brute-force membership
    from structgen.fsm.regex import terms

    def build(arena: TermArena, dead_at: int | None, live_at: int | None, depth: int) -> int:
        a, b = arena.byteset(1 << 97), arena.byteset(1 << 98)
        a_star = arena.repeat(a, 0, INF)
        even = arena.repeat(arena.concat(a, a), 0, INF)
        dead = arena.intersect([even, arena.complement(a_star)])  # empty
        live = arena.intersect([a_star, arena.complement(even)])  # odd counts of a
        t = b
        for k in range(depth):  # right-nested: each level one concatenation (and an alt)
            head = dead if k == dead_at else live if k == live_at else a
            t = arena.concat(head, t)
            if k % 3 == 0:
                t = arena.alt([t, arena.concat(b, arena.concat(dead, t))])
        return t

    searched: list[int] = []
    search = TermArena._search_empty

    def recorded(self, t):
        searched.append(self.kind[t])
        return search(self, t)

    monkeypatch.setattr(TermArena, "_search_empty", recorded)
    depth = 3 * terms._SHALLOW
    for dead_at, live_at, want in ((None, 5, False), (7, 5, True), (None, None, False),
                                   (depth - 1, None, True), (0, depth - 2, True)):  # fmt: skip
        arena = TermArena()
        t = build(arena, dead_at, live_at, depth)
        assert arena.depth[t] > terms._SHALLOW
        searched.clear()
        assert arena.is_empty(t) is want, (dead_at, live_at)
        assert set(searched) <= {terms.AND}  # never the deep term itself
        whole = TermArena()
        u = build(whole, dead_at, live_at, depth)
        assert whole._search_empty(u) is want  # the whole-term search agrees
        # every head matches "a" but the empty intersection: a^depth b is the witness
        assert ByteDFA(arena, t).accepts(b"a" * depth + b"b") is not want


def test_deep_spine_derivatives_equal_the_bottom_up_ones(monkeypatch):
    # a deep concatenation / alternation / intersection (a document's rest) is derived by
    # its own branch, recursing into what can start it, with no bottom-up pass over its
    # spine; the result (hash-consed) is the very term the bottom-up pass gives
    from structgen.fsm.regex import terms

    arena = TermArena()
    a, b, c = (arena.byteset(1 << x) for x in (97, 98, 99))
    a_star = arena.repeat(a, 0, INF)
    odd = arena.intersect([a_star, arena.complement(arena.repeat(arena.concat(a, a), 0, INF))])
    t = c
    for k in range(3 * terms._SHALLOW):  # nested: each level an alternation (its depth)
        head = [a, a_star, odd, arena.alt([a, b])][k % 4]
        t = arena.alt([arena.concat(head, t), arena.concat(b, arena.concat(c, t))])
    deep = [t, arena.intersect([t, arena.complement(arena.concat(a, a_star))])]
    assert all(arena.depth[u] > terms._SHALLOW for u in deep)
    assert all(bin(arena.first[u]).count("1") >= 2 for u in deep)
    calls: list[int] = []
    bottom_up = TermArena._bottom_up
    monkeypatch.setattr(
        TermArena, "_bottom_up", lambda self, u, x: (calls.append(u), bottom_up(self, u, x))[1]
    )
    for u in deep:
        for x in [x for x in (97, 98, 99) if (arena.first[u] >> x) & 1]:
            direct = arena.derivative(u, x)
            assert not calls, (u, x)
            arena._deriv.clear()
            arena._deep_levels = terms._SHALLOW  # no direct level left: bottom-up
            try:
                assert arena.derivative(u, x) == direct, (u, x)
            finally:
                arena._deep_levels = 0
            assert calls
            calls.clear()


def test_accepts_needs_no_emptiness_search(monkeypatch):
    # matches() walks derivatives past the built transitions: exact (a term matching
    # nothing is never nullable) with no emptiness search, which could run for seconds
    # per state (MaskBench Github_hard o21819 hung in matches())
    arena = TermArena()
    digit = arena.byteset(sum(1 << c for c in range(48, 58)))
    pairs = arena.repeat(arena.concat(digit, digit), 1, 100)
    t = arena.intersect([pairs, arena.complement(arena.repeat(digit, 4, 4))])
    dfa = ByteDFA(arena, t)

    def no_search(term):
        raise AssertionError("an emptiness search")

    monkeypatch.setattr(arena, "is_empty", no_search)
    for n in range(0, 12):
        assert dfa.accepts(b"7" * n) == (n % 2 == 0 and n > 0 and n != 4), n
    assert not dfa.accepts(b"7a") and not dfa.accepts(b"a")
    monkeypatch.undo()
    assert dfa.explore()  # built rows are used as far as they reach: same answers
    for n in range(0, 12):
        assert dfa.accepts(b"7" * n) == (n % 2 == 0 and n > 0 and n != 4), n
