"""Masks shared across the counts of a bounded repetition of a byte class (``CountView``).

Why: a state inside ``X{lo,hi}`` (``X`` one byte class, say a domain label's
``[A-Za-z0-9-]{0,61}``) is a new automaton state at every count, and the first mask of each
walks the token trie through states of its own (one per count again, each row built from
derivatives in Python). But a token reads few bytes: a token whose longest run of ``X``
bytes is ``r <= hi`` is a prefix of the language of ``C[X{lo,hi}]`` (any context ``C``
without intersection or complement) exactly when it is a prefix of ``C[X{lo,INF}]``: the
copies of the repetition the token reads lie in one run of ``X`` bytes, at most ``r <= hi``
of them (the part of a copy after the token's end can be cut back to ``lo``), so the upper
bound never binds inside the token; the converse holds as ``C[X{lo,hi}]``'s language is
contained in ``C[X{lo,INF}]``'s.

So for a state whose term holds such repetitions (``hi >= MIN_SHARED_HI``, within ``REACH``
heads of its start, of a class some token holds ``MIN_RUN`` bytes of in a row: else a walk
meets few count states and there is nothing to share), the mask is the mask of the
canonical state (those repetitions made unbounded: one state for every count, its few rows
shared) for the tokens with runs of those classes of at most ``hi``, and a walk of the
state itself over a trie of the other tokens (a 49k vocabulary has 3 tokens with 62 or more
label bytes in a row: ``-`` x 64), stepped byte by byte without building rows, a run of one
byte through a count read in one ``run_derivative`` (``X{lo,hi} c`` by ``b^m`` is
``X{lo-m,hi-m} c``). Exact by the argument above. Terms with intersection or complement
are left alone (the argument needs monotone operators).

Most states have no such repetition within reach: ``CountView.may_share`` answers that in
one C call (``csrc/count_reach.h``: ``canonical``'s walk without interning, the vocabulary's
test left out), so ``canonical`` runs only where a repetition is met.

The canonical state's own first mask (``walk_class``): its repeated class ``X`` is most of
a vocabulary (``[A-Za-z0-9-]``: 88k of a 150k BPE's tokens hold nothing else), and a walk
from a state that loops on ``X`` visits nearly all of the trie. When every state the bytes
of ``X`` reach from it is live (``closed_class``: a few states, breadth-first), every token
of ``X`` alone is live (but those starting with a byte the state itself dies on); their
mask is a table, and only the trie of the tokens holding another byte is walked. Exact:
the walk would have stepped through the same live states. A table of a class within the
closed one does as well (its tokens are the closed class's; the rest are walked), so the
tables of ``TABLE_CLASSES`` (``[A-Za-z0-9-]``, ``[A-Za-z]``) serve other states too: an
e-mail's local part, a URI's scheme, authority, host and path (``TokenIndex._walk_by_class``,
on a vocabulary where they pay: ``class_tables_pay``).

Per vocabulary (``run_lengths``, ``long_run_tables``, ``class_tables``): each token's
longest run of a byte class, the trie and packed mask of the tokens with a longer run than
a bound, computed once per (class, set of tokens), and per class the mask of its tokens and
the trie of the others (at most ``_MAX_CLASS_TABLES`` classes; on a 150k BPE ~6 MB each and
~7 MB of subtree tables once walked twice), kept on the ``Vocabulary``. A class's long-run
tables of every bound (``prepare_long_runs``: a few dozen tries of a few tokens each) are
built by ``Vocabulary.prepare`` for the class a host label's count repeats, so its first
mask reads them instead of cutting a trie.
"""

from __future__ import annotations

import functools
import threading
from collections import deque

import numpy as np

from ..regex.terms import ALT, BYTES, CONCAT, EMPTY, EPS, INF, REPEAT
from .trie import TokenTrie, build_row, holding_in_c, set_bits

try:  # optional C extension built by setup.py (csrc/tokentrie.c, csrc/count_reach.h)
    from ._tokentrie import count_reach as _count_reach
except ImportError:  # pragma: no cover - exercised when the extension is missing or older
    _count_reach = None

__all__ = [
    "MIN_RUN",
    "MIN_CLASS_SHARE",
    "MIN_SHARED_HI",
    "REACH",
    "TABLE_CLASSES",
    "CountView",
    "class_tables",
    "class_tables_pay",
    "closed_class",
    "long_run_tables",
    "prepare_long_runs",
    "run_derivative",
    "run_lengths",
    "runs_above",
    "walk_class",
    "walk_steps",
]

MIN_SHARED_HI = 16  # repetitions X{lo,hi} of a byte class with a finite hi this large or more
REACH = 2  # ... starting this many non-nullable heads or fewer from a state's start
MIN_RUN = 8  # ... of a class some token holds this many bytes of in a row (else few count
# states are met per walk: nothing to share)
_MAX_LONG_TOKENS = 512  # past this many tokens with a longer run the split does not pay
_MAX_DEPTH = 64  # terms nested deeper are left as they are (exact: nothing changes)
_MAX_SPINE = 64  # concatenation heads looked at per spine
_MAX_MEMBERS = 32  # alternations with more members are left as they are (and not looked at)
_MIN_JUMP = 4  # runs of one byte this long or longer are read in one run_derivative
_MAX_CLOSURE = 8  # states reached by a class's bytes looked at before walking the whole trie
_MAX_CLASS_TABLES = 4  # classes with tables per vocabulary (a trie of up to its size each)


def _byte_mask(chars: bytes) -> int:
    return sum(1 << b for b in set(chars))


_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# the classes tables are built for, widest first (a state whose closed class holds one uses
# its table): a domain label's (what e-mails, URIs and identifiers hold too), then letters
# ([A-Za-z0-9] would be a second copy: 88,518 of the label's 88,548 tokens on a 150k BPE)
TABLE_CLASSES = (_byte_mask(_LETTERS + b"0123456789-"), _byte_mask(_LETTERS))
MIN_CLASS_SHARE = 0.5  # tables serve other states where this share of tokens is in the first
# the per-vocabulary tables built on demand for the byte classes and bounds of particular
# states (attributes of the vocabulary: dicts keyed by class mask / bounds), which
# ``Vocabulary.clear_tables`` trims back to what ``prepare`` built
STATE_TABLES = ("_count_runs", "_count_long", "_count_runs_above", "_count_class")
_LOCK = threading.Lock()


def _flat_tokens(vocab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(flat bytes uint8 [total], start int64 [n], length int64 [n])`` of every token,
    built once per vocabulary.
    """
    cached = vocab.__dict__.get("_count_flat")
    if cached is None:
        lengths = np.fromiter(map(len, vocab.token_bytes), np.int64, vocab.vocab_size)
        flat = np.frombuffer(b"".join(vocab.token_bytes), np.uint8)
        starts = np.cumsum(lengths) - lengths
        cached = vocab.__dict__["_count_flat"] = (flat, starts, lengths)
    return cached


def run_lengths(vocab, byte_mask: int) -> np.ndarray:
    """int32 ``[vocab_size]``: each token's longest run of consecutive bytes in
    ``byte_mask`` (a 256-bit mask); 0 for tokens without such a byte. Cached per
    vocabulary and mask. Raises: never.
    """
    with _LOCK:
        table = vocab.__dict__.setdefault("_count_runs", {})
        hit = table.get(byte_mask)
        if hit is not None:
            return hit
        flat, starts, lengths = _flat_tokens(vocab)
        lut = np.unpackbits(
            np.frombuffer(byte_mask.to_bytes(32, "little"), np.uint8), bitorder="little"
        ).astype(bool)
        inside = lut[flat]
        idx = np.arange(flat.shape[0], dtype=np.int64)
        last_break = np.where(inside, -1, idx)  # a byte outside the class breaks a run
        nonempty = lengths > 0
        first = starts[nonempty]
        last_break[first] = np.maximum(last_break[first], first - 1)  # so does a token start
        run = idx - np.maximum.accumulate(last_break) if flat.shape[0] else idx
        out = np.zeros(vocab.vocab_size, np.int32)
        if first.shape[0]:
            out[nonempty] = np.maximum.reduceat(run, first)
        out.setflags(write=False)
        table[byte_mask] = out
        return out


def long_run_tables(
    vocab, bounds: frozenset[tuple[int, int]]
) -> tuple[TokenTrie, np.ndarray] | None:
    """The trie of the allowable tokens whose longest run of ``mask``'s bytes exceeds
    ``hi`` for some ``(mask, hi)`` of ``bounds`` (256-bit masks, counts), and the packed
    int32 ``[words]`` mask of those tokens; None when they are more than
    ``_MAX_LONG_TOKENS``. Cached per vocabulary and token set. Raises: never.
    """
    least: dict[int, int] = {}
    for mask, hi in bounds:
        least[mask] = min(hi, least.get(mask, hi))
    key = []  # (mask, how many tokens have a longer run): the same tokens, the same key
    for mask, hi in sorted(least.items()):
        above = runs_above(vocab, mask)
        key.append((mask, above[hi] if hi < len(above) else 0))
    key = tuple(key)
    tables = vocab.__dict__.setdefault("_count_long", {})
    if key in tables:
        return tables[key]
    if sum(n for _, n in key) > _MAX_LONG_TOKENS:
        out = None
    else:  # a few tokens: nothing over the whole vocabulary (with the C build)
        ids = np.unique(np.concatenate([_longer_runs(vocab, m, hi) for m, hi in least.items()]))
        ids = ids[~vocab.index_tables[0][ids]]
        packed = np.zeros((vocab.vocab_size + 31) // 32, np.int32)
        set_bits(packed, ids)
        packed.setflags(write=False)
        if holding_in_c():
            trie = vocab.token_trie.subset(ids, _flat_tokens(vocab))
        else:
            keep = np.zeros(vocab.vocab_size, bool)
            keep[ids] = True
            trie = TokenTrie.build(vocab.token_bytes, ~keep)
        out = (trie, packed)
    with _LOCK:
        tables[key] = out
    return out


def prepare_long_runs(vocab, byte_mask: int) -> int:
    """Build now the ``long_run_tables`` of ``byte_mask``'s class alone (a 256-bit mask) for
    every bound ``hi >= MIN_SHARED_HI``, one per distinct set of tokens (the key counts the
    tokens), and the node lists ``walk_steps`` reads from each trie; sets of more than
    ``_MAX_LONG_TOKENS`` tokens have none to build. ``Vocabulary.prepare`` builds those of
    the first ``TABLE_CLASSES`` class: a host label's count (``[A-Za-z0-9-]{0,61}``) then
    reads its tables instead of cutting a trie inside its first mask (SmolLM2: 49 bounds,
    31 sets of at most 54 tokens, 2 ms; a 150k BPE: 7 sets, 5 ms). Returns: how many sets
    have tables. Raises: never.
    """
    above = runs_above(vocab, byte_mask)
    seen = set()
    for hi in range(MIN_SHARED_HI, max(len(above), MIN_SHARED_HI + 1)):
        n = above[hi] if hi < len(above) else 0
        if n in seen or n > _MAX_LONG_TOKENS:
            continue
        seen.add(n)
        tables = long_run_tables(vocab, frozenset({(byte_mask, hi)}))
        if tables is not None:
            _trie_lists(tables[0])
    return len(seen)


def runs_above(vocab, mask: int) -> list[int]:
    """``above[h]``: how many tokens have a longest run of ``mask``'s bytes
    (``run_lengths``) longer than ``h``, for ``h`` up to the longest run (a list: read per
    state without a numpy call; cached per vocabulary and mask; ``Vocabulary.prepare``
    builds those of ``TABLE_CLASSES``). Raises: never.
    """
    return _run_order(vocab, mask)[0]


def _run_order(vocab, mask: int) -> tuple[list[int], np.ndarray]:
    """``(runs_above(vocab, mask), by_run)``: ``by_run`` int64, the ids of the tokens whose
    longest run of ``mask``'s bytes is longer than ``MIN_SHARED_HI``, longest first (ties
    by id): those longer than ``hi >= MIN_SHARED_HI`` are its first ``above[hi]``. Cached
    per vocabulary and mask.
    """
    table = vocab.__dict__.setdefault("_count_runs_above", {})
    hit = table.get(mask)
    if hit is None:
        runs = run_lengths(vocab, mask)
        counts = np.bincount(runs)
        above = (int(counts.sum()) - np.cumsum(counts)).tolist()
        long = np.flatnonzero(runs > MIN_SHARED_HI)
        by_run = long[np.argsort(-runs[long], kind="stable")]
        by_run.setflags(write=False)
        hit = table[mask] = (above, by_run)
    return hit


def _longer_runs(vocab, mask: int, hi: int) -> np.ndarray:
    """int64: the ids of the tokens whose longest run of ``mask``'s bytes is longer than
    ``hi`` (any order).
    """
    above, by_run = _run_order(vocab, mask)
    if hi >= MIN_SHARED_HI:
        return by_run[: above[hi] if hi < len(above) else 0]
    return np.flatnonzero(run_lengths(vocab, mask) > hi)


def class_tables(vocab, byte_mask: int) -> tuple[TokenTrie, np.ndarray, np.ndarray, list[int]]:
    """Per vocabulary and class (``byte_mask``, a 256-bit mask): the trie of the allowable
    tokens holding a byte outside the class; the packed int32 ``[words]`` mask of the
    others, the allowable non-empty tokens all of whose bytes are in it; those tokens' ids
    (int64 ``[k]``) ordered by first byte, and where each first byte's ids start (a list of
    257 offsets). Built once (from ``run_lengths``: a token lies in the class when its
    longest run is its length; the trie cut from ``vocab.token_trie``). Raises: never.
    """
    tables = vocab.__dict__.setdefault("_count_class", {})
    hit = tables.get(byte_mask)
    if hit is not None:
        return hit
    from .token_index import pack_bitmask  # token_index imports this module

    flat, starts, lengths = _flat_tokens(vocab)
    never = vocab.index_tables[0]
    inside = (run_lengths(vocab, byte_mask) == lengths) & (lengths > 0) & ~never
    packed = pack_bitmask(inside)
    packed.setflags(write=False)
    ids = np.flatnonzero(inside)
    first = flat[starts[ids]]
    order = np.argsort(first, kind="stable")
    ids = ids[order]
    ids.setflags(write=False)
    offsets = np.searchsorted(first[order], np.arange(257)).tolist()
    out = (vocab.token_trie.subtrie(~inside), packed, ids, offsets)
    with _LOCK:
        return tables.setdefault(byte_mask, out)


def class_tables_pay(vocab) -> bool:
    """True when the allowable non-empty tokens of the first ``TABLE_CLASSES`` class alone
    are at least ``MIN_CLASS_SHARE`` of the vocabulary (a 150k BPE's 59%; SmolLM2's 32%,
    where its others' trie keeps 72% of the nodes and the closure costs more than the walk
    saves): then states other than a count's canonical one try the tables
    (``TokenIndex._walk_by_class``). Cached per vocabulary. Raises: never.
    """
    hit = vocab.__dict__.get("_count_class_pay")
    if hit is None:
        _, _, lengths = _flat_tokens(vocab)
        inside = run_lengths(vocab, TABLE_CLASSES[0]) == lengths
        inside &= (lengths > 0) & ~vocab.index_tables[0]
        hit = vocab.__dict__["_count_class_pay"] = bool(
            inside.sum() >= MIN_CLASS_SHARE * vocab.vocab_size
        )
    return hit


def closed_class(dfa, state: int, byte_mask: int) -> tuple[int, int]:
    """``(B, F)``: a subset ``B`` of ``byte_mask``'s bytes (a 256-bit mask) and the bytes
    ``F`` of ``B`` that ``state`` does not die on, such that every state ``dfa`` (a
    ``ByteDFA``) reaches from ``state`` by a string of ``B``'s bytes starting with one of
    ``F`` is live: then every token of ``B``'s bytes alone is live from ``state`` exactly
    when its first byte is in ``F`` (a domain label's first byte: not ``-``). Found
    breadth-first from the states after ``F``'s bytes: the bytes a state met dies on are
    dropped from ``B`` and the search starts again, so ``B`` is not always the largest such
    set (two such sets need not have a union that is one: ``a*|b*``). ``(0, 0)`` when
    nothing is left, or past ``_MAX_CLOSURE`` states (not looked into further). The rows
    of the states met are built whole (``trie.build_row``; the walk from ``state`` reads
    those bytes anyway). Raises: ``GrammarTooComplexError`` when a row exceeds a budget.
    """
    inside = _bytes_of(byte_mask)
    step = _whole_row(dfa, state)[inside]  # where each byte of the class leads from state
    closed = byte_mask
    while True:
        starts = sorted(s for s in set(step.tolist()) if s >= 0)
        if not starts or len(starts) > _MAX_CLOSURE:
            return 0, 0
        seen, todo = set(starts), deque(starts)
        while todo:
            q = todo.popleft()
            after = _whole_row(dfa, q)[inside]
            nxt = after.tolist()
            if min(nxt) < 0:  # drop what q dies on, start again
                keep = after >= 0
                for b in inside[~keep].tolist():
                    closed &= ~(1 << b)
                inside, step = inside[keep], step[keep]
                break
            for r in set(nxt) - seen:
                if len(seen) >= _MAX_CLOSURE:
                    return 0, 0
                seen.add(r)
                todo.append(r)
        else:
            first = closed
            for b in inside[step < 0].tolist():  # state dies on these (a label's "-")
                first &= ~(1 << b)
            return closed, first


@functools.lru_cache(maxsize=64)
def _bytes_of(byte_mask: int) -> np.ndarray:
    """The bytes of a 256-bit mask, ascending (read-only intp ``[n]``)."""
    packed = np.frombuffer(byte_mask.to_bytes(32, "little"), np.uint8)
    out = np.flatnonzero(np.unpackbits(packed, bitorder="little"))
    out.setflags(write=False)
    return out


def _whole_row(dfa, state: int) -> np.ndarray:
    """``dfa.row(state)``, built by ``build_row`` (in C where it can) when not yet whole."""
    if not dfa.has_whole_row(state):
        build_row(dfa, state)
    return dfa.row(state)


def walk_class(vocab, dfa, state: int, byte_mask: int, own: bool = True) -> np.ndarray | None:
    """The packed int32 ``[words]`` mask of the tokens live from ``state`` (a ``ByteDFA``
    state) as the tokens of the bytes of ``closed_class(dfa, state, byte_mask)``'s ``B``
    alone (live when their first byte is in ``F``: their mask from ``class_tables``, the
    others' ids cleared) and a walk over the trie of the others; None when ``B`` is empty
    or has no table (``_table_class``; ``own`` False: none is built for a class outside
    ``TABLE_CLASSES``): walk the whole trie. Any class ``C`` within ``B`` does for ``B``
    (every token of ``C``'s bytes alone is one of ``B``'s; the tokens with a byte outside
    ``C`` are walked), so a table of ``TABLE_CLASSES`` serves every state whose ``B`` holds
    it. A canonical state's class is the one its counts repeat (``[A-Za-z0-9-]`` of a
    domain label: 88k of a 150k BPE's tokens lie in it); another state's, the bytes of a
    table class it lives on (``TokenIndex._walk_by_class``: an e-mail's local part, a
    URI's scheme, authority, host and path). Exact: the trie walk marks a token live when
    every step along it is, the same steps. Raises: ``GrammarTooComplexError`` when a row
    exceeds a budget.
    """
    closed, first = closed_class(dfa, state, byte_mask)
    if not closed:
        return None
    table = _table_class(vocab, closed, own)
    if table is None:
        return None
    trie, inside, ids, offsets = class_tables(vocab, table)
    mask = inside.copy()
    dead = table & ~first
    if dead:  # the tokens of the class that start with a byte state dies on
        runs = []
        while dead:
            b = (dead & -dead).bit_length() - 1
            runs.append(ids[offsets[b] : offsets[b + 1]])
            dead &= dead - 1
        cut = np.concatenate(runs)
        if cut.shape[0]:
            bits = np.left_shift(1, cut & 31).astype(np.uint32)
            np.bitwise_and.at(mask.view(np.uint32), cut >> 5, ~bits)
    trie.walk(dfa, state, None, mask)
    return mask


def _table_class(vocab, closed: int, own: bool) -> int | None:
    """The class whose table serves a state with closed class ``closed`` (``walk_class``):
    the widest of ``TABLE_CLASSES`` within it, else (with ``own``) ``closed`` itself, while
    fewer than ``_MAX_CLASS_TABLES`` classes have tables (else the widest class with a table
    within it); None when there is none (walk the whole trie).
    """
    known = vocab.__dict__.get("_count_class", {})
    want = next((c for c in TABLE_CLASSES if not c & ~closed), closed if own else None)
    if want is None:
        return None
    if want in known or len(known) < _MAX_CLASS_TABLES:
        return want
    within = [c for c in known if not c & ~closed]
    return max(within, key=int.bit_count) if within else None


def run_derivative(arena, t: int, b: int, m: int) -> int | None:
    """The derivative of term ``t`` by ``m`` copies of byte ``b`` in one go, for the shapes
    a run through a count takes: ``t`` a byte class, ``X{lo,hi}`` of a byte class, such a
    repetition followed by a tail that ``b`` cannot start, a byte class followed by any
    such shape, or an alternation of them (``d(X{lo,hi} c, b^m)`` is
    ``X{max(lo-m,0),hi-m} c`` while ``m <= hi``, else ``EMPTY``). None for any other shape
    (step byte by byte). Terms without intersection or complement only. Raises:
    ``GrammarTooComplexError`` only from the arena's term budget.
    """
    while True:
        if m == 0:
            return t
        if not (arena.first[t] >> b) & 1:
            return EMPTY
        k, args = arena.kind[t], arena.args[t]
        if k == BYTES:
            return EPS if m == 1 else EMPTY
        if k == ALT:
            parts = [run_derivative(arena, u, b, m) for u in args]
            return None if None in parts else arena.alt(parts)
        tail = EPS
        if k == CONCAT:
            t, tail = args
            k, args = arena.kind[t], arena.args[t]
            if k == BYTES:  # the byte is read by the head: the rest of the run by the tail
                t, m = tail, m - 1
                continue
            if (arena.first[tail] >> b) & 1:
                return None
        if k != REPEAT or arena.kind[args[0]] != BYTES:
            return None
        x, lo, hi = args
        if hi != INF and m > hi:
            return EMPTY
        return arena.concat(arena.repeat(x, max(lo - m, 0), INF if hi == INF else hi - m), tail)


def _trie_lists(trie: TokenTrie) -> tuple[list[int], ...]:
    """``(byte, depth, skip, token, chain)`` of ``trie`` as lists; ``chain[i]``: how many
    nodes from ``i`` on carry ``i``'s byte, one below the other, each but the last with no
    other child (a run of one byte inside the tokens). Cached on the trie.
    """
    lists = trie.__dict__.get("_count_lists")
    if lists is None:
        byte, depth, skip = trie.byte.tolist(), trie.depth.tolist(), trie.skip.tolist()
        n = trie.num_nodes
        chain = [1] * n
        for i in range(n - 2, -1, -1):
            if byte[i + 1] == byte[i] and depth[i + 1] == depth[i] + 1 and skip[i + 1] == skip[i]:
                chain[i] = chain[i + 1] + 1
        lists = trie.__dict__["_count_lists"] = (byte, depth, skip, trie.token.tolist(), chain)
    return lists


def walk_steps(trie: TokenTrie, dfa, state: int, mask: np.ndarray) -> None:
    """Set in ``mask`` (packed int32, in place) the tokens of ``trie`` live from ``state``
    (a ``ByteDFA`` state without intersection or complement), stepping ``dfa`` byte by byte
    (``ByteDFA.step``: one derivative per new transition, no row built) and taking a run of
    one byte through a count in one ``run_derivative``: for the few tokens with long runs,
    whose states no other walk meets. Raises: ``GrammarTooComplexError`` when a new state
    exceeds a budget.
    """
    byte, depth, skip, token, chain = _trie_lists(trie)
    with dfa.lock:  # run_derivative builds terms in the automaton's arena
        live = _live_tokens(dfa, state, trie.max_depth, byte, depth, skip, token, chain)
    if trie.dups.shape[0]:
        held = set(live)
        live += [dup for dup, holder in trie.dups.tolist() if holder in held]
    set_bits(mask, np.array(live, np.int64))


def _live_tokens(dfa, state, max_depth, byte, depth, skip, token, chain) -> list[int]:
    """The token ids of ``walk_steps``' trie (its node lists) live from ``state``."""
    arena = dfa.arena
    stack = [state] * (max_depth + 1)
    live = []
    i, n = 0, len(byte)
    while i < n:
        d, m = depth[i], chain[i]
        if m >= _MIN_JUMP:
            t = run_derivative(arena, dfa.term(stack[d - 1]), byte[i], m)
            if t is not None:
                reach = m if t != EMPTY else _live_run(arena, dfa.term(stack[d - 1]), byte[i], m)
                live += [token[j] for j in range(i, i + reach) if token[j] >= 0]
                if reach < m:
                    i = skip[i]
                    continue
                stack[d + m - 1] = dfa.state_of_term(t)
                i += m
                continue
        nxt = dfa.step(stack[d - 1], byte[i])
        if nxt < 0:
            i = skip[i]
            continue
        stack[d] = nxt
        if token[i] >= 0:
            live.append(token[i])
        i += 1
    return live


def _live_run(arena, t: int, b: int, m: int) -> int:
    """The longest ``j < m`` with ``run_derivative(arena, t, b, j)`` not ``EMPTY`` (it is
    ``EMPTY`` at ``m``; liveness only shrinks as the run grows): a binary search.
    """
    lo, hi = 0, m  # live at lo, dead at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if run_derivative(arena, t, b, mid) == EMPTY:
            hi = mid
        else:
            lo = mid
    return lo


class CountView:
    """The canonical term of a regex state for its mask (the module docstring), per arena.

    Args:
        arena: the ``TermArena`` of the automaton.
        vocab: the ``Vocabulary`` of the masks: a class is shared only when some token holds
            ``MIN_RUN`` of its bytes in a row (``run_lengths``).
        reach: repetitions behind more non-nullable heads than this are left as they are
            (exact either way: this bounds the terms looked at per state; a repetition
            further on comes to the front in the states the walk meets).
    """

    def __init__(self, arena, vocab, reach: int = REACH) -> None:
        self.arena = arena
        self.vocab = vocab
        self.reach = reach
        self._worth: dict[int, bool] = {}  # class mask -> some token has MIN_RUN in a row
        # the terms interned before (the compile: the C lowering interns without repeat(),
        # so arena.max_byte_count only sees the derivatives' repetitions) hold one to share
        self._compiled_counts = _holds_count(arena)
        self._memo: dict[tuple[int, int], tuple[int, frozenset]] = {}
        self._plain: dict[int, int] = {}  # term -> largest budget at which nothing changes
        # what count_reach reads: the arena's lists (only ever appended to) and _canon's bounds
        self._lists = (arena.kind, arena.args, arena.nullable, arena.depth)
        self._limits = (MIN_SHARED_HI, _MAX_DEPTH, _MAX_MEMBERS, _MAX_SPINE)

    def may_share(self, term: int) -> bool:
        """False when ``canonical(term)`` is ``(term, frozenset())`` for certain: no
        repetition ``X{lo,hi}`` of a byte class with a finite ``hi >= MIN_SHARED_HI`` within
        ``reach`` heads of the start, by ``_canon``'s own walk (in C, ``csrc/count_reach.h``:
        nothing interned, the ``MIN_RUN`` test of the vocabulary left out). True when there
        may be one (always without the C extension). Raises: ``IndexError`` for a term
        not in the arena (never for a state's term).
        """
        if not self._compiled_counts and self.arena.max_byte_count < MIN_SHARED_HI:
            return False  # no repetition to share
        reach = _count_reach
        if reach is None:
            return True
        kind, args, nullable, depth = self._lists
        return reach(kind, args, nullable, depth, term, self.reach, self._limits)

    def canonical(self, term: int) -> tuple[int, frozenset[tuple[int, int]]]:
        """``(canonical term, bounds)``: ``term`` with every repetition ``X{lo,hi}`` of a
        byte class ``X`` with a finite ``hi >= MIN_SHARED_HI`` within ``reach`` heads of the
        start made ``X{lo,INF}``, and ``(mask of X, hi)`` of each; ``(term, frozenset())``
        when there is none. Raises: ``GrammarTooComplexError`` only from the arena's term
        budget.
        """
        arena = self.arena
        if not self.may_share(term):
            return term, frozenset()
        if arena.has_boolean(term):
            return term, frozenset()
        return self._canon(term, self.reach)

    def _canon(self, t: int, budget: int) -> tuple[int, frozenset]:
        arena = self.arena
        k = arena.kind[t]
        if budget <= 0 or k not in (REPEAT, ALT, CONCAT) or arena.depth[t] > _MAX_DEPTH:
            return t, frozenset()
        if k == ALT and len(arena.args[t]) > _MAX_MEMBERS:  # a character class's alternation
            return t, frozenset()
        if self._plain.get(t, 0) >= budget:
            return t, frozenset()
        key = (t, budget)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        args = arena.args[t]
        if k == REPEAT:
            x, lo, hi = args
            if self._shared(args):
                out = (arena.repeat(x, lo, INF), frozenset([(arena.args[x][0], hi)]))
            elif arena.kind[x] != BYTES:
                body, bounds = self._canon(x, budget)
                out = (arena.repeat(body, lo, hi), bounds) if bounds else (t, frozenset())
            else:
                out = (t, frozenset())
        elif k == ALT:
            plain = self._plain
            parts = [(u, ()) if plain.get(u, 0) >= budget else self._canon(u, budget) for u in args]
            bounds = frozenset().union(*(c for _, c in parts))
            out = (arena.alt([u for u, _ in parts]), bounds) if bounds else (t, frozenset())
        else:
            heads: list[tuple[int, frozenset]] = []
            cur, left = t, budget
            while arena.kind[cur] == CONCAT and left > 0 and len(heads) < _MAX_SPINE:
                h, cur = arena.args[cur]
                heads.append(self._canon(h, left))
                left -= not arena.nullable[h]
            tail, bounds = self._canon(cur, left) if left > 0 else (cur, frozenset())
            bounds = bounds.union(*(c for _, c in heads))
            if bounds:
                for h, _ in reversed(heads):
                    tail = arena.concat(h, tail)
                out = (tail, bounds)
            else:
                out = (t, frozenset())
        if out[1]:
            self._memo[key] = out
        else:
            self._plain[t] = budget
        return out

    def _shared(self, args: tuple) -> bool:
        """True for the arguments ``(x, lo, hi)`` of a repetition made unbounded: ``x`` one
        byte class some token holds ``MIN_RUN`` bytes of in a row, ``hi`` finite and at
        least ``MIN_SHARED_HI``.
        """
        x, _, hi = args
        arena = self.arena
        if hi == INF or hi < MIN_SHARED_HI or arena.kind[x] != BYTES:
            return False
        mask = arena.args[x][0]
        worth = self._worth.get(mask)
        if worth is None:  # the longest run is len(above) - 1
            worth = self._worth[mask] = len(runs_above(self.vocab, mask)) > MIN_RUN
        return worth


def _holds_count(arena) -> bool:
    """True when ``arena`` holds a repetition ``X{lo,hi}`` of a byte class with a finite
    ``hi >= MIN_SHARED_HI`` (one pass over its repetitions, found by the list's own search).
    """
    kind, args = arena.kind, arena.args
    i = -1
    for _ in range(kind.count(REPEAT)):
        i = kind.index(REPEAT, i + 1)
        x, _, hi = args[i]
        if hi != INF and hi >= MIN_SHARED_HI and kind[x] == BYTES:
            return True
    return False
