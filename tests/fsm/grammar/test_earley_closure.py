"""The split closure of ``EarleyCharts._node`` (items with an origin closed with each
completion's cascade memoised per nonterminal and origin, ``SELF`` items from per-
nonterminal sets, repeated closures answered from the items with an origin) builds the same
nodes, in the same order, as the textbook closure of every item (Earley with Aycock and
Horspool's nullable advance), on random scans of llama.cpp's context-free grammars."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.earley import SELF, EarleyCharts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"


class _PlainCharts(EarleyCharts):
    """The reference: every item of the closure, ``SELF`` or not, on one agenda."""

    def _node(self, kernel):
        rhs, by_lhs, nullable = self._rhs, self._by_lhs, self._nullable
        items = set(kernel)
        agenda = list(kernel)
        while agenda:
            p, dot, origin = agenda.pop()
            body = rhs[p]
            new = []
            if dot < len(body):
                sym = body[dot]
                if sym >= 0:
                    new += [(q, 0, SELF) for q in by_lhs[sym]]
                if nullable(sym):
                    new.append((p, dot + 1, origin))
            elif origin != SELF:
                for q, qdot, qorigin in self.waiting[origin].get(self._lhs[p], ()):
                    new.append(self._item(q, qdot + 1, origin if qorigin == SELF else qorigin))
            for item in new:
                if item not in items:
                    items.add(item)
                    agenda.append(item)
        final = (0, 1, 0) in items or (not self.items and (0, 1, SELF) in items)
        live = frozenset(item for item in items if item[1] < len(rhs[item[0]]))
        nid = self._ids.get((live, final))
        if nid is None:
            nid = self._ids[(live, final)] = self._new_node(live, final)
        return nid


def _both(name: str) -> tuple[EarleyCharts, EarleyCharts]:
    automaton = compile_grammar((FIXTURES / f"{name}.gbnf").read_text(), syntax="gbnf").dfa
    charts = automaton.charts
    nullable = {t for t in range(len(automaton.lexers)) if charts._nullable(-1 - t)}
    # both in Python: this is the reference the C charts are checked against
    # (test_native_earley.py)
    return (
        EarleyCharts(charts.cfg, nullable, native=False),
        _PlainCharts(charts.cfg, nullable, native=False),
    )


@pytest.mark.parametrize("bound", [None, 40])  # 40: the completion memo emptied often
@pytest.mark.parametrize("name", ["arithmetic", "c", "json", "json_arr"])
def test_split_closure_builds_the_textbook_nodes(name, bound):
    fast, plain = _both(name)
    if bound is not None:
        fast.max_completed_items = bound
    rng = random.Random(7)
    frontier, scans = [0], 0
    while frontier and scans < 1500:
        node = frontier.pop(rng.randrange(len(frontier)))
        for t in plain.expected[node]:
            nid = plain.scan(node, t)
            assert fast.scan(node, t) == nid, (node, t)
            scans += 1
            frontier.append(nid)
    assert scans >= 1500 or not frontier
    assert fast.items == plain.items
    assert fast.final == plain.final
    assert fast.expected == plain.expected
    assert fast.num_items == plain.num_items
    if bound is not None:  # the memo was emptied on the way and stays within its bound
        assert fast._completed and fast._completed_items <= bound
    for a, b in zip(fast.waiting, plain.waiting, strict=True):
        assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}
