"""Shortest completions of parser configurations, from the shortest derivation of each
nonterminal (no search over the automaton).

For a configuration (``automaton.py``) a completion is: finish one lexeme in progress
(the shortest way on in its terminal's DFA), let the parser scan it, then finish the
parse from that chart node. From a node, every item ``A -> x . y`` (origin ``o``) can be
finished with the shortest yield of ``y``; completing ``A`` returns to ``o``, where the
items waiting for ``A`` advance, and so on up to the augmented start rule. ``up(o, A)``,
the fewest bytes to finish the parse once ``A`` (predicted at ``o``) is complete, is a
shortest-path problem over ``(node, nonterminal)`` pairs; origins are earlier nodes, so
the tables are computed node by node in creation order (within a node, a fixpoint over
its nonterminals, Dijkstra's algorithm, handles left recursion).

The result is *a* completion and, among these routes, the shortest in bytes; the token
budget (``index.budget``) only needs a real one (a witness), so this replaces a
breadth-first search over the automaton whose size grows with nesting.
"""

from __future__ import annotations

import heapq
from collections import deque

from .earley import SELF

__all__ = ["Completions"]

INF = 1 << 60


class Completions:
    """Memoised shortest completions over one ``GrammarAutomaton``.

    Args:
        automaton: the automaton (its charts, lexers, ignore and trigger ids).
    """

    def __init__(self, automaton) -> None:
        self.a = automaton
        self.charts = automaton.charts
        self._lexer_tail: dict[tuple[int, int], bytes | None] = {}
        cfg = self.charts.cfg
        self._nt_min = self._nonterminal_yields(cfg)
        self._seq: dict[tuple[int, int], bytes] = {}
        self._up: dict[int, dict[int, tuple[int, tuple | None]]] = {}
        self._best: dict[int, bytes] = {}

    # ---- yields --------------------------------------------------------------------

    def terminal_min(self, t: int) -> bytes | None:
        """Shortest bytes terminal ``t`` matches (from its lexer's start state)."""
        return self.lexer_tail(t, self.a.lexers[t].initial)

    def lexer_tail(self, t: int, s: int) -> bytes | None:
        """Shortest bytes from state ``s`` of terminal ``t``'s DFA to acceptance."""
        key = (t, s)
        if key in self._lexer_tail:
            return self._lexer_tail[key]
        dfa = self.a.lexers[t]
        parent: dict[int, tuple[int, int] | None] = {s: None}
        queue = deque([s])
        found = None
        while queue:
            x = queue.popleft()
            if dfa.is_accepting(x):
                found = x
                break
            row = dfa.row(x)
            for b in range(256):
                y = int(row[b])
                if y >= 0 and y not in parent:
                    parent[y] = (x, b)
                    queue.append(y)
        out = None
        if found is not None:
            data = bytearray()
            while parent[found] is not None:
                found, b = parent[found]
                data.append(b)
            out = bytes(reversed(data))
        self._lexer_tail[key] = out
        return out

    def _nonterminal_yields(self, cfg) -> list[bytes | None]:
        """Shortest string of each nonterminal over its productive productions (None: it
        derives none). Knuth's generalisation of Dijkstra's algorithm: a production's
        candidate is known once its nonterminals' strings are, and the shortest candidate
        left is final; O(size log size), so a chain of 10,000 rules costs one pass.
        """
        num = len(cfg.names)
        best: list[bytes | None] = [None] * num
        pending: dict[int, int] = {}  # production -> its nonterminal occurrences not final
        users: list[list[int]] = [[] for _ in range(num)]
        heap: list[tuple[int, int, bytes]] = []  # (length, production, string)

        def offer(p: int) -> None:
            parts = (best[s] if s >= 0 else self.terminal_min(-1 - s) for s in cfg.rhs[p])
            data = b"".join(parts)
            heapq.heappush(heap, (len(data), p, data))

        for lhs in range(num):
            for p in self.charts.productions_of(lhs):
                rhs = cfg.rhs[p]
                if any(s < 0 and self.terminal_min(-1 - s) is None for s in rhs):
                    continue
                pending[p] = sum(1 for s in rhs if s >= 0)
                for s in rhs:
                    if s >= 0:
                        users[s].append(p)
                if not pending[p]:
                    offer(p)
        while heap:
            _, p, data = heapq.heappop(heap)
            lhs = cfg.lhs[p]
            if best[lhs] is not None:
                continue
            best[lhs] = data
            for q in users[lhs]:
                if q in pending:
                    pending[q] -= 1
                    if not pending[q]:
                        offer(q)
        return best

    def seq(self, p: int, dot: int) -> bytes:
        """Shortest yield of production ``p``'s symbols from ``dot`` on."""
        key = (p, dot)
        hit = self._seq.get(key)
        if hit is None:
            rhs = self.charts.cfg.rhs[p]
            hit = b"".join(
                self._nt_min[s] if s >= 0 else self.terminal_min(-1 - s) for s in rhs[dot:]
            )
            self._seq[key] = hit
        return hit

    # ---- parser completions ----------------------------------------------------------

    def _table(self, n: int) -> dict[int, tuple[int, tuple | None]]:
        """``up`` of node ``n``: nonterminal -> (bytes, (item, next)) to finish the parse."""
        hit = self._up.get(n)
        if hit is not None:
            return hit
        charts = self.charts
        order, stack, seen = [], [n], {n}
        while stack:  # the origins ``n`` depends on, computed first (ascending ids)
            m = stack.pop()
            order.append(m)
            for key, items in charts.waiting[m].items():
                if key >= 0:
                    for _, _, o in items:
                        if o != SELF and o not in seen and o not in self._up:
                            seen.add(o)
                            stack.append(o)
        for m in sorted(order):
            if m in self._up:
                continue
            self._up[m] = self._node_table(m)
        return self._up[n]

    def _node_table(self, m: int) -> dict[int, tuple[int, tuple | None]]:
        """``up`` of node ``m``, its origins' tables known: Dijkstra over the nonterminals
        waited on at ``m`` (an item ``q`` waiting on ``a`` costs the rest of ``q`` plus
        ``up(lhs(q))``, read at ``m`` itself for a ``SELF`` item, else at its origin);
        costs are non-negative, so each nonterminal is settled once.
        """
        charts, cfg = self.charts, self.charts.cfg
        heap: list[tuple[int, int, int, tuple | None]] = [(0, -1, cfg.start, None)]
        by_lhs: dict[int, list[tuple[int, int, tuple]]] = {}  # SELF items, by their lhs
        order = 0
        for a, items in charts.waiting[m].items():
            if a < 0:
                continue
            for q, qd, qo in items:
                rest, lhs = len(self.seq(q, qd + 1)), cfg.lhs[q]
                if qo == SELF:
                    by_lhs.setdefault(lhs, []).append((a, rest, (q, qd, qo)))
                    continue
                after = self._up[qo].get(lhs, (INF, None))[0]
                if after < INF:
                    heapq.heappush(heap, (rest + after, order, a, (q, qd, qo)))
                    order += 1
        table: dict[int, tuple[int, tuple | None]] = {}
        while heap:
            cost, _, a, step = heapq.heappop(heap)
            if a in table:
                continue
            table[a] = (cost, step)
            for b, rest, item in by_lhs.get(a, ()):
                if b not in table:
                    heapq.heappush(heap, (cost + rest, order, b, item))
                    order += 1
        return table

    def _finish(self, n: int, a: int) -> bytes:
        """Bytes finishing the parse once ``a`` (predicted at node ``n``) is complete."""
        out = []
        while True:
            cost, step = self._table(n).get(a, (INF, None))
            if cost >= INF:
                raise AssertionError("no way up from a complete nonterminal")
            if step is None:
                return b"".join(out)
            q, qd, qo = step
            out.append(self.seq(q, qd + 1))
            n, a = (n if qo == SELF else qo), self.charts.cfg.lhs[q]

    def from_node(self, n: int) -> bytes:
        """Shortest completion of the parse at chart node ``n`` (a lexeme boundary)."""
        hit = self._best.get(n)
        if hit is not None:
            return hit
        charts, cfg = self.charts, self.charts.cfg
        if charts.final[n]:
            return b""
        best, best_item = INF, None
        for p, dot, o in charts.items[n]:
            origin = n if o == SELF else o
            up = self._table(origin).get(cfg.lhs[p], (INF, None))[0]
            cost = len(self.seq(p, dot)) + up
            if cost < best:
                best, best_item = cost, (p, dot, origin)
        p, dot, origin = best_item
        hit = self.seq(p, dot) + self._finish(origin, cfg.lhs[p])
        self._best[n] = hit
        return hit

    def from_state(self, state: int) -> bytes | None:
        """Shortest completion of automaton state ``state`` by these routes (b"" when it
        accepts); None for the dead state.
        """
        if state < 0:
            return None
        a = self.a
        if a.is_accepting(state):
            return b""
        best = None
        for t, node, s in a.lexemes(state):
            tail = self.lexer_tail(t, s)
            if tail is None:
                continue
            if t in a.ignore or t == a.trigger_id:
                after = self.from_node(node)
            else:
                after = self.from_node(self.charts.scan(node, t))
            data = tail + after
            if best is None or len(data) < len(best):
                best = data
        return best
