"""The tokens of a vocabulary as a byte trie, and a DFA state's walk through it (``TokenTrie``).

Why: a token mask asks, for every token, where the DFA goes after the token's bytes.
Tokens share prefixes (``"na``, ``"name``, ``"name":``), so the work that matters is the
number of distinct token prefixes the state can actually follow, not vocabulary size x
longest token. The design is the one of llguidance's toktrie and of xgrammar's
sorted-prefix sharing (independent code): the tokens are sorted by their bytes, every
distinct prefix becomes one trie node, and a walk steps each node through the DFA once;
a dead transition prunes the node's whole subtree (every token starting with that prefix).

Two layouts of the same nodes (built once per vocabulary, vectorised):

* preorder (children by ascending byte): ``byte`` uint8 ``[N]``, ``depth`` int32 ``[N]``
  (1 = a token's first byte), ``skip`` int32 ``[N]`` (first node after the subtree),
  ``token`` int32 ``[N]`` (the id that ends at the node, -1 if none). The C walk
  (``csrc/tokentrie.c``) runs a depth-first loop over them with a state stack;
* breadth-first (sorted by depth, then preorder): the children of a node are contiguous;
  the numpy fallback walks it one depth level at a time (one ``ByteDFA.gather`` per
  level) and finishes small or deep frontiers with a scalar depth-first loop.

Tokens with the same bytes share a node; the node records the first id and ``dups``
lists the others. Tokens never allowed (special, EOS, empty) are not in the trie.
:func:`use_extension` turns the C walk off (numpy fallback); ``compile_*`` applies
``structgen.env``'s ``tokentrie`` setting.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

try:  # optional C extension built by setup.py (csrc/tokentrie.c)
    from . import _tokentrie as _EXT
except ImportError:  # pragma: no cover - exercised when the extension is missing
    _EXT = None

__all__ = [
    "TokenTrie",
    "HAVE_C_WALK",
    "build_row",
    "holding_in_c",
    "set_bits",
    "use_direct_rows",
    "use_subtree_shortcut",
    "use_extension",
    "walk_bytes",
]

HAVE_C_WALK = _EXT is not None  # the extension is built
# the extension reads PENDING row entries (csrc/tokentrie.c); an older build gets whole rows
_READS_PENDING = hasattr(_EXT, "PENDING")


def _tables(dfa):
    """The row-tables callback the C walks call for ``dfa``."""
    if _READS_PENDING:
        return dfa.row_tables
    return getattr(dfa, "row_tables_whole", dfa.row_tables)


_c = _EXT  # the C walk in use, None: numpy (use_extension; tests swap it)


# the extension's direct walks (None where it predates them); ``_c`` is ``_EXT`` or None
_WALK_DIRECT = getattr(_EXT, "walk_direct", None)
_WALK_DIRECT_WHOLE = getattr(_EXT, "walk_direct_whole", None)
_WALK_BYTES_DIRECT = getattr(_EXT, "walk_bytes_direct", None)


def _walk_c(dfa):
    """The C walk for ``dfa``: ``walk_direct`` (called with ``dfa`` as a last argument: its
    missing rows and ``PENDING`` classes built in C over its own tables, ``csrc/dfa_rows.h``)
    when ``dfa.rows_buildable_in_c()``; else ``walk_fused`` (a missing row built with the
    byte read, one ``row_tables(state, byte)`` callback) when ``dfa.row_tables`` takes
    ``(state, byte)`` (``ByteDFA``); else ``walk``. Called with the C walk in use only.
    """
    if _READS_PENDING and getattr(dfa, "row_tables_builds_and_derives", False):
        if _direct and _WALK_DIRECT is not None and dfa.rows_buildable_in_c():
            return _WALK_DIRECT
        return getattr(_c, "walk_fused", _c.walk)
    return _c.walk


_direct = True  # walk_direct where it applies (use_direct_rows; tests compare both)
_below = True  # the C walk's subtree shortcut (use_subtree_shortcut; tests compare both)


def use_subtree_shortcut(enabled: bool) -> None:
    """Let the C walk write the descendants of a node whose state loops on every byte below
    it by one scan (``TokenTrie.descendant_bytes``, the default) or step each of them, for
    the process (the same masks and states). Raises: never.
    """
    global _below
    _below = enabled


def use_direct_rows(enabled: bool) -> None:
    """Build a ``ByteDFA``'s rows inside the C walk (``walk_direct``, the default) or
    through its ``row_tables`` callback (``walk_fused``), for the process. Raises: never.
    """
    global _direct
    _direct = enabled


def use_extension(enabled: bool) -> None:
    """Walk in C (the default, where built) or with numpy, for the process. Raises: never."""
    global _c
    _c = _EXT if enabled else None


_SCALAR_NODES = 256  # numpy fallback: finish a frontier with fewer subtree nodes scalar
_SCALAR_DEPTH = 128  # ... or any frontier this deep (long tokens: few nodes per level)


def _lcp(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 ``[T]``: common prefix length of each token with the previous one (0 for
    the first), tokens given as ``flat[starts[k]:starts[k] + lengths[k]]``, sorted.
    """
    t = lengths.shape[0]
    out = np.zeros(t, np.int64)
    if t < 2:
        return out
    m = np.minimum(lengths[1:], lengths[:-1])
    pair_start = np.cumsum(m) - m
    seg = np.repeat(np.arange(t - 1), m)
    off = np.arange(int(m.sum())) - pair_start[seg]
    diff = flat[starts[:-1][seg] + off] != flat[starts[1:][seg] + off]
    seg_d, off_d = seg[diff], off[diff]
    first = np.flatnonzero(np.r_[True, seg_d[1:] != seg_d[:-1]]) if seg_d.size else seg_d
    out[1:] = m
    out[1:][seg_d[first]] = off_d[first]
    return out


def _skips(depth: np.ndarray, bfs: np.ndarray, parent_bfs: np.ndarray) -> np.ndarray:
    """int32 ``[N]``: first preorder index after each node's subtree.

    The subtree of ``i`` ends at the nearest following node of the same depth (its next
    sibling) unless an ancestor's subtree ends first, so ``skip[i]`` is the minimum of
    that "next node at the same depth" over ``i`` and its ancestors: a path minimum,
    taken by pointer doubling (log2(max depth) vectorised rounds).
    """
    n = depth.shape[0]
    if n == 0:
        return np.zeros(0, np.int32)
    same_next = np.full(n + 1, n, np.int64)  # preorder position of the next same-depth node
    nxt_same = np.r_[depth[bfs][1:] == depth[bfs][:-1], False]
    same_next[bfs[nxt_same]] = bfs[1:][nxt_same[:-1]]
    up = np.full(n + 1, n, np.int64)  # preorder parent, n = root sentinel
    has_parent = parent_bfs >= 0
    up[bfs[has_parent]] = bfs[parent_bfs[has_parent]]
    best = same_next
    while True:
        moving = np.flatnonzero(up[:n] < n)
        if moving.size == 0:
            break
        best[moving] = np.minimum(best[moving], best[up[moving]])
        up[moving] = up[up[moving]]
    return best[:n].astype(np.int32)


def _breadth_first(depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bfs, parent_bfs)`` of a trie's preorder ``depth`` (int32 ``[N]``): the nodes
    breadth-first (by depth, then preorder), and each one's parent as a position in that
    order (-1 at depth 1).
    """
    n = depth.shape[0]
    # breadth-first: by depth, then preorder; a stable sort of 8- or 16-bit keys is numpy's
    # radix sort (O(N), ~10x the merge sort of int32 keys at 16k nodes), the same order
    top = int(depth.max(initial=0))
    small = np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else depth.dtype
    bfs = np.argsort(depth.astype(small, copy=False), kind="stable")
    key = depth.astype(np.int64) * (n + 1) + np.arange(n)
    parent_key = (depth.astype(np.int64) - 1) * (n + 1) + np.arange(n)
    parent_bfs = np.searchsorted(key[bfs], parent_key[bfs]) - 1  # last shallower-by-one node
    parent_bfs[depth[bfs] == 1] = -1
    return bfs, parent_bfs


def holding_in_c() -> bool:
    """Whether ``TokenTrie.holding`` and ``TokenTrie.subset`` can run: the C walk is in use
    (``use_extension``) and the extension has their builds. Raises: never.
    """
    return _c is not None and all(
        hasattr(_c, name) for name in ("holding_trie", "sorted_trie", "byte_postings")
    )


def set_bits(mask: np.ndarray, ids: np.ndarray) -> None:
    """Set bit ``i % 32`` of word ``i // 32`` of ``mask`` (int32 ``[words]``, in place) for
    every id in ``ids`` (int ``[k]``). Raises: IndexError for an id past the mask.
    """
    if ids.size:
        ids = np.asarray(ids, np.int64)
        np.bitwise_or.at(
            mask.view(np.uint32), ids >> 5, np.left_shift(1, ids & 31).astype(np.uint32)
        )


def walk_bytes(dfa, state: int, data: bytes) -> int:
    """``dfa.walk(state, data)`` (-1 if it dies), through built rows in C where the
    extension is built (rows missing on the way are built: in C for a ``ByteDFA`` whose C
    walk is ``walk_direct``, see ``_walk_c``). Raises: GrammarTooComplexError when building
    a row exceeds a budget.
    """
    if _c is None:
        return dfa.walk(state, data)
    if _WALK_BYTES_DIRECT is not None and _walk_c(dfa) is _WALK_DIRECT:
        return _WALK_BYTES_DIRECT(data, int(state), _tables(dfa), dfa)
    return _c.walk_bytes(data, int(state), _tables(dfa))


def build_row(dfa, state: int) -> None:
    """``dfa.row(state)``'s work (the row of ``state`` whole, no ``PENDING`` entry), done in
    C (``build_row_direct``, ``csrc/dfa_rows.h``: the same rows and state ids) for a
    ``ByteDFA`` whose C walk is ``walk_direct`` (``_walk_c``), else by ``dfa.row``.

    Raises:
        GrammarTooComplexError: building the row exceeded a budget.
    """
    if _c is not None and hasattr(_c, "build_row_direct") and _walk_c(dfa) is _c.walk_direct:
        if dfa.has_whole_row(state) or _c.build_row_direct(dfa, int(state)):
            return
    dfa.row(state)


class TokenTrie:
    """Byte trie of the allowable tokens of a vocabulary (see the module docstring).

    Build with ``TokenTrie.build(token_bytes, never)``; ``Vocabulary.token_trie`` caches
    one per vocabulary. All arrays are read-only.

    Attributes:
        vocab_size: number of token ids (``out`` arrays of ``walk`` have this length).
        num_nodes: N, distinct non-empty prefixes of the allowable tokens.
        max_depth: the longest allowable token, in bytes.
        byte, depth, skip, token: the preorder layout (uint8 / int32 ``[N]``).
        dups: int64 ``[k, 2]``: (id, id with the same bytes that holds the node).
    """

    def __init__(
        self,
        vocab_size: int,
        byte: np.ndarray,
        depth: np.ndarray,
        skip: np.ndarray,
        token: np.ndarray,
        dups: np.ndarray,
        bfs: np.ndarray | None = None,
        parent_bfs: np.ndarray | None = None,
        max_depth: int | None = None,
    ) -> None:
        self.vocab_size = vocab_size
        self.byte, self.depth, self.skip, self.token, self.dups = byte, depth, skip, token, dups
        self.num_nodes = int(byte.shape[0])
        if max_depth is None:  # (the C builds know it)
            max_depth = int(depth.max()) if self.num_nodes else 0
        self.max_depth = max_depth
        self._bf = None if bfs is None else (bfs, parent_bfs)  # else built when first read
        for arr in (byte, depth, skip, token, dups) + (self._bf or ()):
            arr.setflags(write=False)

    @property
    def _bfs(self) -> np.ndarray:
        """The nodes breadth-first (``_breadth_first``; the numpy walk's order)."""
        return self._breadth_first_arrays()[0]

    @property
    def _parent_bfs(self) -> np.ndarray:
        """Each node's parent as a position in ``_bfs`` (-1 at depth 1)."""
        return self._breadth_first_arrays()[1]

    def _breadth_first_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._bf is None:  # a trie from holding(): only the numpy walk reads these
            bfs, parent_bfs = _breadth_first(self.depth)
            bfs.setflags(write=False)
            parent_bfs.setflags(write=False)
            self._bf = (bfs, parent_bfs)
        return self._bf

    @classmethod
    def build(
        cls,
        token_bytes: list[bytes],
        never: np.ndarray,
        rank: np.ndarray | None = None,
        token_data: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> TokenTrie:
        """Trie of ``token_bytes[i]`` for every ``i`` with ``never[i]`` False.

        Args:
            token_bytes: bytes of each token id (``Vocabulary.token_bytes``).
            never: bool ``[vocab_size]``: ids left out (must include the empty tokens).
            rank: a larger trie's ``byte_rank`` holding every id kept here: the tokens
                are ordered by it (one numpy sort) instead of by their bytes (a Python
                sort); the same trie either way.
            token_data: ``(flat, starts, lengths)``, the same bytes as one array: uint8
                ``flat`` holds token ``i`` at ``flat[starts[i]:starts[i] + lengths[i]]``
                (int64 ``[vocab_size]`` each): the kept tokens' bytes are gathered from
                it by numpy instead of joined from ``token_bytes`` in Python; the same
                trie either way.

        Cost: one sort of the tokens, then O(total bytes) vectorised work plus
        O(N log max_depth) for the subtree ends. Raises: never.
        """
        kept = np.flatnonzero(~np.asarray(never))
        if rank is not None and (kept.size == 0 or rank[kept].min() >= 0):
            ids_arr = kept[np.argsort(rank[kept], kind="stable")]
        else:  # (an id the larger trie left out: sorted by its bytes)
            ids = [i for i in kept.tolist() if token_bytes[i]]
            ids.sort(key=token_bytes.__getitem__)
            ids_arr = np.array(ids, np.int64)
        if token_data is not None:
            all_flat, all_starts, all_lengths = token_data
            lengths = all_lengths[ids_arr]
            starts = np.cumsum(lengths) - lengths
            at = np.repeat(all_starts[ids_arr] - starts, lengths)
            flat = all_flat[at + np.arange(at.shape[0])]
        else:
            toks = [token_bytes[i] for i in ids_arr.tolist()]
            lengths = np.fromiter(map(len, toks), np.int64, len(toks))
            flat = np.frombuffer(b"".join(toks), np.uint8)
            starts = np.cumsum(lengths) - lengths
        count = ids_arr.shape[0]
        lcp = _lcp(flat, starts, lengths)
        new = lengths - lcp  # nodes each token adds (0: same bytes as the previous token)
        node_start = np.cumsum(new) - new
        owner = np.repeat(np.arange(count), new)
        rel = np.arange(int(new.sum())) - node_start[owner]
        byte = flat[starts[owner] + lcp[owner] + rel].astype(np.uint8)
        depth = (lcp[owner] + rel + 1).astype(np.int32)
        token = np.full(byte.shape[0], -1, np.int32)
        has = new > 0
        token[node_start[has] + new[has] - 1] = ids_arr[has]
        holder = np.maximum.accumulate(np.where(has, np.arange(count), 0))
        dups = np.stack([ids_arr[~has], ids_arr[holder[~has]]], axis=1).reshape(-1, 2)
        bfs, parent_bfs = _breadth_first(depth)
        skip = _skips(depth, bfs, parent_bfs)
        return cls(
            len(token_bytes), byte, depth, skip, token, dups.astype(np.int64), bfs, parent_bfs
        )

    @cached_property
    def byte_rank(self) -> np.ndarray:
        """int64 ``[vocab_size]``: each token's position in the byte order of this trie's
        tokens (its preorder; tokens with the same bytes share one), -1 for the tokens it
        leaves out: the order ``build`` sorts a subset into. Built once. Raises: never.
        """
        rank = np.full(self.vocab_size, -1, np.int64)
        holds = self.token >= 0
        rank[self.token[holds]] = np.arange(int(holds.sum()))
        if self.dups.shape[0]:
            rank[self.dups[:, 0]] = rank[self.dups[:, 1]]
        rank.setflags(write=False)
        return rank

    @cached_property
    def byte_order(self) -> np.ndarray:
        """int32 ``[K]``: this trie's token ids (those sharing a node's bytes included) in
        byte order, ties by id: the order ``build`` sorts any subset of them into
        (``byte_rank``'s). Built once. Raises: never.
        """
        rank = self.byte_rank
        kept = np.flatnonzero(rank >= 0)
        order = kept[np.argsort(rank[kept], kind="stable")].astype(np.int32)
        order.setflags(write=False)
        return order

    def byte_postings(
        self, token_data: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(offsets, positions, totals)``: the positions in ``byte_order`` of the tokens
        holding byte ``b`` are ``positions[offsets[b]:offsets[b + 1]]``, ascending (int64
        ``[257]``, int32 ``[P]``, P the tokens' distinct bytes in all), and those tokens'
        bytes in all are ``totals[b]`` (int64 ``[256]``). Built once per trie from
        ``token_data`` (``build``'s ``(flat, starts, lengths)``: the vocabulary's bytes, the
        same on every call), in C. Raises: RuntimeError without the C extension
        (``holding_in_c``).
        """
        if not holding_in_c():
            raise RuntimeError("TokenTrie.byte_postings needs the C extension (holding_in_c())")
        out = self.__dict__.get("_postings")
        if out is None:
            flat, starts, lengths = token_data
            offsets, pos, totals = _c.byte_postings(self.byte_order, flat, starts, lengths)
            offsets = np.frombuffer(offsets, np.int64)
            pos = np.frombuffer(pos, np.int32)
            totals = np.frombuffer(totals, np.int64)
            out = self.__dict__["_postings"] = (offsets, pos, totals)
        return out

    def holding(
        self,
        byte_mask: int,
        token_data: tuple[np.ndarray, np.ndarray, np.ndarray],
        max_bytes: int,
        packed: np.ndarray,
    ) -> TokenTrie | None:
        """The trie of this trie's tokens holding a byte of ``byte_mask``: the same arrays as
        ``TokenTrie.build`` of them, built in one C pass (the set's ``byte_postings`` marked,
        then the marked tokens in ``byte_order`` with a path stack: no sort, nothing over the
        whole vocabulary but a bitmap scan; the breadth-first arrays of the numpy walk built
        when first read).

        Args:
            byte_mask: the 256-bit set of bytes.
            token_data: ``(flat, starts, lengths)`` as ``build``'s (uint8, int64
                ``[vocab_size]``, int64 ``[vocab_size]``): the vocabulary's bytes.
            max_bytes: the most bytes the kept tokens may hold in all.
            packed: int32 ``[>= ceil(vocab_size / 32)]`` of zeros: the kept tokens' bits
                are set (bit ``i % 32`` of word ``i // 32``); some of them, or none, when
                None is returned.

        Returns:
            The trie, or None when the kept tokens hold more than ``max_bytes`` bytes.

        Raises:
            RuntimeError: the C extension is not in use (``holding_in_c``).
            ValueError: arrays of inconsistent sizes.
        """
        if not holding_in_c():
            raise RuntimeError("TokenTrie.holding needs the C extension (holding_in_c())")
        offsets, positions, totals = self.byte_postings(token_data)
        flat, starts, lengths = token_data
        out = _c.holding_trie(
            self.byte_order,
            offsets,
            positions,
            totals,
            byte_mask.to_bytes(32, "little"),
            flat,
            starts,
            lengths,
            int(max_bytes),
            packed,
        )
        return None if out is None else self._from_c(out)

    def subset(
        self, ids: np.ndarray, token_data: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> TokenTrie:
        """The trie of the tokens ``ids`` (int ``[k]``, ascending, each one of this trie's):
        the same arrays as ``TokenTrie.build`` of them, built in C from their order in
        ``byte_rank`` (a sort of ``k`` ranks; nothing over the whole vocabulary).

        Args:
            ids: the token ids, ascending.
            token_data: ``(flat, starts, lengths)`` as ``build``'s: the vocabulary's bytes.

        Raises:
            RuntimeError: the C extension is not in use (``holding_in_c``).
            ValueError: an id this trie does not hold, or ids not ascending.
        """
        if not holding_in_c():
            raise RuntimeError("TokenTrie.subset needs the C extension (holding_in_c())")
        ids = np.asarray(ids, np.int64)
        if ids.size and (np.any(ids[1:] <= ids[:-1]) or ids[0] < 0 or ids[-1] >= self.vocab_size):
            raise ValueError("ids must be ascending token ids of the vocabulary")
        rank = self.byte_rank[ids]
        if ids.size and rank.min() < 0:
            raise ValueError("an id this trie does not hold")
        order = ids[np.argsort(rank, kind="stable")].astype(np.int32)  # ties by id
        flat, starts, lengths = token_data
        return self._from_c(_c.sorted_trie(order, flat, starts, lengths))

    def _from_c(self, arrays: tuple[bytes, ...]) -> TokenTrie:
        """A trie of this vocabulary from the C builds' ``(byte, depth, skip, token, dups,
        max_depth)``.
        """
        byte, depth, skip, token, dups, max_depth = arrays
        return TokenTrie(
            self.vocab_size,
            np.frombuffer(byte, np.uint8),
            np.frombuffer(depth, np.int32),
            np.frombuffer(skip, np.int32),
            np.frombuffer(token, np.int32),
            np.frombuffer(dups, np.int64).reshape(-1, 2),
            max_depth=max_depth,
        )

    def subtrie(self, keep: np.ndarray) -> TokenTrie:
        """The trie of this trie's tokens ``i`` with ``keep[i]`` True: the same as
        ``TokenTrie.build`` of them (the same arrays), from this trie's preorder layout
        without sorting the tokens again: the nodes whose subtree holds a kept token.

        Args:
            keep: bool ``[vocab_size]``; tokens with the same bytes must have the same
                answer (say, a property of their bytes).

        Raises: ValueError when ``keep`` has the wrong length or splits tokens with the
        same bytes.
        """
        keep = np.asarray(keep, bool)
        if keep.shape != (self.vocab_size,):
            raise ValueError(f"keep has shape {keep.shape}, not ({self.vocab_size},)")
        if self.dups.shape[0] and not np.array_equal(keep[self.dups[:, 0]], keep[self.dups[:, 1]]):
            raise ValueError("keep splits tokens with the same bytes")
        holds = self.token >= 0
        marked = np.zeros(self.num_nodes + 1, np.int64)
        marked[1:][holds] = keep[self.token[holds]]
        below = np.cumsum(marked)  # kept tokens before each node (index i: in [0, i))
        nodes = below[self.skip] - below[:-1] > 0  # a kept token in the node's subtree
        byte, depth = self.byte[nodes], self.depth[nodes]
        token = np.where(marked[1:].astype(bool), self.token, -1)[nodes].astype(np.int32)
        dups = self.dups[keep[self.dups[:, 1]]] if self.dups.shape[0] else self.dups
        bfs, parent_bfs = _breadth_first(depth)
        kept_before = np.r_[0, np.cumsum(nodes)].astype(np.int32)
        skip = kept_before[self.skip[nodes]]  # the first kept node past the subtree
        return TokenTrie(self.vocab_size, byte, depth, skip, token, dups.copy(), bfs, parent_bfs)

    # ---- walking -----------------------------------------------------------------

    def walk(
        self, dfa, state: int, out: np.ndarray | None, mask: np.ndarray, whole: bool = False
    ) -> None:
        """The packed mask of the allowable tokens live from ``state``, and optionally the
        state after each of them.

        Args:
            dfa: a ``ByteDFA`` (rows are built on demand through ``row_tables`` /
                ``gather``).
            state: the start state.
            out: int32 ``[vocab_size]`` prefilled with -1, written in place: the state
                after each live token (tokens that die stay -1); or None (mask only).
            mask: int32 ``[>= ceil(vocab_size / 32)]`` of zeros, written in place: bit
                ``i % 32`` of word ``i // 32`` set for each live token ``i``.
            whole: build the row of ``state`` whole first (``build_row``'s work: the first
                level reads nearly every byte class), in the walk's own C call where the
                walk is ``walk_direct`` (``walk_direct_whole``: the same rows and state ids).

        Raises:
            GrammarTooComplexError: building a DFA row exceeded a budget.
        """
        if self.num_nodes:
            if _c is not None:
                fn = _walk_c(dfa)
                stack = np.empty(self.max_depth + 1, np.int32)
                args = [self.byte, self.depth, self.skip, self.token, stack, out, mask]
                args += [int(state), _tables(dfa)]
                if fn is _WALK_DIRECT:
                    args.append(dfa)
                    if whole and _WALK_DIRECT_WHOLE is not None:
                        fn, whole = _WALK_DIRECT_WHOLE, False
                if whole:
                    build_row(dfa, state)
                if _below:
                    # built on a trie's second walk: a trie walked once (an exit part's,
                    # cold) does not pay the O(N) build for nothing
                    held = self.__dict__
                    tables = held.get("subtree_tables")
                    if tables is None:
                        walks = held.get("_walks", 0)
                        if walks >= 1:
                            tables = self.subtree_tables
                        held["_walks"] = walks + 1
                    if tables is not None:
                        args += (tables, self.first_nodes)
                if fn(*args) is None:  # walk_direct_whole: its whole-row build declined
                    dfa.row(state)
                    _c.walk_direct(*args)
            else:
                if whole:
                    build_row(dfa, state)
                if out is None:
                    out = np.full(self.vocab_size, -1, np.int32)
                self._walk_numpy(dfa, state, out)
                set_bits(mask, np.flatnonzero(out >= 0))
        elif whole:
            build_row(dfa, state)
        if self.dups.shape[0]:
            dup, holder = self.dups[:, 0], self.dups[:, 1]
            if out is not None:
                out[dup] = out[holder]
            words = mask.view(np.uint32)
            set_bits(mask, dup[(words[holder >> 5] >> (holder & 31).astype(np.uint32)) & 1 == 1])

    @cached_property
    def subtree_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The C walk's subtree shortcut (a live node whose state loops on every byte below
        it has all its descendants live in that state, their tokens written without a step):
        ``(below, ranks, ids)``, ``below`` uint64 ``[N, 4]`` the bytes of each node's
        descendants (bit ``b % 64`` of word ``b // 64``; zero for a leaf), ``ranks`` int32
        ``[N + 1]`` the number of token-holding nodes before each node, ``ids`` int32 the
        token of each such node in preorder (the subtree of ``i`` holds
        ``ids[ranks[i + 1]:ranks[skip[i]]]``). None without the C extension. Raises: never.
        """
        if _EXT is None or not hasattr(_EXT, "descendant_bytes"):
            return None
        below = np.zeros((self.num_nodes, 4), np.uint64)
        _EXT.descendant_bytes(self.byte, self.depth, below)
        holds = self.token >= 0
        ranks = np.zeros(self.num_nodes + 1, np.int32)
        np.cumsum(holds, out=ranks[1:])
        ids = np.ascontiguousarray(self.token[holds], np.int32)
        for a in (below, ranks, ids):
            a.flags.writeable = False
        return below, ranks, ids

    @cached_property
    def first_nodes(self) -> np.ndarray:
        """int32 ``[256]``: the first-level node (depth 1) of each byte, -1 where no token
        starts with it; the C walk reads the first level from it, beside ``subtree_tables``
        (a node whose byte is dead in the start state's row is skipped without reading the
        node arrays). Raises: never.
        """
        out = np.full(256, -1, np.int32)
        roots = np.flatnonzero(self.depth == 1)
        out[self.byte[roots]] = roots
        out.flags.writeable = False
        return out

    @cached_property
    def _levels(self) -> tuple[np.ndarray, ...]:
        """Breadth-first arrays of the numpy walk: byte, token, first child, child count,
        subtree size (all ``[N]``, in breadth-first order), and the depth-1 node count.
        """
        bfs, parent = self._bfs, self._parent_bfs
        n = self.num_nodes
        counts = np.bincount(parent[parent >= 0], minlength=n)
        roots = int((parent < 0).sum())
        first = roots + np.cumsum(counts) - counts  # children follow the parents' order
        size = (self.skip - np.arange(n, dtype=np.int32))[bfs]
        return (self.byte[bfs], self.token[bfs], first, counts, size, roots)

    def _walk_numpy(self, dfa, state: int, out: np.ndarray) -> None:
        byte, token, first, counts, size, roots = self._levels
        nodes = np.arange(roots)
        states = np.full(roots, state, np.int32)
        level = 1
        while nodes.size:
            if level >= _SCALAR_DEPTH or int(size[nodes].sum()) <= _SCALAR_NODES:
                self._walk_scalar(dfa, nodes, states, out)
                return
            nxt = dfa.gather(states, byte[nodes])
            alive = nxt >= 0
            nodes, nxt = nodes[alive], nxt[alive]
            tok = token[nodes]
            ends = tok >= 0
            out[tok[ends]] = nxt[ends]
            n_child = counts[nodes]
            total = int(n_child.sum())
            if total == 0:
                return
            offset = np.cumsum(n_child) - n_child
            nodes = np.repeat(first[nodes] - offset, n_child) + np.arange(total)
            states = np.repeat(nxt, n_child)
            level += 1

    def _walk_scalar(self, dfa, nodes: np.ndarray, states: np.ndarray, out: np.ndarray) -> None:
        """Depth-first over the subtrees of ``nodes`` (breadth-first ids, not yet stepped),
        entered from ``states``: for small frontiers, where a numpy level costs more.
        """
        byte, token, first, counts, _, _ = self._levels
        rows: dict[int, list[int]] = {}
        todo = list(zip(nodes.tolist(), states.tolist()))
        while todo:
            node, s = todo.pop()
            row = rows.get(s)
            if row is None:
                row = rows[s] = dfa.row(s).tolist()
            t = row[byte[node]]
            if t < 0:
                continue
            tok = token[node]
            if tok >= 0:
                out[tok] = t
            c0 = int(first[node])
            todo.extend((c, t) for c in range(c0, c0 + int(counts[node])))
