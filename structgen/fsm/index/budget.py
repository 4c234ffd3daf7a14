"""Budget-aware completion: the fewest tokens that still reach acceptance, per state.

A ``Matcher`` made with ``max_tokens=N`` only allows a token when, after it, a complete
match can still be reached within the tokens that remain, so a request cut by its token
budget still ends on a complete document (``finish_reason="length"``, valid output).

Budget convention: ``max_tokens`` counts the non-EOS tokens the matcher accepts. EOS is
not counted: an engine that stops on ``max_tokens`` without sampling EOS (structgen's, or
transformers' ``max_new_tokens``) gets an accepted document after at most N tokens. An
engine whose EOS token consumes one unit of the same budget passes ``max_tokens - 1``.

Soundness. Every budget decision rests on witnesses: the length of a *known* token path
from state ``s`` to acceptance, an upper bound on the fewest tokens. When a witness is
recorded, every state along it gets a bound no larger than its remaining part, so a state
with a witness ``<= r`` always has a token to a state with a witness ``<= r - 1``: masking
never leaves a request with no way to finish in time. Witnesses come from (1) a quick walk
(``_quick_walk``): depth-first over one-byte tokens, closing bytes first, each edge taken
with the token index's ``token_next_state``; (2) the shortest byte completion of ``s``
tokenized greedily (longest vocabulary token first); (3) where neither is short enough, an
exact breadth-first search over token edges (bounded to ``max_search_states`` expanded
states). Where the bounded search gives up, the token is refused (conservative, still
sound); otherwise the budgeted mask is exact: a token is allowed iff acceptance is
reachable in the remaining budget after it. The quick walk only ever proves tokens
allowed, so it changes the cost, never the mask. A wildcard marker in a byte completion (a
grammar's ``!<X>``, ``token_index.py``) is tokenized as one token, the first usable one
that is not X.

Cost. Witnesses are memoised per state in one table shared by all matchers of a token
index (``budget_for``). A step first asks every successor state for its quick witness
(about one derivative per state the walk has not met: a walk stops at the first state
with a witness, so the walks of sibling successors share their tails); when all are below
the remaining budget (the usual case: the budget is not tight) the unbudgeted mask is
returned, and a revisit with as much budget left is one dictionary lookup. Only a tight
budget pays for the shortest completions (breadth-first over byte rows: with intersection
terms, emptiness searches per row) and the token searches, for the successors the quick
walk does not prove.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ...lru import LRUCache
from .completion_bound import completion_bound
from .token_index import pack_bitmask
from .vocabulary import MARKER_BYTE, ONLY_BYTE, WILDCARD_BYTE, wildcard_ids

__all__ = ["CompletionBudget", "budget_for", "INF"]

INF = 1 << 30
_MAX_MASKS = 1024  # budgeted masks cached per (state, remaining) (LRU)
MAX_BYTE_BFS_STATES = 2048  # states one shortest-completion search expands before settling
MAX_QUICK_STATES = 4096  # states one quick walk (``_quick_of``) visits before giving up
# bytes the depth-first completion tries first (higher = earlier): what closes a JSON document
_CLOSING = {ord(c): 10 - i for i, c in enumerate('"}]0 e')}
# bytes the quick walk tries first, in order, before the rest of a state's row: what closes
# a JSON value, an array, an object, then what leads on to a required key or a value
_QUICK_FIRST = tuple(ord(c) for c in '"}],0e:')

_WILDCARD = bytes([MARKER_BYTE, WILDCARD_BYTE])  # how a wildcard marker starts
_ONLY = bytes([MARKER_BYTE, ONLY_BYTE])  # how one listing the ids it allows starts

_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_tables_lock = threading.Lock()


def budget_for(index) -> CompletionBudget:
    """The shared ``CompletionBudget`` of a token index (created on first use)."""
    with _tables_lock:
        table = _tables.get(index)
        if table is None:
            table = _tables[index] = CompletionBudget(index)
        return table


class _VocabTokens:
    """What a budget reads of a vocabulary's tokens, built once per vocabulary (a document's
    copy grammar gets a fresh token index, hence a fresh budget, but the same vocabulary).

    Attributes:
        token_of: bytes -> the first usable token id spelling them (not special, not EOS).
        usable_ids: sorted ids of ``token_of`` (what a wildcard edge may take).
        max_len: bytes of the longest usable token.
        byte_token: per byte value, its one-byte usable token id or -1 (the quick walk's
            edges).
    """

    def __init__(self, vocab) -> None:
        usable: dict[bytes, int] = {}
        banned = vocab.special_token_ids | vocab.eos_token_ids
        for tid, data in enumerate(vocab.token_bytes):
            if data and tid not in banned and data not in usable:
                usable[data] = tid
        self.token_of = usable
        self.usable_ids = sorted(usable.values())
        self.max_len = max((len(t) for t in usable), default=1)
        self.byte_token = [usable.get(bytes([b]), -1) for b in range(256)]


_vocab_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_vocab_lock = threading.Lock()  # not _tables_lock: budget_for holds that one while building


def _vocab_tokens(vocab) -> _VocabTokens:
    """The shared ``_VocabTokens`` of ``vocab`` (built on first use)."""
    with _vocab_lock:
        try:
            hit = _vocab_tables.get(vocab)
        except TypeError:  # a vocabulary that takes no weak reference: not shared
            return _VocabTokens(vocab)
        if hit is None:
            hit = _vocab_tables[vocab] = _VocabTokens(vocab)
        return hit


class CompletionBudget:
    """Memoised fewest-tokens-to-acceptance bounds over a ``TokenIndex``.

    Args:
        index: the token index (only ``next_states``, ``token_next_state``, ``dfa`` and
            ``vocab`` are used).
        max_search_states: bound on the states one exact token search expands.
        max_cached_rows: bound on cached per-state successor tables (LRU).
    """

    def __init__(self, index, max_search_states: int = 256, max_cached_rows: int = 64) -> None:
        self._index = index
        self._dfa = index.dfa
        vocab = index.vocab
        self._vocab_size = vocab.vocab_size
        self._allowable = vocab.allowable
        self._num_words = (vocab.vocab_size + 31) // 32
        self._eos = np.array(sorted(vocab.eos_token_ids), np.int64)
        self.max_search_states = max_search_states
        self._max_cached_rows = max_cached_rows
        self._lock = threading.RLock()
        tokens = _vocab_tokens(vocab)
        self._token_of = tokens.token_of
        self._usable_ids = tokens.usable_ids
        self._max_len = tokens.max_len
        self._byte_token = tokens.byte_token
        self._quick: dict[int, int] = {}
        self._byte_dist: dict[int, int] = {}
        self._byte_next: dict[int, int] = {}
        self._upper: dict[int, int] = {}
        self._fails: dict[int, int] = {}  # state -> a k with "no path of <= k tokens"
        self._worst: dict[int, int] = {}  # state -> bound on max upper over successors
        # both under self._lock
        self._rows: LRUCache[int, tuple] = LRUCache(max_cached_rows, lock=False)
        self._masks: LRUCache[tuple[int, int], np.ndarray] = LRUCache(_MAX_MASKS, lock=False)
        self._free_bound: int | None = None  # completion_bound, computed on first use

    # ---- public ------------------------------------------------------------

    def upper(self, state: int) -> int:
        """Tokens of a known path from ``state`` to acceptance (``INF`` if none found)."""
        with self._lock:
            return self._upper_of(state)

    def free_bound(self) -> int:
        """Tokens within which every live state reachable from the initial one can reach
        acceptance, proven from the automaton's structure (``completion_bound``), or ``INF``.

        With ``remaining - 1 >= free_bound()`` tokens left, every token of a state's
        unbudgeted mask leads to a state with a completion of at most ``remaining - 1``
        tokens, so the budgeted mask (:meth:`mask`, exact) is the unbudgeted one and
        :meth:`within` holds for every successor: the budget does not bind. Computed once
        per budget (one pass over the initial state's term). Raises: never.
        """
        bound = self._free_bound
        if bound is None:
            with self._lock:
                bound = self._free_bound
                if bound is None:
                    bound = min(completion_bound(self._dfa, self._byte_token), INF)
                    self._free_bound = bound
        return bound

    def within(self, state: int, k: int) -> bool:
        """True when a witness of at most ``k`` tokens from ``state`` to acceptance is known
        or found (exact, unless the bounded search gives up: then False).
        """
        with self._lock:
            return self._within(state, k)

    def min_tokens(self, state: int, limit: int = 64) -> int:
        """Exact fewest tokens from ``state`` to acceptance, searched up to ``limit``
        (returns ``INF`` past it or when the bounded search gives up).
        """
        with self._lock:
            for k in range(min(self._upper_of(state), limit + 1)):
                if self._within(state, k):
                    return k
            u = self._upper_of(state)
            return u if u <= limit else INF

    def mask(self, state: int, remaining: int) -> np.ndarray | None:
        """Packed int32 ``[ceil(vocab_size / 32)]`` mask of the tokens allowed from
        ``state`` with ``remaining`` tokens left, or None when it equals the unbudgeted
        mask (every successor has a witness of at most ``remaining - 1`` tokens).

        Exact (a token is allowed iff acceptance is reachable within ``remaining - 1``
        tokens after it; EOS iff ``state`` is accepting) unless a bounded token search gave
        up, where the token is refused: then a sound subset that still holds a token with a
        witness whenever ``state`` has one of at most ``remaining`` tokens. Raises: never
        (beyond ``GrammarTooComplexError`` from building automaton rows).
        """
        with self._lock:
            worst = self._worst.get(state)
            if worst is not None and worst <= remaining - 1:
                return None
            key = (state, remaining)
            hit = self._masks.get(key)
            if hit is not None:
                return hit
            succ, valid, targets = self._successors(state)
            if worst is None:
                worst = max((self._quick_of(z) for z in succ.tolist()), default=0)
                self._worst[state] = worst
                if worst <= remaining - 1:
                    return None
            ok = np.fromiter((self._within(int(z), remaining - 1) for z in succ), bool, succ.size)
            allowed = np.zeros(self._vocab_size, bool)
            allowed[valid] = ok[np.searchsorted(succ, targets)]
            if self._dfa.is_accepting(state):
                allowed[self._eos] = True
            packed = pack_bitmask(allowed, self._num_words)
            packed.setflags(write=False)
            self._masks.put(key, packed)
            return packed

    # ---- quick witnesses ------------------------------------------------------

    def _quick_of(self, state: int) -> int:
        """Tokens of a known path from ``state`` to acceptance, found cheaply (``INF`` if
        none): the best witness recorded, else a depth-first walk (``_quick_walk``).
        """
        q = self._quick.get(state)
        if q is None:
            q = self._quick_walk(state)
        u = self._upper.get(state, INF)
        return q if q < u else u

    def _quick_walk(self, start: int) -> int:
        """A witness from ``start``: a depth-first walk over one-byte tokens, closing bytes
        first (``_QUICK_FIRST``), that stops at an accepting state or one with a witness;
        each edge is taken with ``token_next_state``, so the path is a real token path and
        its length an upper bound, recorded for every state along it. Only the bytes tried
        are derived (a state's whole row is built when none of its closing bytes leads on):
        no breadth-first search, so a step costs about one derivative per new state.
        Bounded to ``MAX_QUICK_STATES`` states (then ``INF``: the exact path decides).
        """
        if self._dfa.is_accepting(start):
            self._quick[start] = 0
            return 0
        seen = {start}
        stack = [(start, self._quick_moves(start))]
        tail = -1
        while stack and len(seen) <= MAX_QUICK_STATES:
            y, moves = stack[-1]
            z = next(moves, -1)
            if z < 0:
                stack.pop()
                continue
            if z in seen:
                continue
            if self._dfa.is_accepting(z):
                tail = 0
            else:
                known = min(self._quick.get(z, INF), self._upper.get(z, INF))
                if known < INF:
                    tail = known
            if tail >= 0:
                break
            seen.add(z)
            stack.append((z, self._quick_moves(z)))
        if tail < 0:
            self._quick[start] = INF
            return INF
        n = len(stack)
        for i, (y, _) in enumerate(stack):
            value = n - i + tail
            if value < self._quick.get(y, INF):
                self._quick[y] = value
        return self._quick[start]

    def _quick_moves(self, state: int):
        """The states one single-byte token leads to from ``state``: closing bytes first,
        then the rest of its row in byte order, then (only where a live byte has no one-byte
        token: a marker, a vocabulary without it) the successors of every token. A
        generator: the row is only built when the closing bytes are exhausted.
        """
        step, token = self._index.token_next_state, self._byte_token
        for b in _QUICK_FIRST:
            if token[b] >= 0:
                z = int(step(state, token[b]))
                if z >= 0:
                    yield z
        row = self._dfa.row(state)
        untokened = False  # a live byte no one-byte token takes (a marker: a wildcard edge)
        for b in np.nonzero(row >= 0)[0].tolist():
            if b == MARKER_BYTE or token[b] < 0:
                untokened = True
                continue
            if b in _QUICK_FIRST:
                continue
            z = int(step(state, token[b]))
            if z >= 0:
                yield z
        if untokened:  # every token's successor (multi-byte tokens, wildcard edges)
            yield from self._successors(state)[0].tolist()

    # ---- byte completions ----------------------------------------------------

    def _byte_bfs(self, start: int) -> None:
        """Shortest byte completion of ``start``, memoised along the path found.

        Exact while the breadth-first search stays within ``MAX_BYTE_BFS_STATES`` expanded
        states; past that (a wide automaton: keys tracked by a product or complement) the
        best completion met so far is taken, or a depth-first one (:meth:`_byte_dfs`). A
        longer completion only loosens a witness (an upper bound): budget decisions stay
        sound, and no row explosion fails the request.
        """
        dist, nxt, dfa = self._byte_dist, self._byte_next, self._dfa
        parent: dict[int, tuple[int, int]] = {start: (-1, -1)}
        frontier, depth = [start], 0
        best, best_state = INF, -1
        expanded = 0
        while frontier and depth < best:
            if expanded > MAX_BYTE_BFS_STATES:
                if best_state < 0:
                    self._byte_dfs(start)
                    return
                break
            following = []
            for y in frontier:
                expanded += 1
                if y in dist:
                    if depth + dist[y] < best:
                        best, best_state = depth + dist[y], y
                    continue
                if dfa.is_accepting(y):
                    dist[y], nxt[y] = 0, -1
                    best, best_state = depth, y
                    continue
                row = dfa.row(y)
                for b in np.nonzero(row >= 0)[0].tolist():
                    z = int(row[b])
                    if z not in parent:
                        parent[z] = (y, b)
                        following.append(z)
            frontier, depth = following, depth + 1
        if best_state < 0:
            dist[start], nxt[start] = INF, -1
            return
        path = []
        y = best_state
        while y != start:
            p, b = parent[y]
            path.append((p, b))
            y = p
        for i, (p, b) in enumerate(reversed(path)):
            dist.setdefault(p, best - i)
            nxt.setdefault(p, b)

    def _byte_dfs(self, start: int) -> None:
        """A byte completion of ``start`` found depth-first, bytes that close JSON first
        (``"``, ``}``, ``]``, a digit), states with a known completion taken at once;
        bounded to ``MAX_BYTE_BFS_STATES`` states (none found: no completion, ``INF``).
        """
        dist, nxt, dfa = self._byte_dist, self._byte_next, self._dfa
        path: list[tuple[int, int]] = []  # (state, byte taken from it)
        seen = {start}
        stack = [(start, self._byte_order(start))]
        tail = -1
        while stack and len(seen) <= MAX_BYTE_BFS_STATES:
            y, order = stack[-1]
            if dfa.is_accepting(y) or y in dist and dist[y] < INF and y != start:
                tail = 0 if dfa.is_accepting(y) else dist[y]
                break
            if not order:
                stack.pop()
                if path:
                    path.pop()
                continue
            b = order.pop()
            z = int(dfa.row(y)[b])
            if z < 0 or z in seen:
                continue
            seen.add(z)
            path.append((y, b))
            stack.append((z, self._byte_order(z)))
        if tail < 0:
            dist[start], nxt[start] = INF, -1
            return
        if not path:  # start itself is accepting
            dist.setdefault(start, tail)
            nxt.setdefault(start, -1)
        n = len(path)
        for i, (p, b) in enumerate(path):
            dist.setdefault(p, n - i + tail)
            nxt.setdefault(p, b)

    def _byte_order(self, state: int) -> list[int]:
        """The live bytes of ``state``, to be popped: closing bytes last in the list."""
        live = np.nonzero(self._dfa.row(state) >= 0)[0].tolist()
        live.sort(key=lambda b: _CLOSING.get(b, -1))
        return live

    def _byte_completion(self, state: int) -> bytes | None:
        if state not in self._byte_dist:
            self._byte_bfs(state)
        if self._byte_dist[state] >= INF:
            return None
        out = bytearray()
        while self._byte_dist[state] > 0:
            b = self._byte_next[state]
            out.append(b)
            state = int(self._dfa.row(state)[b])
            if state not in self._byte_dist:
                self._byte_bfs(state)
        return bytes(out)

    def _greedy_tokens(self, data: bytes) -> list[int] | None:
        ids, i = [], 0
        while i < len(data):
            only = data.startswith(_ONLY, i)  # <[a,b-c]>: one token among those
            if only or data.startswith(_WILDCARD, i):  # !<X>: one token but X
                end = data.find(MARKER_BYTE, i + 2)
                if end < 0:
                    return None
                ids.append(self._wildcard_token(wildcard_ids(data[i + 2 : end]), only))
                i = end + 1
                continue
            for n in range(min(self._max_len, len(data) - i), 0, -1):
                tid = self._token_of.get(data[i : i + n])
                if tid is not None:
                    ids.append(tid)
                    i += n
                    break
            else:
                return None
        return ids

    def _wildcard_token(self, ids: frozenset[int], only: bool) -> int:
        """A token a wildcard edge excluding ``ids`` (with ``only``: allowing only ``ids``)
        takes: the first usable (or allowable) one, -1 when there is none.
        """
        if only:
            return next((t for t in sorted(ids) if self._allowable[t]), -1)
        return next((t for t in self._usable_ids if t not in ids), -1)

    # ---- witnesses -------------------------------------------------------------

    def _record(self, states: list[int], tail: int) -> None:
        """``states[i]`` reaches acceptance in ``len(states) - 1 - i + tail`` tokens."""
        last = len(states) - 1
        for i, s in enumerate(states):
            value = last - i + tail
            if value < self._upper.get(s, INF):
                self._upper[s] = value

    def _upper_of(self, state: int) -> int:
        u = self._upper_greedy(state)
        if u >= INF and self._fails.get(state, -1) < 64:
            if self._search(state, 64) is False:  # vocabularies without single-byte tokens
                self._fails[state] = 64
            u = self._upper[state]
        return u

    def _upper_greedy(self, state: int) -> int:
        """Memoised witness from the shortest byte completion, tokenized greedily."""
        hit = self._upper.get(state)
        if hit is not None:
            return hit
        if self._dfa.is_accepting(state):
            self._upper[state] = 0
            return 0
        data = self._byte_completion(state)
        ids = None if data is None else self._greedy_tokens(data)
        if ids is None:
            self._upper[state] = INF
            return INF
        states = [state]
        for tid in ids:
            states.append(int(self._index.token_next_state(states[-1], int(tid))))
            if states[-1] < 0:  # never for a byte completion; kept sound regardless
                self._upper[state] = INF
                return INF
        self._record(states, 0)
        return self._upper[state]

    def _within(self, state: int, k: int) -> bool:
        if k < 0:
            return False
        if self._quick_of(state) <= k or self._upper_of(state) <= k:
            return True
        if self._fails.get(state, -1) >= k:
            return False
        found = self._search(state, k)
        if found is False:
            self._fails[state] = max(k, self._fails.get(state, -1))
        return bool(found)

    def _successors(self, state: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(distinct next states int32 ``[m]``, the non-EOS tokens that lead on bool
        ``[vocab_size]``, where each of them leads int32 ``[count]``), LRU-cached.
        """
        hit = self._rows.get(state)
        if hit is not None:
            return hit
        row = self._index.next_states(state)
        valid = row >= 0
        valid[self._eos] = False
        targets = row[valid]
        hit = (np.unique(targets), valid, targets)
        self._rows.put(state, hit)
        return hit

    def _search(self, start: int, k: int) -> bool | None:
        """Breadth-first over token edges: is there a path of <= ``k`` tokens?

        True records the witness; False is exact; None means the search gave up.
        """
        parent: dict[int, int] = {start: -1}
        frontier = [start]
        expanded = 0
        for depth in range(k):
            following = []
            for y in frontier:
                if expanded >= self.max_search_states:
                    return None
                expanded += 1
                for z in self._successors(y)[0].tolist():
                    if z in parent:
                        continue
                    parent[z] = y
                    u = self._quick_of(z)
                    if u > k - depth - 1:
                        u = self._upper_greedy(z)
                    if u <= k - depth - 1:
                        chain = [z]
                        while parent[chain[-1]] >= 0:
                            chain.append(parent[chain[-1]])
                        self._record(chain[::-1], u)
                        return True
                    following.append(z)
            if not following:
                return False
            frontier = following
        return False
