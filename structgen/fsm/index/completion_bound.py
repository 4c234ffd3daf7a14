"""A bound on the shortest completion of every state of a term automaton, for the token budget.

``completion_bound(dfa, byte_token)`` returns ``B`` such that every state of ``dfa`` reached
from its initial state whose language is not empty accepts some string of at most ``B``
bytes, each byte of which is a one-byte token (so at most ``B`` tokens to acceptance), or
``INF`` when no such bound is proven. ``CompletionBudget.free_bound`` keeps it per token
index; a ``Matcher`` with ``remaining - 1 >= B`` tokens left knows, without asking the budget,
that every token its unbudgeted mask allows still fits (see ``Matcher``).

The bound is read off the initial state's term, structurally, one pass over its subterms
(``TermArena.kind`` / ``args``; no derivative is taken). Per term ``t`` three numbers:

* ``m(t)``: an upper bound on the length of ``t``'s shortest string when ``t``'s language is
  not empty (exact for terms without ``AND`` / ``NOT``);
* ``L(t)``: an upper bound on the length of ``t``'s longest string (``INF``: unbounded);
* ``M(t)``: an upper bound on ``m`` of every non-empty derivative ``d_u(t)``, over all byte
  strings ``u`` (``u`` empty included, so ``m(t) <= M(t)``).

Rules (languages, not term syntax: a smart constructor's rewriting keeps them):
``BYTES``: 1, 1, 1. ``EPS``: 0, 0, 0. ``CONCAT(h, t)``: a non-empty derivative is an
alternation of ``d_u(h) t`` (with ``d_u(h)`` not empty) and ``d_v(t)``, so
``M = max(M(h) + m(t), M(t))``, ``m = m(h) + m(t)``, ``L = L(h) + L(t)``.
``ALT``: ``M`` and ``L`` the members' largest; ``m`` the smallest over the members known to
be non-empty (those without ``EMPTY``, ``AND`` or ``NOT``), else the largest.
``REPEAT(x, lo, hi)``: its derivatives are ``d_u(x) x{lo - j - 1, hi - j - 1}``, so
``M = M(x) + max(lo - 1, 0) m(x)``, ``m = lo m(x)``, ``L = hi L(x)``.
``UNTIL(T, k, cont)``: before the trigger completes, ``T``'s rest then ``cont``; after,
derivatives of ``cont``: ``M = max(len(T) + m(cont), M(cont))``, ``L = INF``.
``AND``: each string of a derivative is a suffix of a string of every member, so all are
at most the members' smallest ``L``: ``M = m = L = min L``. ``NOT``: ``INF``.

Bytes to tokens: a string of ``B`` bytes is a path of ``B`` one-byte tokens when every byte
in it has a usable one-byte token whose step is the byte's step. That holds for every
string of the automaton when every byte of every ``BYTES`` class and ``UNTIL`` trigger
reachable from the root has one (``byte_token[b] >= 0``) and none is ``MARKER_BYTE`` (a
marker stands for one special or wildcard token, not bytes; its automata get ``INF``).
The strings the rules take for ``UNTIL`` use its trigger's bytes, not its free ones.
"""

from __future__ import annotations

from ..regex.dfa import ByteDFA
from ..regex.terms import ALT, AND, BYTES, CONCAT, EMPTY, INF, REPEAT, UNTIL
from .vocabulary import MARKER_BYTE

__all__ = ["completion_bound", "UNBOUNDED"]

UNBOUNDED = 1 << 30  # no bound proven (``budget.INF``)


def completion_bound(dfa, byte_token: list[int]) -> int:
    """Bytes (hence one-byte tokens) within which every live state of ``dfa`` reachable from
    its initial state can reach acceptance (see the module docstring for the rules).

    Args:
        dfa: the automaton (a ``ByteDFA``; anything else, a grammar's parser automaton
            say, gets ``UNBOUNDED``).
        byte_token: per byte value 0..255, its one-byte usable token id or -1
            (``budget._VocabTokens.byte_token``).

    Returns:
        The bound, an int >= 0, or ``UNBOUNDED`` when none is proven. Raises: never.
    """
    if not isinstance(dfa, ByteDFA):
        return UNBOUNDED
    arena = dfa.arena
    kind, args = arena.kind, arena.args  # append-only lists: existing entries never change
    root = dfa.term(dfa.initial)
    # per term: (M, m, L, maybe empty: EMPTY, AND or NOT inside)
    memo: dict[int, tuple[int, int, int, bool]] = {}
    used = 0  # bytes of every class and trigger met
    stack = [root]  # iterative post-order over the term DAG: u to expand, ~u to compute
    push, pop = stack.append, stack.pop
    while stack:
        u = pop()
        if u >= 0:  # first visit: leaves at once, else computed after its children
            if u in memo:
                continue
            k = kind[u]
            if k == BYTES:
                used |= args[u][0]
                memo[u] = _LEAF_BYTES
                continue
            if k < BYTES:  # EPS, EMPTY
                memo[u] = _LEAF_EMPTY if u == EMPTY else _LEAF_EPS
                continue
            push(~u)
            a = args[u]
            if k == REPEAT:
                children = a[:1]
            elif k == UNTIL:
                children = a[2:]
            else:  # CONCAT, ALT, AND, NOT
                children = a
            for c in children:
                if c not in memo:
                    push(c)
            continue
        u = ~u
        if u in memo:
            continue
        k, a = kind[u], args[u]
        if k == CONCAT:
            (mh, nh, lh, eh), (mt, nt, lt, et) = memo[a[0]], memo[a[1]]
            memo[u] = (_cap(max(mh + nt, mt)), _cap(nh + nt), _cap(lh + lt), eh or et)
        elif k == ALT:
            items = [memo[c] for c in a]
            sure = [n for _, n, _, e in items if not e]
            short = min(sure) if sure else max(n for _, n, _, _ in items)
            memo[u] = (
                max(x[0] for x in items),
                short,
                max(x[2] for x in items),
                all(x[3] for x in items),
            )
        elif k == REPEAT:
            (mx, nx, lx, ex), lo, hi = memo[a[0]], a[1], a[2]
            longest = (UNBOUNDED if lx else 0) if hi == INF else _cap(hi * lx)
            memo[u] = (_cap(mx + max(lo - 1, 0) * nx), _cap(lo * nx), longest, ex and lo > 0)
        elif k == UNTIL:
            trigger, _, cont = a
            for b in trigger:
                used |= 1 << b
            mc, nc, _, ec = memo[cont]
            memo[u] = (_cap(max(len(trigger) + nc, mc)), _cap(len(trigger) + nc), UNBOUNDED, ec)
        elif k == AND:
            least = min(memo[c][2] for c in a)
            memo[u] = (least, least, least, True)
        else:  # NOT
            memo[u] = (UNBOUNDED, UNBOUNDED, UNBOUNDED, True)
    if used >> MARKER_BYTE & 1:
        return UNBOUNDED
    for b in range(256):
        if used >> b & 1 and byte_token[b] < 0:
            return UNBOUNDED
    return memo[root][0]


_LEAF_BYTES = (1, 1, 1, False)
_LEAF_EPS = (0, 0, 0, False)
_LEAF_EMPTY = (0, 0, 0, True)


def _cap(n: int) -> int:
    return n if n < UNBOUNDED else UNBOUNDED
