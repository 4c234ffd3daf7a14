"""Which tokens each DFA state allows (``TokenIndex``), computed lazily and cached.

For a state ``s`` every token of the vocabulary is run through the DFA at once by a
walk of the vocabulary's token trie (``Vocabulary.token_trie``, ``trie.py``):
each distinct token prefix the state can follow is stepped through the DFA once, and a
dead transition prunes every token that starts with that prefix, so a first mask costs
time in proportion to the live prefixes, not to vocabulary size x longest token. The
DFA rows met on the way are built lazily (``ByteDFA.row_tables`` / ``gather``). Masks
are packed as int32 words, token ``i`` at bit ``i % 32`` of word ``i // 32``
(least-significant bit first).

Wildcard edges (a grammar's ``!<X>``: any one token but X; llguidance's ``<[^X,Y]>``: but
any of several). In a marker view of the vocabulary (``Vocabulary.is_marker_view``) a
state may have a path over the reserved bytes ``wildcard_marker(X)`` to a state ``t``; no
token spells them, so the trie walk never takes it. Instead every allowable token but X
(``Vocabulary.allowable``: ordinary tokens, those holding ``0xFF`` included, and the
special tokens the grammar names) is
allowed there as one token, leading to ``t``: exactly one token is consumed, whatever its
bytes. A token that both spells a byte path (to ``u``) and takes a wildcard edge (to
``t``), or takes two edges, leads to the union of those states (``dfa.union_state``), so
the automaton stays deterministic over tokens. ``<[*]>`` (any one token) is the edge
that excludes nothing; llguidance's ``<[1,5-7]>`` (its marker written with ``=``) the
edge only the allowable tokens among those ids take.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import numpy as np

from ...lru import LRUCache
from ..regex import terms
from ..regex.dfa import ByteDFA
from ..regex.terms import ALT, CONCAT
from . import trie
from .count_masks import (
    MIN_SHARED_HI,
    TABLE_CLASSES,
    CountView,
    class_tables_pay,
    long_run_tables,
    walk_class,
    walk_steps,
)
from .lexical_masks import MIN_HEAD_BYTES, split_key
from .masks import row_form
from .trie import set_bits, walk_bytes
from .vocabulary import MARKER_BYTE, ONLY_BYTE, WILDCARD_BYTE, Vocabulary, wildcard_ids

__all__ = [
    "TokenIndex",
    "pack_bitmask",
    "cold_mask",
    "cold_step",
    "is_grammar_plan",
    "MAX_CACHE_BYTES",
    "MAX_STEP_MEMO",
]

# cold_step(plan, state, token) -> int | None: ``token_step`` in one C call where
# ``TokenIndex.cold_plan`` has a plan; cold_mask(plan, fill_forms, state) -> mask | None: the
# first mask of a state without a form (``cold_plan``'s) where no write comes with it (None:
# an extension without them)
cold_step = getattr(trie._EXT, "cold_step", None)
cold_mask = getattr(trie._EXT, "cold_mask", None)
GRAMMAR_PLAN_SIZE = 26  # a grammar automaton's cold plan (``_make_grammar_plan``)


def is_grammar_plan(plan: tuple | None) -> bool:
    """True for a grammar automaton's ``cold_plan``. Raises: never."""
    return plan is not None and len(plan) == GRAMMAR_PLAN_SIZE


MAX_CACHE_BYTES = 256 << 20
MAX_STEP_MEMO = 1 << 16  # memoised (state, token) steps per index (~10 MB at most)
MAX_NODE_FREE = 1024  # node-free masks kept for sharing (emptied when full)
MIN_CLASS_BYTES = 32  # a state tries a table class when it may start with this many of it
_DIGITS = tuple(range(0x30, 0x3A))  # bytes of a wildcard marker's ids
_SEPARATORS = (ord(","), ord("-"))  # between ids, inside a range of ids
_ID_BYTES = (*_DIGITS, *_SEPARATORS)


def pack_bitmask(allowed: np.ndarray, num_words: int | None = None) -> np.ndarray:
    """Pack bool ``[n]`` into int32 ``[num_words]`` (default ``ceil(n / 32)``), LSB first."""
    n = allowed.shape[0]
    words = (n + 31) // 32 if num_words is None else num_words
    padded = np.zeros(words * 32, bool)
    padded[:n] = allowed
    return np.packbits(padded, bitorder="little").view("<i4").astype(np.int32, copy=False)


class TokenIndex:
    """Token-level view of a ``ByteDFA`` for one ``Vocabulary``.

    Two LRU caches: packed masks (what every decoding step reads: ``bitmask``; a mask
    costs vocab_size / 8 bytes) and full next-state rows (``next_states``, read by the
    token budget and tests; 4 bytes per token). A first mask walks the token trie for
    the mask alone, so it writes no 4-byte-per-token row into fresh memory. A third
    table, ``steps``, memoises ``token_next_state`` per (state, token) for the tokens a
    grammar may allow (never EOS or special ids): the matcher's ``advance`` reads it
    first, so a step taken before costs one dictionary lookup; it is emptied when it
    reaches ``MAX_STEP_MEMO`` entries. ``fill_forms`` keeps, beside each cached mask, the
    form the matcher's ``fill_bitmask`` writes with one C call (``fill_form``). Over a
    grammar automaton, configurations that differ only in their lexemes' chart nodes share
    one mask where the automaton finds it node-free (``GrammarAutomaton.node_free_key``: no
    token can end a lexeme before its last byte).

    Args:
        dfa: the byte automaton.
        vocab: the vocabulary.
        max_cached_states: bound on the number of cached next-state rows; default: as
            many as fit ``MAX_CACHE_BYTES`` (256 MiB: ~1,300 states at 49k tokens, ~430
            at 150k), at least 64 and at most 8192. Masks: as many as fit
            ``MAX_CACHE_BYTES`` (~43,000 at 49k tokens), at least this bound, at most 65,536.
    """

    def __init__(
        self, dfa: ByteDFA, vocab: Vocabulary, max_cached_states: int | None = None
    ) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.num_words = (vocab.vocab_size + 31) // 32
        self._vocab_size = vocab.vocab_size
        self._bytes_walk: tuple = (None, None, None, None, None)  # token_step's (chosen once)
        if max_cached_states is None:  # a cached row costs ~4 bytes per token
            max_cached_states = max(64, min(8192, MAX_CACHE_BYTES // (4 * vocab.vocab_size + 4)))
        # unlocked: a token index is used by one thread at a time (grammar_pool.py)
        self._rows: LRUCache[int, np.ndarray] = LRUCache(max(0, max_cached_states), lock=False)
        # state -> [mask in masks.row_form, used since the last eviction pass]; a
        # subset of _masks (dropped with it); see fill_form
        self.fill_forms: dict[int, list] = {}
        spare, drop = _second_chance(self.fill_forms)
        self._masks: LRUCache[int, np.ndarray] = LRUCache(spare=spare, on_evict=drop, lock=False)
        self.max_cached_states = max_cached_states
        self.max_cached_masks = max(
            max_cached_states, min(1 << 16, MAX_CACHE_BYTES // (4 * self.num_words + 64))
        )
        self._trie = vocab.token_trie
        # ids never allowed, and EOS: shared per vocabulary
        self._never, self._eos = vocab.index_tables
        self.steps: dict[tuple[int, int], int] = {}  # (state, token) -> state / -1
        # shared head parts: automata of derivative terms, and automata that key their
        # states themselves (a grammar automaton's lexemes: ``lexical_key(state, depth)``)
        self._keys_own = hasattr(dfa, "lexical_key")
        self._regex = isinstance(dfa, ByteDFA) and not self._keys_own  # states are terms
        splits = self._keys_own or isinstance(dfa, ByteDFA)
        self._lexical = getattr(vocab, "lexical_masks", None) if splits else None
        self._lexical_keys: dict[int, tuple[bytes, int] | None] = {}  # state -> key
        self._head_digests: dict[int, bytes] = {}  # term -> head_key digest (this arena)
        self._alias_digests: dict[int, tuple] = {}  # term -> alias_key's memo entry
        self._reads_wildcards = vocab.is_marker_view
        # a grammar automaton's node-free masks (``node_free_key``): the first mask of each
        # key, shared with the key's other configurations; not in a marker view (wildcard
        # edges)
        shares = not self._reads_wildcards and hasattr(dfa, "node_free_key")
        self._node_free_key = dfa.node_free_key if shares else None
        self._node_free: dict[tuple, np.ndarray] = {}
        # configurations without a lexical key, as node_free_key records them (its
        # ``unsplit``): ``_walk_split`` answers None for them without asking ``lexical_key``
        self._unsplit: set[int] | frozenset = dfa.unsplit if shares else frozenset()
        self._edge_only = vocab.edge_only_ids  # allowable, but to wildcard edges only
        self._wildcards: dict[int, tuple[tuple[frozenset[int], bool, int], ...]] = {}
        # masks shared across the counts of X{lo,hi} (count_masks.py): regex automata only
        counted = isinstance(dfa, ByteDFA) and not self._reads_wildcards
        self._counts = CountView(dfa.arena, vocab) if counted else None
        # a grammar automaton's first masks by ``_grammar_mask`` (``_walk``'s ways for it,
        # without its frames); the trie walk's C call and arguments, chosen per setting
        self._grammar_way = self._keys_own and not self._reads_wildcards and self._counts is None
        self._trie_walk: tuple = (None, None, None, None, None)

    def next_states(self, state: int) -> np.ndarray:
        """int32 ``[vocab_size]``: state after each token from ``state``, -1 = not allowed.

        EOS ids map to ``state`` itself when ``state`` is accepting (EOS ends the
        output without moving the DFA), else -1.

        Raises:
            GrammarTooComplexError: building a DFA row exceeded a budget.
        """
        hit = self._rows.peek(state)
        if hit is not None:
            self._rows.touch(state)  # peek and touch: get without a Python call (hot)
            return hit
        nxt = np.full(self.vocab.vocab_size, -1, np.int32)
        mask = self._walk(state, nxt)
        nxt.setflags(write=False)
        self._rows.put(state, nxt)
        if state not in self._masks:
            self._masks.put(state, mask)
        return nxt

    def bitmask(self, state: int) -> np.ndarray:
        """int32 ``[ceil(vocab_size / 32)]``: packed allowed tokens of ``state``.

        Raises:
            GrammarTooComplexError: building a DFA row exceeded a budget.
        """
        hit = self._masks.peek(state)
        if hit is not None:
            self._masks.touch(state)  # peek and touch: get without a Python call (hot)
            return hit
        mask = self._grammar_mask(state) if self._grammar_way else self._walk(state, None)
        self._masks.put(state, mask)
        return mask

    def fill_form(self, state: int) -> list:
        """``[form, used]``: the mask of ``state`` in ``masks.row_form`` (what the
        matcher hands the C writer) and a flag the matcher sets on every use.

        The forms are cached beside the masks (a state's form is dropped with its mask).
        Eviction of masks is LRU over ``bitmask`` calls, with a second chance for a state
        whose flag is set (the matcher's warm path marks a use with one store instead of
        reordering the LRU). Raises: ``GrammarTooComplexError`` as ``bitmask``.
        """
        form = self.fill_forms.get(state)
        if form is None:
            form = [row_form(self.bitmask(state)), True]
            if state in self._masks:
                self.fill_forms[state] = form
        return form

    def _grammar_mask(self, state: int) -> np.ndarray:
        """``_walk(state, None)`` of a grammar automaton outside a marker view
        (``_grammar_way``): the node-free mask shared under its key, else the head split,
        else the whole trie walk (its C call made directly, ``_walk_trie``); the same mask,
        caches and calls as ``_walk``, which stays the reference. Raises:
        ``GrammarTooComplexError`` as ``bitmask``.
        """
        shared, hit = self._node_free_lookup(state)
        if hit is not None:
            return hit
        mask = self._walk_split(state) if self._lexical is not None else None
        if mask is None:
            mask = np.zeros(self.num_words, np.int32)
            self._walk_trie(state, mask)
        if self.dfa.is_accepting(state):
            set_bits(mask, self._eos)
        mask.setflags(write=False)
        self._keep_node_free(shared, mask)
        return mask

    def _walk_trie(self, state: int, mask: np.ndarray) -> None:
        """``TokenTrie.walk(dfa, state, None, mask)`` (a mask only, no whole row first): its
        C walk called with the arguments ``_trie_walk`` keeps (the walk's stack shared: one
        thread at a time) once the trie's subtree tables are built, for the settings
        ``trie.walk`` reads (``trie.use_extension``, ``use_direct_rows``,
        ``use_subtree_shortcut``); ``TokenTrie.walk`` itself otherwise (no extension, the
        tables not built yet, duplicate ids). Raises: ``GrammarTooComplexError`` as
        ``bitmask``.
        """
        walk = self._trie_walk
        if walk[0] is not trie._c or walk[1] is not trie._direct or walk[2] is not trie._below:
            walk = self._trie_walk = self._choose_trie_walk()
        if walk[3] is None:
            self._trie.walk(self.dfa, state, None, mask)
            return
        walk[3](*walk[4][0], mask, int(state), *walk[4][1])

    def _choose_trie_walk(self) -> tuple:
        """``(trie._c, trie._direct, trie._below, fn, (head, tail))`` for ``_walk_trie``:
        ``fn(*head, mask, state, *tail)`` is ``TokenTrie.walk``'s C call (``fn`` None:
        call ``TokenTrie.walk``). The subtree tables are read only once built (a trie's
        first walk does not build them), so a None is chosen again at the next call.
        """
        key = (trie._c, trie._direct, trie._below)
        tt, dfa = self._trie, self.dfa
        tables = tt.__dict__.get("subtree_tables")
        if trie._c is None or not tt.num_nodes or tt.dups.shape[0] or not trie._below:
            return (*key, None, None)
        if tables is None:  # TokenTrie.walk counts its walks and builds them
            return (None, None, None, None, None)
        fn = trie._walk_c(dfa)
        tail = [trie._tables(dfa)]
        if fn is trie._WALK_DIRECT:
            tail.append(dfa)
        tail += (tables, tt.first_nodes)
        stack = np.empty(tt.max_depth + 1, np.int32)
        head = (tt.byte, tt.depth, tt.skip, tt.token, stack, None)
        return (*key, fn, (head, tuple(tail)))

    @property
    def cold_plan(self) -> tuple | None:
        """What the C cold paths of a regex automaton's state read (``csrc/tokentrie.c``,
        ``cold_mask`` and ``cold_step``), or None where they do not apply (a marker view, an
        automaton whose rows the C walk does not build, the extension without them); a
        grammar automaton's (below). Built once per index.

        With it, ``masks.fill_row(dst, tensor, row, fill_forms, state, plan)`` does
        ``fill_form``'s work for a state with no form yet when ``_walk`` would walk the
        whole trie for it (no count view to share, no head split, no alternation of splits,
        no byte-class table: the same tests, answered in C), or would try a head split first
        (``_walk_split``, the plan's last entry, called back from C: its mask), then
        writes the form: the same mask, rows, states, cached mask and form as ``fill_form``;
        any other state is declined (None), as are the settings ``walk_bytes`` and
        ``trie.walk`` read (``trie.use_extension``, ``use_direct_rows``,
        ``terms.use_extension``) when they leave ``walk_direct``. ``cold_mask(plan,
        fill_forms, state)`` is that work without the write (the mask, or None: declined or
        already made), for a destination ``fill_row`` does not take (an ``ndarray``).
        ``cold_step(plan, state, token)`` is ``token_step`` where the state has a cached row
        or mask (None: declined, nothing done).

        A grammar automaton's plan (``_grammar_way``, a trie without duplicate ids, the C
        walk's plain ``walk``) is a shorter tuple, ``_make_grammar_plan``'s, which the same
        two mask calls take for ``_grammar_mask``'s ways (``node_free_key`` and
        ``_walk_split`` called back, the latter not for a state in ``_unsplit``, where it
        answers None; the whole walk in C; declined while the trie's subtree
        tables are not built or the settings ``TokenTrie.walk`` reads leave that walk), and
        ``cold_step`` for ``token_step`` (a native automaton's ``Core.walk``: the token's
        bytes stepped one byte class at a time, no row built for them, a built row read;
        else, or where its tables lack room, ``walk_bytes``, not direct; declined without
        the C walk). Raises: never.
        """
        plan = self.__dict__.get("_cold_plan", False)
        if plan is False:
            plan = self._cold_plan = self._make_cold_plan()
        return plan

    def _make_cold_plan(self) -> tuple | None:
        """``cold_plan``'s tuple, in the order of ``csrc/tokentrie.c``'s ``CP_*``."""
        if self._grammar_way:
            return self._make_grammar_plan()
        dfa, tt = self.dfa, self._trie
        usable = (
            cold_step is not None
            and cold_mask is not None
            and self._regex
            and self._counts is not None
            and not self._reads_wildcards
            and not self._edge_only
            and trie._READS_PENDING
            and getattr(dfa, "row_tables_builds_and_derives", False)
            and tt.num_nodes > 0
        )
        if not usable:
            return None
        if self._lexical is not None:
            self._lexical.ensure_prepared()  # as _walk_split's first test would
        classes = b"".join(c.to_bytes(32, "little") for c in TABLE_CLASSES)
        return (
            trie,
            terms,
            tt,
            tt.byte,
            tt.depth,
            tt.skip,
            tt.token,
            np.empty(tt.max_depth + 1, np.int32),  # the walk's stack (one thread at a time)
            dfa.row_tables,
            dfa,
            tt.dups if tt.dups.shape[0] else None,
            self._eos,
            self._masks,
            np.frombuffer,
            np.dtype(np.int32),
            dfa.arena,
            self._counts,
            self._lexical is not None,
            classes,
            (MIN_HEAD_BYTES, MIN_CLASS_BYTES, MIN_SHARED_HI),
            self.num_words,
            self._never,
            self.vocab.token_bytes,
            self._rows,
            self.steps,
            MAX_STEP_MEMO,
            _weak_split(self) if self._lexical is not None else None,
        )

    def _make_grammar_plan(self) -> tuple | None:
        """A grammar automaton's ``cold_plan``, in the order of ``csrc/tokentrie.c``'s
        ``GP_*``; None where its C call would not be ``TokenTrie.walk``'s (duplicate ids, a
        ``ByteDFA``-like automaton that builds rows itself), where ``token_step`` reads
        wildcard edges, or the extension lacks it.
        """
        dfa, tt = self.dfa, self._trie
        usable = (
            cold_mask is not None
            and trie._READS_PENDING
            and not getattr(dfa, "row_tables_builds_and_derives", False)
            and tt.num_nodes > 0
            and not tt.dups.shape[0]
            and not self._edge_only
        )
        if not usable:
            return None
        return (
            trie,
            tt,
            tt.byte,
            tt.depth,
            tt.skip,
            tt.token,
            np.empty(tt.max_depth + 1, np.int32),  # the walk's stack (one thread at a time)
            trie._tables(dfa),
            dfa,
            self._eos,
            self._masks,
            np.frombuffer,
            np.dtype(np.int32),
            self.num_words,
            self._node_free_key,
            self.vocab.token_ends if self._node_free_key is not None else None,
            self._node_free,
            MAX_NODE_FREE,
            _weak_split(self) if self._lexical is not None else None,
            self._unsplit,
            self._never,
            self._rows,
            self.steps,
            MAX_STEP_MEMO,
            self.vocab.token_bytes,
            _core_walk(dfa),
        )

    @property
    def max_cached_states(self) -> int:
        """Bound on the cached next-state rows (setting it evicts down to it)."""
        return self._rows.max_entries

    @max_cached_states.setter
    def max_cached_states(self, bound: int) -> None:
        self._rows.max_entries = max(0, bound)

    @property
    def max_cached_masks(self) -> int:
        """Bound on the cached masks (at least 1 is kept; setting it evicts down to it):
        least recently used first, sparing once (and moving to the back) those whose fill
        form was used since the last pass.
        """
        return self._max_cached_masks

    @max_cached_masks.setter
    def max_cached_masks(self, bound: int) -> None:
        self._max_cached_masks = bound
        self._masks.max_entries = max(1, bound)

    def lexical_key(self, state: int) -> tuple[bytes, int] | None:
        """``(head digest, exit mask)``: the key of ``state``'s head part in the
        vocabulary's ``LexicalMaskCache`` (``lexical_masks.py``), or None when the state has
        no split (``lexical_masks.split_key``: for a regex state, its term is no
        ``CONCAT(head, rest)`` without intersection or complement whose head
        ``MIN_HEAD_BYTES`` bytes or more can start; an automaton with its own
        ``lexical_key(state, max_depth)``, a grammar automaton, answers for its states).
        Memoised per state. Raises: only ``GrammarTooComplexError`` from an automaton's own
        ``lexical_key`` (a parser budget).
        """
        hit = self._lexical_keys.get(state, False)
        if hit is not False:
            return hit
        depth = self._trie.max_depth
        if self._keys_own:
            key = self.dfa.lexical_key(state, depth)
        else:
            key = split_key(
                self.dfa.arena,
                self.dfa.term(state),
                depth,
                self._head_digests,
                alias_memo=self._alias_digests,
            )
        self._lexical_keys[state] = key
        return key

    def _walk_split(self, state: int) -> np.ndarray | None:
        """The trie-walk mask of ``state`` as head part | exit part (``lexical_masks.py``):
        the head part from the shared cache, the exit tokens walked on their own trie; None
        when the state has no split that pays (at once for a grammar configuration in
        ``_unsplit``: no lexical key). On a miss one whole walk gives the mask and
        stores the head part, or, while the key's exit tables are not built, the whole mask
        (``put_whole``: the tables are built, and the head part cut, only when the key is
        read again).
        """
        if state in self._unsplit:  # a configuration with no lexeme lexical_key would take
            return None
        lex = self._lexical
        lex.ensure_prepared()
        key = self.lexical_key(state)
        if key is None:
            return None
        tables = lex.kept_exit_tables(key[1])  # False: not built yet
        if tables is None:
            return None
        part = lex.get(key)  # a whole mask stored by put_whole is cut (its tables built) here
        if part is None:  # the mask as without a split (a key's term is no alternation)
            if tables is False:
                tables = lex.kept_exit_tables(key[1])  # get refused them: no split
                if tables is None:
                    return None
            mask = self._walk_by_class(state)
            if mask is None:
                mask = self._walk_whole(state, None)
            if tables is False:  # the exit tables built when the key is read again, if ever
                lex.put_whole(key, mask)
            else:
                lex.put(key, mask & ~tables[1])
            return mask
        if tables is False:
            tables = lex.exit_tables(key[1])
            if tables is None:  # (evicted, then refused: a stored part was never refused)
                return None
        mask = part.copy()
        tables[0].walk(self.dfa, state, None, mask)
        return mask

    def _walk_alt(self, state: int) -> np.ndarray | None:
        """The mask of a state whose term is an alternation with a member that splits
        (``lexical_key``: a wide head, e.g. the inside of a JSON string, whose exit tokens
        have a small trie) as the union of its members' masks: each such member's from its
        own state (its head part from the shared cache), the other members' from the
        state of their alternation (a walk over the few first bytes they can start); a
        member whose exit set's trie is not built yet counts as one that splits.
        Exact: a token is live from ``a | b`` iff it is live from ``a`` or from ``b``
        (every state's term, boolean-free here, can still accept). None when the state is
        no such alternation (a key of an object with extra keys allowed, part-way through a
        declared name, is one: the declared rests | any string's rest).
        Raises: ``GrammarTooComplexError`` as ``bitmask``.
        """
        if self._keys_own or self._lexical is None:
            return None
        dfa = self.dfa
        arena, term = dfa.arena, dfa.term(state)
        if arena.kind[term] != ALT or arena.has_boolean(term):
            return None
        depth, lex = self._trie.max_depth, self._lexical
        lex.ensure_prepared()
        wide, narrow = [], []
        for u in arena.args[term]:
            key = split_key(arena, u, depth, self._head_digests, alias_memo=self._alias_digests)
            # an exit set not built yet counts as a split: the member's own state stores its
            # whole mask (put_whole) and its trie is built only if the key is read again
            splits = key is not None and lex.kept_exit_tables(key[1]) is not None
            (wide if splits else narrow).append(u)
        if not wide:
            return None
        if narrow:
            with dfa.lock:  # the alternation of the rest is built in the automaton's arena
                wide.append(arena.alt(narrow))
        mask = np.zeros(self.num_words, np.int32)
        for u in wide:
            mask |= self.bitmask(dfa.state_of_term(u))
        return mask

    def _walk_counts(self, state: int) -> np.ndarray | None:
        """The mask of ``state`` from the mask of its canonical state (``count_masks.py``:
        bounded repetitions of byte classes made unbounded) for the tokens with short runs
        of those classes, and a walk of ``state`` over the trie of the others; None when
        the state has no such repetition (or too many tokens have long runs).
        """
        counts, term = self._counts, self.dfa.term(state)
        if not counts.may_share(term):  # most states: one C call, no lock
            return None
        with self.dfa.lock:  # the canonical term is built in the automaton's arena
            canon, bounds = counts.canonical(term)
        if not bounds:
            return None
        tables = long_run_tables(self.vocab, bounds)
        if tables is None:
            return None
        long_trie, long = tables
        canon_state = self.dfa.state_of_term(canon)
        mask = self._masks.peek(canon_state)
        if mask is None:  # bitmask's, the canonical state's class first (count_masks.py)
            mask = self._walk(canon_state, None, {m for m, _ in bounds})
            self._masks.put(canon_state, mask)
        else:
            self._masks.touch(canon_state)
        mask = mask & ~long
        if long_trie.num_nodes:
            walk_steps(long_trie, self.dfa, state, mask)
        return mask

    def _walk_by_class(self, state: int) -> np.ndarray | None:
        """The mask of a regex state by ``count_masks.walk_class`` over the bytes of a
        ``TABLE_CLASSES`` class it may start with (each class widest first, when it may
        start with ``MIN_CLASS_BYTES`` or more of them: an e-mail's local part, a URI's
        scheme, authority, host and path; the class's tokens are live without a walk when
        their closure is), on a vocabulary where the tables pay (``class_tables_pay``);
        None when none answers (walk the whole trie). No table is built for another class.
        Raises: ``GrammarTooComplexError`` when a row exceeds a budget.
        """
        if self._counts is None:  # regex automata only (rows of their own states)
            return None
        dfa = self.dfa
        starts = dfa.arena.first[dfa.term(state)]
        tried = 0
        for table in TABLE_CLASSES:
            byte_mask = starts & table
            if byte_mask == tried or byte_mask.bit_count() < MIN_CLASS_BYTES:
                continue
            if not class_tables_pay(self.vocab):
                return None
            tried = byte_mask
            mask = walk_class(self.vocab, dfa, state, byte_mask, own=False)
            if mask is not None:
                return mask
        return None

    def _walk_whole(self, state: int, nxt: np.ndarray | None) -> np.ndarray:
        """The whole trie walked from ``state`` (a regex state's row built whole first: the
        first level reads nearly every byte class; an automaton that keys its own states,
        a grammar's, builds whole rows in the walk's callback anyway); a fresh int32 mask.
        """
        mask = np.zeros(self.num_words, np.int32)
        # never-allowed ids are not in the trie; a regex state's row built in the walk's call
        self._trie.walk(self.dfa, state, nxt, mask, whole=not self._keys_own)
        return mask

    def wildcards(self, state: int) -> tuple[tuple[frozenset[int], bool, int], ...]:
        """``(ids, only, target state)`` of each wildcard edge out of ``state`` (the module
        docstring; empty outside a marker view): ``ids`` are excluded, or with ``only`` the
        only ones that may take it. Memoised per state.

        Raises: only ``GrammarTooComplexError`` when a row on the marker's path exceeds a
        budget.
        """
        if not self._reads_wildcards:
            return ()
        hit = self._wildcards.get(state)
        if hit is None:
            hit = self._wildcards[state] = _wildcard_edges(self.dfa, state)
        return hit

    def _union(self, a: int, b: int) -> int:
        """The state of a token that leads to ``a`` and to ``b`` (-1: dead)."""
        if a < 0 or a == b:
            return b
        if b < 0:
            return a
        return int(self.dfa.union_state(a, b))

    def _add_wildcards(self, state: int, mask: np.ndarray, nxt: np.ndarray | None) -> np.ndarray:
        """``mask`` with the tokens of ``state``'s wildcard edges added (a new array when
        there are any); ``nxt`` (if given) updated to where each leads.
        """
        edges = self.wildcards(state)
        if not edges:
            return mask
        allowable = self.vocab.allowable
        merged = np.zeros(allowable.shape[0], bool)
        for ids, only, target in edges:
            listed = [i for i in ids if i < allowable.shape[0]]
            if only:
                sel = np.zeros_like(allowable)
                sel[listed] = allowable[listed]
            else:
                sel = allowable.copy()
                sel[listed] = False
            merged |= sel
            if nxt is not None:
                cur = nxt[sel]
                for other in np.unique(cur[(cur >= 0) & (cur != target)]).tolist():
                    nxt[sel & (nxt == other)] = self._union(other, target)
                nxt[sel & (nxt < 0)] = target
        return mask | pack_bitmask(merged, self.num_words)

    def _node_free_lookup(self, state: int) -> tuple[tuple | None, np.ndarray | None]:
        """``(key, mask)``: ``state``'s node-free key (``node_free_key``: states whose
        masks are equal share it; None where the automaton gives none) and the mask stored
        under it (None: not stored yet).
        """
        if self._node_free_key is None:
            return None, None
        shared = self._node_free_key(state, self.vocab.token_ends)
        return shared, None if shared is None else self._node_free.get(shared)

    def _keep_node_free(self, shared: tuple | None, mask: np.ndarray) -> None:
        """Store the read-only ``mask`` under node-free key ``shared`` (none: nothing), the
        store emptied first when it holds ``MAX_NODE_FREE`` masks.
        """
        if shared is not None:
            if len(self._node_free) >= MAX_NODE_FREE:
                self._node_free.clear()
            self._node_free[shared] = mask

    def _walk(self, state: int, nxt: np.ndarray | None, classes: Iterable[int] = ()) -> np.ndarray:
        """The read-only mask of ``state``; fills ``nxt`` (if given) as ``next_states``.
        ``classes``: 256-bit byte masks whose tokens may all be live from ``state`` (a
        canonical state's repeated classes: ``count_masks.walk_class``, tried first).
        """
        shared, hit = self._node_free_lookup(state) if nxt is None else (None, None)
        if hit is not None:
            return hit
        mask = None
        for byte_mask in classes if nxt is None else ():
            mask = walk_class(self.vocab, self.dfa, state, byte_mask)
            if mask is not None:
                break
        if mask is None and nxt is None:
            # a regex state's term, read once for the first tests of the ways below (each
            # repeats its own): a count view only where the term may share a count's mask, a
            # head part only for a concatenation, an alternation's members only for one
            kind = term = None
            if self._regex:
                term, kind = self.dfa.term(state), self.dfa.arena.kind
            counts = self._counts
            if counts is not None and counts.may_share(term):
                mask = self._walk_counts(state)
            if mask is None and self._lexical is not None:
                if kind is None or kind[term] == CONCAT:
                    mask = self._walk_split(state)
                if mask is None and kind is not None and kind[term] == ALT:
                    mask = self._walk_alt(state)
            if mask is None:
                mask = self._walk_by_class(state)
        if mask is None:
            mask = self._walk_whole(state, nxt)
        if self._reads_wildcards:
            mask = self._add_wildcards(state, mask, nxt)
        if self.dfa.is_accepting(state):
            if nxt is not None:
                nxt[self._eos] = state
            set_bits(mask, self._eos)
        mask.setflags(write=False)
        self._keep_node_free(shared, mask)
        return mask

    def token_next_state(self, state: int, token_id: int) -> int:
        """State after one non-EOS token, -1 if not allowed (from the step memo, the cached
        row or mask when ``state`` has one, else one walk over the token's bytes). Raises:
        only ``GrammarTooComplexError`` when a walk discovers states past a budget.
        """
        nxt = self.steps.get((state, token_id))  # holds in-range, allowable ids only
        if nxt is not None:
            return nxt
        return self.token_step(state, token_id)

    def token_step(self, state: int, token_id: int) -> int:
        """``token_next_state`` for a caller that read ``steps`` and missed (the matcher's
        cold ``advance``): the same result, memoised (an allowable id in range) the same way.
        Raises: only ``GrammarTooComplexError`` when a walk discovers states past a budget.
        """
        if not 0 <= token_id < self._vocab_size:
            return -1
        edge_only = token_id in self._edge_only  # no byte path: only a wildcard edge
        if self._never.item(token_id) and not edge_only:
            return -1
        row = self._rows.peek(state)
        if row is not None:
            nxt = row.item(token_id)  # wildcard edges included
        else:
            mask = self._masks.peek(state)
            if mask is not None and not (mask.item(token_id >> 5) >> (token_id & 31)) & 1:
                nxt = -2  # refused by the cached mask (wildcard edges included)
            elif edge_only:
                nxt = -1
            elif mask is None:
                nxt = self.dfa.walk(state, self.vocab.token_bytes[token_id])
            else:  # rows built; walk_bytes's C walk, chosen once per setting
                walk = self._bytes_walk
                if walk[0] is not trie._c or walk[1] is not trie._direct or walk[2] is not terms._c:
                    walk = self._bytes_walk = self._choose_bytes_walk()
                if walk[3] is not None:
                    nxt = walk[3](self.vocab.token_bytes[token_id], int(state), *walk[4])
                else:
                    nxt = walk_bytes(self.dfa, state, self.vocab.token_bytes[token_id])
            if nxt == -2:
                nxt = -1
            elif self._reads_wildcards:  # (wildcards' own first test)
                for ids, only, target in self.wildcards(state):
                    if (token_id in ids) == only:
                        nxt = self._union(nxt, target)
        steps = self.steps
        if len(steps) >= MAX_STEP_MEMO:
            steps.clear()
        steps[(state, token_id)] = nxt
        return nxt

    def _choose_bytes_walk(self) -> tuple:
        """``(trie._c, trie._direct, terms._c, walk, args)``: the settings ``walk_bytes``'s
        choice reads (``trie.use_extension``, ``use_direct_rows``, ``terms.use_extension``;
        the rest is fixed per automaton) and, under them, its C walk, called
        ``walk(data, state, *args)``: ``walk_bytes_direct`` with ``(tables, dfa)`` or
        ``walk_bytes`` with ``(tables,)`` (``tables``: the row-tables callback); or
        ``(None, None)`` without the extension (``walk_bytes`` then walks in Python); a
        native grammar automaton's ``Core.walk`` (``_walk_core``: as ``cold_step``).
        """
        key = (trie._c, trie._direct, terms._c)
        dfa = self.dfa
        if trie._c is None:
            return (*key, None, None)
        walk = _core_walk(dfa)
        if walk is not None:  # a native grammar automaton: the cold step's walk (no rows)
            return (*key, _walk_core, (walk, trie._c.walk_bytes, trie._tables(dfa)))
        if trie._WALK_BYTES_DIRECT is not None and trie._walk_c(dfa) is trie._WALK_DIRECT:
            return (*key, trie._WALK_BYTES_DIRECT, (trie._tables(dfa), dfa))
        return (*key, trie._c.walk_bytes, (trie._tables(dfa),))

    @property
    def num_cached_states(self) -> int:
        """States with a cached mask or next-state row."""
        return len(set(self._masks).union(self._rows))


def _core_walk(dfa):
    """The C walk of a native grammar automaton (``Core.walk`` of ``csrc/cfgrows.c``: a
    token's configurations stepped one byte class at a time, no row built), for the cold
    step; None where the automaton's rows are not built by an attached core.
    """
    core = getattr(dfa, "_core", None)
    walk = getattr(core, "walk", None)
    if walk is None or getattr(dfa, "row_tables", None) != core.row_tables:
        return None
    return walk


def _walk_core(data: bytes, state: int, walk, walk_bytes, tables) -> int:
    """The state after ``data`` from ``state`` by a grammar automaton's ``Core.walk``, or by
    ``walk_bytes`` over its rows where the walk declines (no room: the rows grow).
    """
    nxt = walk(state, data)
    return walk_bytes(data, state, tables) if nxt is None else nxt


def _weak_split(index: TokenIndex):
    """``index._walk_split`` for a cold plan, through a weak reference: the plan is kept on
    the index, so a bound method there would be a reference cycle, and a dropped index (its
    masks, rows, automaton) would wait for the cyclic collector. A call after the index is
    gone answers None (no split).
    """
    ref = weakref.ref(index)

    def walk_split(state: int):
        index = ref()
        return None if index is None else index._walk_split(state)

    return walk_split


def _wildcard_edges(dfa, state: int) -> tuple[tuple[frozenset[int], bool, int], ...]:
    """Every ``(ids, only, target)`` such that ``wildcard_marker(ids, only=only)`` leads
    from ``state`` to ``target`` (a depth-first walk over the marker's digits, commas and
    dashes; no marker is a prefix of another, so each path ends at one ``0xFF``).
    """
    s = dfa.step(state, MARKER_BYTE)
    if s < 0:
        return ()
    out = []
    for lead, only in ((WILDCARD_BYTE, False), (ONLY_BYTE, True)):
        start = dfa.step(s, lead)
        if start < 0:
            continue
        nodes: list[tuple[int, int]] = []  # (byte, parent node): the paths walked, shared
        stack = [(start, -1)]  # (state, node of the last byte read; -1: none yet)
        while stack:
            cur, node = stack.pop()
            after_digit = node >= 0 and nodes[node][0] not in _SEPARATORS
            if after_digit or (node < 0 and not only):  # ``0xFF ! 0xFF``: excludes none
                end = dfa.step(cur, MARKER_BYTE)
                if end >= 0:
                    written, back = bytearray(), node
                    while back >= 0:
                        written.append(nodes[back][0])
                        back = nodes[back][1]
                    out.append((wildcard_ids(bytes(reversed(written))), only, end))
            for byte in _ID_BYTES if after_digit else _DIGITS:
                nxt = dfa.step(cur, byte)
                if nxt >= 0:
                    nodes.append((byte, node))
                    stack.append((nxt, len(nodes) - 1))
    return tuple(sorted(out, key=lambda e: (e[1], sorted(e[0]), e[2])))


def _second_chance(forms: dict[int, list]):
    """The mask cache's ``spare`` and ``on_evict`` over ``forms`` (``fill_forms``): a mask
    whose form was used since the last pass is spared once (its flag cleared); an evicted
    mask's form goes with it. Closures over the dict, not the index: no reference cycle.
    """

    def spare(state: int, mask: np.ndarray) -> bool:
        form = forms.get(state)
        if form is not None and form[1]:
            form[1] = False
            return True
        return False

    def drop(state: int, mask: np.ndarray) -> None:
        forms.pop(state, None)

    return spare, drop
