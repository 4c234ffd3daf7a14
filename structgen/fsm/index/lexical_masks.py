"""Masks of a state's *lexical head*, shared by every grammar of one vocabulary
(``LexicalMaskCache``).

Why: a DFA state inside a JSON string allows almost every token, so its first mask walks
the whole token trie (~100,000 nodes at 49k tokens) and builds the rows of the UTF-8
states on the way, although which of those tokens are allowed depends only on the string's
character class, not on the schema around it. This is XGrammar's split into
context-independent and context-dependent tokens, taken at the level of derivative terms:

A state whose term is ``CONCAT(h, r)`` (no intersection or complement in it) reads a byte
of ``first(r)`` only when it leaves ``h``; for a token ``w`` with no byte of ``first(r)``,
``d_w(h r) = d_w(h) r`` (by induction on ``w``: ``d_a(h r) = d_a(h) r | d_a(r)`` when ``h`` is
nullable, and ``d_a(r)`` is ``EMPTY`` for ``a`` outside ``first(r)``), so ``w`` is allowed
exactly when ``d_w(h)`` is not empty: a property of ``h`` alone. The mask of the state is
therefore

* the *head part*: the allowed tokens without a byte of ``first(r)``, keyed by the
  structure of ``h`` (``head_key``: a digest of the term, equal for equal structures in any
  arena) and the exit bytes ``first(r)``; computed once by a whole walk and then reused by
  every state, grammar and request with the same head and exit bytes; plus
* the *exit part*: the tokens that hold an exit byte (163 of SmolLM2's tokens hold ``"``),
  walked through the state's own DFA on a trie of just those tokens.

A context-free grammar's configuration inside one lexeme (``fsm/grammar/automaton.py``)
splits the same way on its lexer state's term ``t`` (``split_key`` with ``after``, the
bytes that can start the lexemes that follow it): a token with no exit byte cannot go on
past an end of the lexeme (what follows starts with a byte of ``after``) nor leave ``h``,
so it is allowed exactly when ``d_w(h)`` is not empty: the regex head part of the same key
(one entry serves regex states and lexer states alike). Exit bytes: ``first(r)`` for
``t = CONCAT(h, r)``, with ``after`` when ``r`` is nullable; ``after`` alone with ``h = t``
otherwise. Other lexemes in the configuration are allowed only when each starts with an
exit byte (those started at the lexeme's end, in their initial states): a token with no
exit byte cannot move them.

``x{lo,hi}`` at the top of a head with ``hi`` at least the vocabulary's longest token has
the same head part as ``x*`` (a token is allowed when it is a prefix of ``x{lo,hi}``, and
a prefix of ``x*`` no longer than ``hi`` bytes is one), so a string under ``maxLength``
shares the plain string's entry until fewer characters remain than the longest token.

A first miss of a key whose exit set's tries are not built yet stores the state's whole
mask instead (``put_whole``): the head part is cut from it, and the exit tries built, only
when the key is read again; a key met once (an e-mail's or a URI's string in a schema)
builds none.

Entries are an LRU bounded in bytes (``capacity_bytes``; a 49k-token mask is 6 KiB). The
heads of the JSON string converters (``prepare``) are computed once per vocabulary, as
per-tokenizer preprocessing, and pinned: ``clear`` and eviction keep them. Thread-safe
(one lock; a whole walk on a miss runs outside it).
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from ...errors import ConfigError
from ...lru import LRUCache
from ..regex.terms import ALT, AND, BYTES, CONCAT, INF, NOT, REPEAT, UNTIL
from .trie import TokenTrie, holding_in_c

__all__ = [
    "LexicalMaskCache",
    "DEFAULT_CAPACITY_BYTES",
    "MIN_HEAD_BYTES",
    "alias_key",
    "head_key",
    "repeat_digest",
    "split_key",
    "unit_counts",
]

DEFAULT_CAPACITY_BYTES = 64 << 20  # ~10,000 masks at 49k tokens, ~3,500 at 150k
MIN_HEAD_BYTES = 16  # a head that fewer bytes can start is walked whole (cheap already)
_MAX_EXIT_FRACTION = 8  # split only when the exit trie has < 1/8 of the trie's nodes
_MAX_EXIT_SETS = 256  # exit-byte sets whose tries are kept per vocabulary
_SUBTRIE_NODES_PER_BYTE = 2  # an exit trie from a kept superset's below this (else built)
_ABSENT = object()  # an exit set not kept (None is a kept answer)


class _Whole:
    """A state's whole trie-walk mask stored under its key while the key's exit tables were
    not built (``LexicalMaskCache.put_whole``): the head part is cut from it when the key is
    next read (``get``, ``pin``), so an exit set whose key is never read again builds none.
    """

    __slots__ = ("mask", "nbytes")

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = mask
        self.nbytes = mask.nbytes  # the cache's byte bound: as the head part's


_MAX_KEY_NODES = 4096  # heads larger than this are not keyed (the digest walk is bounded)
_MAX_PINNED_BOUND = 128  # bounded string heads pinned up to this bound (a longer one walks)
_KIND_BYTES = tuple(bytes((k,)) for k in range(256))  # head_key: a term kind's digest prefix


def head_key(
    arena,
    head: int,
    max_depth: int,
    memo: dict[int, bytes],
    bound: tuple[int, int] | None = None,
) -> bytes | None:
    """16-byte digest of the structure of ``head`` (equal for structurally equal terms of
    any arena; alternation members are ordered by digest, not by arena id), with a top-level
    ``x{lo,hi}`` keyed by ``x`` and ``hi`` alone (``repeat_digest``: ``x*`` when ``hi >=
    max_depth``; see the module docstring).

    Args:
        arena: the ``TermArena`` of ``head``.
        head: a term without ``AND`` / ``NOT``.
        max_depth: the vocabulary's longest token, in bytes.
        memo: term -> digest, per arena (filled here).
        bound: ``(x, hi)``: key the head as ``x{lo,hi}`` (a repetition the arena does not
            hold as one term: ``split_key``'s ``x x{lo,hi-1}``).

    Terms an arena shares with a snapshot (``TermArena.shared_prefix``: the same terms
    under the same ids in every arena restored from it) take their digest from, and give
    it to, the snapshot's memo: the JSON string interior of every schema is digested once
    per process, not once per compile. ``memo`` gets them all the same, so which heads
    exceed ``_MAX_KEY_NODES`` does not change.

    Returns:
        The digest, or None when ``head`` has more than ``_MAX_KEY_NODES`` new subterms.
    """
    kind, args = arena.kind, arena.args
    shared_terms, shared = arena.shared_prefix or (0, None)
    top, hi = head, None
    if bound is not None:
        top, hi = bound
    elif kind[head] == REPEAT:
        top, _, hi = args[head]
    # One loop, the same walk as a plain post-order over each term's children (the same terms
    # visited, counted and digested in the same order: which calls give up, and what the
    # memo holds after one, follow from that order), with each kind's children and payload
    # unrolled: a give-up digests up to ``_MAX_KEY_NODES`` terms, ~2 us each this way.
    known = memo.get
    blake2b = hashlib.blake2b
    stack = [top]
    pop = stack.pop
    seen = 0
    while stack:  # iterative post-order: heads nest as deep as the arena's MAX_DEPTH
        u = stack[-1]
        if u in memo:
            pop()
            continue
        if u < shared_terms:
            digest = shared.get(u)
            if digest is not None:
                memo[u] = digest
                pop()
                continue
        k = kind[u]
        a = args[u]
        if k == CONCAT:
            x = known(a[0])
            y = known(a[1])
            if x is None or y is None:
                missing = [c for c in a if c not in memo]
            else:
                data = _KIND_BYTES[CONCAT] + x + y
                missing = None
        elif k == ALT:
            parts = [known(c) for c in a]
            if None in parts:
                missing = [c for c in a if c not in memo]
            else:
                parts.sort()
                data = _KIND_BYTES[ALT] + b"".join(parts)
                missing = None
        elif k == REPEAT:
            x = known(a[0])
            if x is None:
                missing = [a[0]]
            else:
                data = (
                    _KIND_BYTES[REPEAT]
                    + x
                    + a[1].to_bytes(8, "little", signed=True)
                    + a[2].to_bytes(8, "little", signed=True)
                )
                missing = None
        elif k == BYTES:
            data = _KIND_BYTES[BYTES] + a[0].to_bytes(32, "little")
            missing = None
        elif k == UNTIL:
            x = known(a[2])
            if x is None:
                missing = [a[2]]
            else:
                data = (
                    _KIND_BYTES[UNTIL]
                    + len(a[0]).to_bytes(4, "little")
                    + a[0]
                    + a[1].to_bytes(4, "little")
                    + x
                )
                missing = None
        elif k in (AND, NOT):  # callers never pass them; kept distinct all the same
            parts = [known(c) for c in a]
            if None in parts:
                missing = [c for c in a if c not in memo]
            else:
                data = _KIND_BYTES[k] + b"".join(parts)
                missing = None
        else:
            data = _KIND_BYTES[k]
            missing = None
        if missing:
            seen += len(missing)
            if seen > _MAX_KEY_NODES:
                return None
            stack.extend(missing)
            continue
        pop()
        # one call over the kind byte and the payload (the digest incremental updates give)
        memo[u] = digest = blake2b(data, digest_size=16).digest()
        if u < shared_terms:
            shared[u] = digest
    if hi is None:
        return memo[top]
    return repeat_digest(memo[top], hi, max_depth)


def repeat_digest(x_digest: bytes, hi: int, max_depth: int) -> bytes:
    """The key digest of a head ``x{lo,hi}`` (any ``lo <= hi``) from ``x``'s digest: the one
    of ``x*`` when ``hi`` is ``INF`` or at least ``max_depth``, else one of ``x`` and ``hi``.
    ``lo`` is left out: a word of ``x{k}`` with ``k < lo`` extends to one of ``x{lo}``, so
    ``x{lo,hi}`` and ``x{0,hi}`` have the same prefixes. Raises: never.
    """
    if hi == INF or hi >= max_depth:
        return hashlib.blake2b(b"*" + x_digest, digest_size=16).digest()
    return hashlib.blake2b(b"{" + x_digest + hi.to_bytes(8, "little"), digest_size=16).digest()


_MAX_ALIAS_NODES = 1024  # new subterms one alias_key call digests before it gives up
_FAILED = (None, True)  # alias_key's memo: no alias key for this term


def alias_key(
    arena, head: int, max_depth: int, memo: dict[int, tuple[bytes | None, bool]]
) -> bytes | None:
    """16-byte key of the head part of ``head`` through the head aliases of its arena
    (``TermArena.head_aliases``: a bounded string pattern's product states), equal for
    every head that differs only in which aliased terms of one alias it holds; None when
    ``head`` holds no aliased term, holds one whose slack is under ``max_depth``, holds an
    ``UNTIL`` / ``AND`` / ``NOT`` above one, or has more than ``_MAX_ALIAS_NODES`` new
    subterms (``split_key`` then asks ``head_key``).

    What a digest here stands for: the words and the prefixes of at most ``max_depth``
    bytes of its term's language (an aliased term's are its alias's, by the alias's claim,
    when its slack is ``max_depth`` or more; those of a concatenation, alternation or
    repetition follow from its parts'), so equal keys give equal head parts (a head part is
    the tokens, at most ``max_depth`` bytes long, that are prefixes of the head's words).
    Kept apart from ``head_key``'s digests (its own domain and ``memo``, nothing written to
    a snapshot's shared memo): an alias's meaning depends on ``max_depth``.

    Args:
        arena: the ``TermArena`` of ``head``.
        head: a term without ``AND`` / ``NOT``.
        max_depth: the vocabulary's longest token, in bytes.
        memo: term -> ``(digest, holds an alias)`` (``(None, True)``: no key), per arena
            and vocabulary (filled here).

    Raises: never.
    """
    aliases = arena.head_aliases
    kind, args = arena.kind, arena.args
    blake2b = hashlib.blake2b
    stack = [head]
    seen = 0
    while stack:
        u = stack[-1]
        if u in memo:
            stack.pop()
            continue
        alias = aliases.get(u)
        if alias is not None:
            stack.pop()
            memo[u] = (
                (blake2b(b"A" + alias[0], digest_size=16).digest(), True)
                if alias[1] >= max_depth
                else _FAILED
            )
            continue
        k = kind[u]
        a = args[u]
        if k == CONCAT or k == ALT:
            children = a
        elif k == REPEAT or k == UNTIL:
            children = (a[2],) if k == UNTIL else (a[0],)
        elif k == AND or k == NOT:
            memo[u] = _FAILED
            stack.pop()
            continue
        else:
            children = ()
        missing = [c for c in children if c not in memo]
        if missing:
            seen += len(missing)
            if seen > _MAX_ALIAS_NODES:
                return None
            stack.extend(missing)
            continue
        stack.pop()
        parts = [memo[c] for c in children]
        if any(d is None for d, _ in parts):
            memo[u] = _FAILED
            continue
        holds = any(h for _, h in parts)
        if k == UNTIL and holds:  # its language is not one of its part's prefixes alone
            memo[u] = _FAILED
            continue
        digests = [d for d, _ in parts]
        if k == ALT:
            digests.sort()
        if k == REPEAT:
            payload = a[1].to_bytes(8, "little", signed=True) + a[2].to_bytes(
                8, "little", signed=True
            )
        elif k == BYTES:
            payload = a[0].to_bytes(32, "little")
        elif k == UNTIL:
            payload = len(a[0]).to_bytes(4, "little") + a[0] + a[1].to_bytes(4, "little")
        else:
            payload = b""
        data = b"a" + _KIND_BYTES[k] + payload + b"".join(digests)
        memo[u] = (blake2b(data, digest_size=16).digest(), holds)
    digest, holds = memo[head]
    return digest if holds else None


def split_key(
    arena,
    term: int,
    max_depth: int,
    memo: dict[int, bytes],
    after: int | None = None,
    alias_memo: dict[int, tuple[bytes | None, bool]] | None = None,
) -> tuple[bytes, int] | None:
    """``(head digest, exit bytes)``: the cache key of the head part of a state whose term
    is ``term`` (see the module docstring), or None when it has no split.

    Args:
        arena: the ``TermArena`` of ``term``.
        term: a regex state's term (the whole rest of the output), or a lexer state's.
        max_depth: the vocabulary's longest token, in bytes.
        memo: term -> digest, per arena (``head_key``'s).
        after: None for a regex state; for a lexer state, the 256-bit mask of the bytes
            that can start what follows the lexeme's end.
        alias_memo: ``alias_key``'s memo; with it, a head of an arena with head aliases
            is keyed by ``alias_key`` first (a bounded string pattern's states share the
            key across character counts), by ``head_key`` where that gives none.

    ``CONCAT(x, CONCAT(x{lo,hi}, r))`` splits as ``x{lo+1,hi+1} r`` (keyed by
    ``repeat_digest``: as ``x*`` when ``hi + 1`` is at least ``max_depth``), not as ``x``
    followed by exits as wide as ``first(x)``.
    ``CONCAT(CONCAT(a, b), r)`` (a spine longer than the arena's ``_SPINE_MAX`` is kept
    whole as a head: an object with many properties) splits as ``a`` followed by ``b r``
    (exit bytes ``first(b r)``, from ``first`` and ``nullable`` of ``b`` and ``r``; no term
    interned), not as the whole spine followed by ``r``.

    Returns:
        None when ``term`` holds an intersection or complement, when it is no ``CONCAT``
        and ``after`` is None, when fewer than ``MIN_HEAD_BYTES`` bytes can start the head,
        or when ``head_key`` gives up. Raises: never.
    """
    kind = arena.kind
    if (after is None and kind[term] != CONCAT) or arena.has_boolean(term):
        return None  # (a regex state's term that is no concatenation: no split either way)
    bound = None
    args, first, nullable = arena.args, arena.first, arena.nullable
    if kind[term] == CONCAT:
        head, rest = args[term]
        if kind[rest] == CONCAT:  # x x{lo,hi} r (one or more x: a key or a minLength
            star, tail = args[rest]  # string) splits as x{lo+1,hi+1} r
            if kind[star] == REPEAT:
                x, _, hi = args[star]
                if x == head:
                    head, rest = star, tail
                    bound = (x, hi if hi == INF else hi + 1)
        exits, rest_nullable = first[rest], nullable[rest]
        while kind[head] == CONCAT:  # a spine kept whole as the head, (a b) r: a (b r)
            head, mid = args[head]
            exits = first[mid] | exits if nullable[mid] else first[mid]
            rest_nullable = rest_nullable and nullable[mid]
        if after is not None and rest_nullable:
            exits |= after
    elif after is None:
        return None
    else:
        head, exits = term, after
    if arena.first[head].bit_count() < MIN_HEAD_BYTES:
        return None
    digest = None
    if alias_memo is not None and bound is None and arena.head_aliases:
        digest = alias_key(arena, head, max_depth, alias_memo)
    if digest is None:
        digest = head_key(arena, head, max_depth, memo, bound)
    return None if digest is None else (digest, exits)


def unit_counts(dfa, flat: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """How many words of ``dfa``'s language each token starts, read as a sequence of them.

    Args:
        dfa: a ``ByteDFA`` of a prefix code (no word a prefix of another: a JSON string
            character, one UTF-8 character or one escape).
        flat: uint8, the tokens' bytes one after the other.
        lengths: int64 ``[n]``, each token's length in ``flat``.

    Returns:
        int32 ``[n]``: the number of words token ``k`` starts (its last one possibly
        unfinished), -1 where its bytes are no prefix of a sequence of words; None when the
        language is no prefix code (an accepting state with a live byte, or the empty word
        accepted), when a byte leads back to the initial state (the start of a word would
        be ambiguous to count), or when the automaton has more than 4096 states. Exact: a
        prefix code splits a sequence of its words in one way only.

    Raises:
        GrammarTooComplexError: building a row exceeded the automaton's budget.
    """
    local = {dfa.initial: 0}
    order = [dfa.initial]
    rows = []
    while len(rows) < len(order):
        s = order[len(rows)]
        row = dfa.row(s)
        if dfa.is_accepting(s) and (s == dfa.initial or (row >= 0).any()):
            return None
        if (row == dfa.initial).any():  # inside a word: a count from the initial state
            return None  # would take it for the start of the next one
        for t in np.unique(row[row >= 0]).tolist():
            if t not in local:
                local[t] = len(order)
                order.append(t)
        if len(order) > 4096:
            return None
        rows.append(row)
    sink = len(order)
    # next local state per byte: an accepting state is the end of a word, so the next byte
    # starts one from the initial state (local 0); the sink stays
    to_local = np.array([0 if dfa.is_accepting(s) else local[s] for s in order], np.int32)
    table = np.full((sink + 1, 256), sink, np.int32)
    for i, row in enumerate(rows):
        live = row >= 0
        table[i, live] = to_local[[local[t] for t in row[live].tolist()]]
    starts = np.cumsum(lengths) - lengths
    state = np.zeros(lengths.shape[0], np.int32)
    counts = np.zeros(lengths.shape[0], np.int32)
    for j in range(int(lengths.max(initial=0))):
        at = np.flatnonzero(lengths > j)
        cur = state[at]
        counts[at] += cur == 0
        state[at] = table[cur, flat[starts[at] + j]]
    counts[state == sink] = -1
    return counts


class LexicalMaskCache:
    """Head parts of token masks for one vocabulary (see the module docstring).

    Args:
        vocab: the ``Vocabulary``.
        capacity_bytes: bound on the bytes of the unpinned entries (masks); 0 disables
            sharing (every mask is walked whole, as without this cache).
        auto_prepare: run ``prepare`` before the first lookup (False: only the entries
            grammars store; tests use it).

    Attributes:
        hits, misses: head-part lookups answered / not answered since the last
            ``reset_stats``.
    """

    def __init__(
        self, vocab, capacity_bytes: int = DEFAULT_CAPACITY_BYTES, auto_prepare: bool = True
    ) -> None:
        self.vocab = vocab
        self.auto_prepare = auto_prepare
        self.capacity_bytes = int(capacity_bytes)
        self._lock = threading.RLock()  # the two caches below are unlocked: this lock
        self._parts: LRUCache[tuple[bytes, int], np.ndarray] = LRUCache(
            max_bytes=self.capacity_bytes, lock=False
        )
        self._pinned: dict[tuple[bytes, int], np.ndarray] = {}
        self._exits: LRUCache[int, tuple | None] = LRUCache(_MAX_EXIT_SETS, lock=False)
        self._sets: tuple[np.ndarray, np.ndarray] | None = None  # see _token_sets
        self._prepared = False
        self.hits = 0
        self.misses = 0

    def __getstate__(self) -> dict:
        """Pickled without entries or lock (a copy in another process starts empty)."""
        return {"vocab": self.vocab, "args": (self.capacity_bytes, self.auto_prepare)}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["vocab"], *state["args"])

    # ---- per-vocabulary tables -----------------------------------------------------

    def exit_tables(self, exit_mask: int) -> tuple[TokenTrie, np.ndarray] | None:
        """The trie of the allowable tokens holding a byte of ``exit_mask`` (a 256-bit
        mask) and the packed int32 ``[words]`` mask of those tokens; None when they are too
        many for a split to pay (the trie would have 1/8 of the whole trie's nodes or more).
        Built once per exit set: with the C walk in use, by ``TokenTrie.holding`` (one C
        pass over the set's bytes' postings in the vocabulary trie's ``byte_order``, no
        per-call numpy over the vocabulary); else vectorised: ``TokenTrie.build``
        ordered by the whole trie's ``byte_rank``, the bytes gathered from
        ``_token_sets``' flat array), or, where a kept exit trie of a superset of
        ``exit_mask`` is small enough, as its ``subtrie`` (``_kept_subtrie``; the same
        trie). Raises: never.
        """
        with self._lock:
            out = self._exits.get(exit_mask, _ABSENT)
            if out is not _ABSENT:
                return out
            full = self.vocab.token_trie
            sets, lengths, flat, starts = self._token_sets()
            words = (self.vocab.vocab_size + 31) // 32
            if holding_in_c():  # one C pass over the trie's tokens in byte order
                packed = np.zeros(words, np.int32)
                limit = (full.num_nodes - 1) // _MAX_EXIT_FRACTION  # bytes * 8 < nodes
                sub = full.holding(exit_mask, (flat, starts, lengths), limit, packed)
                packed.setflags(write=False)
                out = None if sub is None else (sub, packed)
                self._exits.put(exit_mask, out)
                return out
            holds = self.tokens_holding(exit_mask)
            never = self.vocab.index_tables[0]
            holds &= ~never
            # the exit trie has at most the exit tokens' bytes as nodes: reject early
            if int(lengths[holds].sum()) * _MAX_EXIT_FRACTION >= full.num_nodes:
                out = None
            else:
                sub = self._kept_subtrie(exit_mask, holds, int(lengths[holds].sum()))
                if sub is None:
                    sub = TokenTrie.build(
                        self.vocab.token_bytes, ~holds, full.byte_rank, (flat, starts, lengths)
                    )
                padded = np.zeros(words * 32, bool)
                padded[: holds.shape[0]] = holds
                packed = np.packbits(padded, bitorder="little").view("<i4").astype(np.int32)
                packed.setflags(write=False)
                out = (sub, packed)
            self._exits.put(exit_mask, out)
            return out

    def kept_exit_tables(self, exit_mask: int) -> tuple[TokenTrie, np.ndarray] | None | bool:
        """``exit_tables(exit_mask)`` when they are kept (built, or None: refused), else
        False (not built: nothing is built here). Raises: never.
        """
        with self._lock:
            out = self._exits.get(exit_mask, _ABSENT)
            return False if out is _ABSENT else out

    def _kept_subtrie(self, exit_mask: int, holds: np.ndarray, size: int) -> TokenTrie | None:
        """The exit trie of ``exit_mask`` (its tokens ``holds``, ``size`` bytes in all) as
        ``TokenTrie.subtrie`` of the smallest kept exit trie of a superset of its bytes
        (whose tokens include all of ``holds``: the same trie as a build, O(that trie's
        nodes) without a sort), when that trie has at most ``_SUBTRIE_NODES_PER_BYTE``
        nodes per byte of ``size``; else None (build it). Called under the lock.
        """
        best = None
        for mask in self._exits:
            kept = self._exits.peek(mask) if mask & exit_mask == exit_mask else None
            if kept is not None:
                if best is None or kept[0].num_nodes < best.num_nodes:
                    best = kept[0]
        if best is None or best.num_nodes > _SUBTRIE_NODES_PER_BYTE * size:
            return None
        return best.subtrie(holds)

    def tokens_holding(self, byte_mask: int) -> np.ndarray:
        """Bool ``[vocab_size]``: the tokens with at least one byte in ``byte_mask`` (a
        256-bit mask); the empty tokens and the never-allowed ones included as their bytes
        say. One AND per 64-byte word of ``byte_mask`` that holds a byte, over the
        per-token byte sets (built once). Raises: never.
        """
        sets = self._token_sets()[0]
        holds = np.zeros(sets.shape[1], bool)
        for w in range(4):
            word = (byte_mask >> (64 * w)) & 0xFFFF_FFFF_FFFF_FFFF
            if word:
                holds |= (sets[w] & np.uint64(word)) != 0
        return holds

    def _token_sets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(the bytes of each token as a 256-bit set, uint64 ``[4, vocab_size]`` (byte ``b``
        is bit ``b % 64`` of row ``b // 64``), the byte length of each token int64
        ``[vocab_size]``, every token's bytes one after the other uint8, where each starts
        in them int64 ``[vocab_size]``), built once per vocabulary.
        """
        if self._sets is None:
            tb = self.vocab.token_bytes
            lengths = np.fromiter(map(len, tb), np.int64, len(tb))
            flat_bytes = np.frombuffer(b"".join(tb), np.uint8)
            starts = np.cumsum(lengths) - lengths
            flat = flat_bytes.astype(np.int64)
            owner = np.repeat(np.arange(len(tb), dtype=np.int64), lengths)
            sets = np.zeros((4, len(tb)), np.uint64)
            bits = np.left_shift(np.uint64(1), (flat & 63).astype(np.uint64))
            np.bitwise_or.at(sets, (flat >> 6, owner), bits)
            for a in (sets, lengths, starts):
                a.setflags(write=False)
            self._sets = (sets, lengths, flat_bytes, starts)
        return self._sets

    # ---- entries -------------------------------------------------------------------

    def get(self, key: tuple[bytes, int]) -> np.ndarray | None:
        """The head part stored for ``key`` = (head digest, exit mask), int32 ``[words]``
        read-only; None when absent (counted as a miss). A whole mask stored by
        ``put_whole`` is cut to its head part here (the exit set's tables built; None, and
        the entry dropped, when they are refused). Raises: never.
        """
        with self._lock:
            part = self._pinned.get(key)
            if part is None:
                part = self._parts.peek(key)
                if type(part) is _Whole:
                    part = self._cut(key, part)
                elif part is not None:
                    self._parts.touch(key)  # peek and touch: get without a Python call
            if part is None:
                self.misses += 1
            else:
                self.hits += 1
            return part

    def put(self, key: tuple[bytes, int], part: np.ndarray) -> None:
        """Store a head part (int32 ``[words]``, made read-only), evicting least recently
        used unpinned entries past ``capacity_bytes``. Raises: never.
        """
        part.setflags(write=False)
        with self._lock:
            if key in self._pinned or key in self._parts or self.capacity_bytes <= 0:
                return
            self._parts.put(key, part)

    def put_whole(self, key: tuple[bytes, int], mask: np.ndarray) -> None:
        """Store a copy of the whole trie-walk mask (int32 ``[words]``) of a state keyed
        ``key`` whose exit set's tables are not built yet (``kept_exit_tables`` False): its
        head part (``mask`` without the tokens holding an exit byte: the same tokens, decided
        by the head alone) is cut when the key is next read, and not at all when it is not
        (``get``). As ``put`` otherwise. Raises: never.
        """
        whole = mask.copy()  # the caller's mask gains EOS bits after the walk
        whole.setflags(write=False)
        with self._lock:
            if key in self._pinned or key in self._parts or self.capacity_bytes <= 0:
                return
            self._parts.put(key, _Whole(whole))

    def _cut(self, key: tuple[bytes, int], whole: _Whole) -> np.ndarray | None:
        """The head part of a ``put_whole`` entry, stored in its place (None, the entry
        dropped, when the exit set is refused). Called under the lock.
        """
        tables = self.exit_tables(key[1])
        if tables is None:
            self._parts.pop(key, None)
            return None
        part = whole.mask & ~tables[1]
        part.setflags(write=False)
        self._parts.put(key, part)
        return part

    def pin(self, key: tuple[bytes, int]) -> None:
        """Move the entry of ``key`` (if present) among the pinned ones. Raises: never."""
        with self._lock:
            part = self._parts.peek(key)
            if type(part) is _Whole:
                part = self._cut(key, part)
            if part is not None:
                self._pinned[key] = self._parts.pop(key)

    def clear(self) -> None:
        """Drop every unpinned entry (the pinned per-vocabulary ones stay). Raises: never."""
        with self._lock:
            self._parts.clear()

    def exit_sets(self) -> frozenset[int]:
        """The exit-byte sets whose ``exit_tables`` are kept now. Raises: never."""
        with self._lock:
            return frozenset(self._exits)

    def drop_exit_tables(self, keep: frozenset[int] = frozenset()) -> None:
        """Drop the kept ``exit_tables`` of every exit set not in ``keep`` (built again on
        demand). Raises: never.
        """
        with self._lock:
            for exit_mask in [k for k in self._exits if k not in keep]:
                self._exits.pop(exit_mask)

    def set_capacity(self, capacity_bytes: int) -> None:
        """Set the byte bound of the unpinned entries (evicting down to it).

        Raises:
            ConfigError: a negative bound.
        """
        if capacity_bytes < 0:
            raise ConfigError(f"grammar_cache_bytes must be >= 0, got {capacity_bytes}")
        with self._lock:
            self.capacity_bytes = int(capacity_bytes)
            self._parts.max_bytes = self.capacity_bytes

    def reset_stats(self) -> None:
        """Zero ``hits`` and ``misses``. Raises: never."""
        self.hits = self.misses = 0

    def stats(self) -> dict:
        """``lexical_cache_bytes`` (unpinned entries), ``lexical_cache_entries``,
        ``lexical_cache_pinned``, ``lexical_cache_hits``, ``lexical_cache_misses`` and
        ``lexical_cache_hit_rate`` (hits / lookups, 0.0 before any). Raises: never.
        """
        with self._lock:
            lookups = self.hits + self.misses
            return {
                "lexical_cache_bytes": self._parts.num_bytes,
                "lexical_cache_entries": len(self._parts),
                "lexical_cache_pinned": len(self._pinned),
                "lexical_cache_hits": self.hits,
                "lexical_cache_misses": self.misses,
                "lexical_cache_hit_rate": self.hits / lookups if lookups else 0.0,
            }

    @property
    def num_bytes(self) -> int:
        """Bytes held by the unpinned entries."""
        return self._parts.num_bytes

    def ensure_prepared(self) -> None:
        """``prepare`` once, when ``auto_prepare`` is set. Raises: as ``prepare``."""
        if self.auto_prepare and not self._prepared:
            self.prepare()

    def prepare(self) -> None:
        """Compute and pin the head parts of the JSON string interiors the schema
        converters write (``json_schema.objects.CANON_CHAR`` and
        ``json_schema.pattern.JSON_CHAR``): per-vocabulary preprocessing, once.

        The per-token byte sets of ``tokens_holding`` are built here too (the exit tables of
        any split read them), and each string head under every bound below the longest
        token (``_pin_bounded``: a ``maxLength`` string's states).

        Raises:
            GrammarTooComplexError: never in practice (two small string grammars).
        """
        with self._lock:
            if self._prepared:
                return
            self._prepared = True
            self._token_sets()
        from ..compiler import compile_regex  # the compiler imports this package
        from ..json_schema.objects import CANON_CHAR
        from ..json_schema.pattern import JSON_CHAR

        for char in (CANON_CHAR, JSON_CHAR):
            g = compile_regex(f'"{char}*"', self.vocab)
            index = g.token_index
            state = g.dfa.walk(g.dfa.initial, b'"')
            key = index.lexical_key(state)
            if key is None:
                continue
            index._walk_split(state)  # a miss stores the mask (pin cuts the head part)
            self.pin(key)
            star = g.dfa.arena.args[g.dfa.arena.args[g.dfa.term(state)][0]][0]
            self._pin_bounded(char, index._head_digests[star], key)

    def _pin_bounded(self, char: str, x_digest: bytes, key: tuple[bytes, int]) -> None:
        """Pin the head part of ``x{lo,hi}`` (a string under ``maxLength``) for every ``hi``
        below the longest token, ``x`` the string character ``char`` (digest ``x_digest``;
        ``key``: the pinned entry of ``x*``): the ``x*`` part's tokens that start at most
        ``hi`` characters (``unit_counts``), so a bounded string's states share entries
        instead of walking the trie once per remaining count. ``hi`` up to
        ``_MAX_PINNED_BOUND`` (a vocabulary with longer tokens walks the larger bounds).
        Nothing when ``x`` is no prefix code. Raises: never in practice (a one-character
        automaton).
        """
        from ..regex.dfa import regex_to_dfa
        from .token_index import pack_bitmask  # token_index imports this module

        star = self._pinned.get(key)
        if star is None:
            return
        _, lengths, flat, _ = self._token_sets()
        units = unit_counts(regex_to_dfa(char, eager_rows=0), flat, lengths)
        if units is None:
            return
        units = np.where(units < 0, np.iinfo(np.int32).max, units)
        depth = self.vocab.token_trie.max_depth
        with self._lock:
            for hi in range(1, min(depth, _MAX_PINNED_BOUND + 1)):
                part = star & pack_bitmask(units <= hi, star.shape[0])
                part.setflags(write=False)
                self._pinned[(repeat_digest(x_digest, hi, depth), key[1])] = part
