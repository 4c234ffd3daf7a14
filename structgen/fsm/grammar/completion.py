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
its nonterminals handles left recursion).

The result is *a* completion and, among these routes, the shortest in bytes; the token
budget (``index.budget``) only needs a real one (a witness), so this replaces a
breadth-first search over the automaton whose size grows with nesting.
"""

from __future__ import annotations

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
        """Shortest string of each nonterminal (fixpoint over productive productions)."""
        charts = self.charts
        num = len(cfg.names)
        best: list[bytes | None] = [None] * num
        changed = True
        while changed:
            changed = False
            for lhs in range(num):
                for p in charts.productions_of(lhs):
                    parts = []
                    for sym in cfg.rhs[p]:
                        part = best[sym] if sym >= 0 else self.terminal_min(-1 - sym)
                        if part is None:
                            break
                        parts.append(part)
                    else:
                        data = b"".join(parts)
                        if best[lhs] is None or len(data) < len(best[lhs]):
                            best[lhs], changed = data, True
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
        charts, cfg = self.charts, self.charts.cfg
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
            table: dict[int, tuple[int, tuple | None]] = {cfg.start: (0, None)}
            changed = True
            while changed:
                changed = False
                for a, items in charts.waiting[m].items():
                    if a < 0:
                        continue
                    for q, qd, qo in items:
                        rest = len(self.seq(q, qd + 1))
                        lhs = cfg.lhs[q]
                        after = (table if qo == SELF else self._up[qo]).get(lhs, (INF, None))[0]
                        cost = rest + after
                        if cost < table.get(a, (INF, None))[0]:
                            table[a] = (cost, (q, qd, qo))
                            changed = True
            self._up[m] = table
        return self._up[n]

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
