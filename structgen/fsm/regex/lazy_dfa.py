"""A byte DFA whose states are built on demand from regex derivatives (``ByteDFA``).

Design: a state is a term of a ``TermArena`` (see ``terms``): the Brzozowski
derivative of the pattern by the bytes read so far, normalised by the arena's smart
constructors. State ids are given out in discovery order (the initial state is 0).
A state's row of the transition table (all 256 bytes) is computed the first time it
is needed: the bytes that can start the term (``first``) are split into classes on
which the derivative is constant (refinement of the masks at the front of the term;
none for a literal, whose one byte is its own class), one derivative is taken per class
and written to the class's bytes; every other byte stays dead. Single steps (``walk``) take
only the derivative they need, so checking a long string never builds whole rows.

Liveness: a transition is dead (-1) exactly when the derivative's language is empty:
``EMPTY``, or (for terms with intersection or complement, whose emptiness is not
syntactic) what ``TermArena.is_empty`` decides; every state reachable here can still
reach acceptance, which is what token masks rely on.

Counted repetitions stay counts: ``[^"]{0,100000}`` has one state per position
reached (plus a few mid-character states), built only as far as the output goes.

Budgets: ``max_states`` (states whose row is built: exploring, masks) and
``max_seconds`` (CPU seconds per exploration call: compile-time warm-up, ``explore``) raise
``GrammarTooComplexError``. The arena's term budget and nesting limit raise the
same error. Lazily built rows can therefore raise after compile (from ``row``,
``gather``, ``walk``); callers on the per-token path must turn that into their
sticky error state.

Storage: per discovered state a term, an accepting flag, a live-byte count and a
row slot; the int32 ``[256]`` rows live in a separate table with one slot per built
row, so states found by walks cost no table memory.

Classes derived on demand: the rows the token-trie walk asks for (``row_tables``) are
built with their live classes ``PENDING`` (-2) and each class derived when the walk first
reads one of its bytes (``row_tables(state, byte)``): below the trie's first level a state
meets the bytes of a few children only, so the UTF-8 lead classes of a string state, say,
are never derived unless a token holds such a byte. ``row``, ``gather``, ``step``, ``walk``
and ``explore`` never show ``PENDING``: they derive what they read (``row`` and ``gather``
the whole row). Terms with intersection or complement get whole rows (their live-byte
count is read from the row). The C walk ``walk_direct`` does the work of
``row_tables(state, byte)`` itself over these tables (``csrc/dfa_rows.h``, the same terms,
rows and state ids in the same order), leaving a ``_pending`` entry None that
``_pending_entry`` rebuilds from the row.

Thread safety: every mutation happens under one lock; reads of built rows are
lock-free (a row is written before its slot is published).
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import GrammarTooComplexError
from ..deadline import Deadline
from . import terms
from .terms import BYTES, CONCAT, EMPTY, EPS, TermArena, refine_classes

__all__ = ["ByteDFA", "DEFAULT_MAX_STATES", "DEFAULT_MAX_SECONDS", "PENDING", "rows_holding"]

DEFAULT_MAX_STATES = 200_000
DEFAULT_MAX_SECONDS = 10.0  # CPU seconds of the compiling thread (deadline.Deadline)
PENDING = -2  # a row entry whose byte class is not derived yet (rows built for the trie walk)


def _mask_bits(mask: int) -> np.ndarray:
    """Bool ``[256]``: the bytes in a 256-bit ``int`` mask."""
    raw = np.frombuffer(mask.to_bytes(32, "little"), np.uint8)
    return np.unpackbits(raw, bitorder="little").view(bool)  # 0 / 1 bytes: valid bools


def rows_holding(rows: np.ndarray, slot: int) -> np.ndarray:
    """A byte-row table (``[capacity, 256]`` int32, -1 where unbuilt) with room for row
    ``slot``: ``rows`` itself, or a copy of its first ``slot`` rows at twice the capacity.
    """
    if slot < rows.shape[0]:
        return rows
    grown = np.full((rows.shape[0] * 2, 256), -1, np.int32)
    grown[:slot] = rows[:slot]
    return grown


class ByteDFA:
    """Deterministic automaton over bytes, built lazily from a regex term.

    Args:
        arena: the term store (owned by this automaton from now on).
        root: the term of the initial state; must not be ``EMPTY``.
        max_states: budget of built states (rows). Walking a concrete input of n bytes
            may discover up to n further states without building their rows; the
            arena's term budget bounds that.
        max_seconds: CPU-time budget of each exploration call (``deadline.Deadline``).
        capacity: states and rows the tables hold before they first grow (a smaller one
            costs less to allocate; the tables double as they fill either way).

    Attributes:
        initial: the start state (always 0).
        row_tables_builds_and_derives: ``row_tables(state, byte)`` builds a missing row and
            derives ``byte``'s class in one call (the C walk ``walk_fused`` relies on it).
    """

    row_tables_builds_and_derives = True

    def __init__(
        self,
        arena: TermArena,
        root: int,
        *,
        max_states: int = DEFAULT_MAX_STATES,
        max_seconds: float = DEFAULT_MAX_SECONDS,
        capacity: int = 64,
    ) -> None:
        assert root != EMPTY
        self.arena = arena
        self.max_states = max_states
        self.max_seconds = max_seconds
        self.initial = 0
        self._lock = threading.RLock()
        self._terms: list[int] = []
        self._ids: dict[int, int] = {}
        self._partitions: dict[tuple[int, frozenset[int]], list[tuple[int, object]]] = {}
        self._masks: dict[int, np.ndarray] = {}
        self._steps: dict[int, int] = {}  # (state << 8 | byte) -> state, for walks
        # state -> [classes, class of each byte (-1: none), derived flags, classes left]
        self._pending: dict[int, list] = {}
        # id(classes of _partitions) -> (class of each byte [256], row template int32 [256])
        self._class_of: dict[int, tuple[list[int], np.ndarray]] = {}
        cap = max(1, capacity)
        self._rows = np.full((cap, 256), -1, np.int32)  # [row slot, byte] -> state
        self._slot = np.full(cap, -1, np.int64)  # [state] -> row slot, -1 = not built
        self._accepting = np.zeros(cap, bool)
        self._num_out = np.zeros(cap, np.int32)
        self._num_rows = 0
        self._complete = False
        self._dense: np.ndarray | None = None
        self._tables: tuple[np.ndarray, np.ndarray] | None = None  # see row_tables
        self._state_of(root)

    # ---- read-only views -------------------------------------------------------

    @property
    def num_states(self) -> int:
        """States discovered so far (grows as the automaton is explored)."""
        return len(self._terms)

    @property
    def num_rows_built(self) -> int:
        """States whose whole transition row has been computed."""
        return self._num_rows

    @property
    def accepting(self) -> np.ndarray:
        """Bool ``[num_states]``: accepting flag of every discovered state."""
        view = self._accepting[: self.num_states]
        view.flags.writeable = False
        return view

    @property
    def num_out(self) -> np.ndarray:
        """int32 ``[num_states]``: number of bytes with a live transition, per state."""
        view = self._num_out[: self.num_states]
        view.flags.writeable = False
        return view

    @property
    def lock(self) -> threading.RLock:
        """The automaton's reentrant lock: every change of its tables and of its arena is
        made under it; code that builds terms in ``arena`` itself (``fsm.index.count_masks``)
        holds it too.
        """
        return self._lock

    def is_accepting(self, state: int) -> bool:
        """True when ``state`` accepts (the bytes read so far are a match). Raises: never."""
        return bool(self._accepting[state])

    def term(self, state: int) -> int:
        """The arena term of ``state`` (what the head/exit split of masks keys on)."""
        return self._terms[state]

    def state_of_term(self, term: int) -> int:
        """The state of arena term ``term``, added when new: another start of this automaton
        (a grammar's terminals share one arena and one automaton, each read from its own
        term: ``fsm.grammar.lexers``). A new state makes the automaton incomplete again.

        Raises:
            ValueError: ``term`` is ``EMPTY`` (no state: every state can still accept).
        """
        if term == EMPTY:
            raise ValueError("state_of_term: EMPTY has no state")
        with self._lock:
            num = self.num_states
            sid = self._state_of(term)
            if self.num_states > num:
                self._complete = False
                self._dense = None
            return sid

    def states_of_terms(self, terms: list[int]) -> list[int]:
        """``[state_of_term(t) for t in terms]`` under one hold of the lock: the states of
        a grammar's terminals (``fsm.grammar.lexers.SharedLexers.lexers``), new ones added
        in the order of ``terms``.

        Raises:
            ValueError: a term is ``EMPTY`` (the states of the terms before it are added).
        """
        with self._lock:
            num = self.num_states
            ids = self._ids
            out = []
            try:
                for term in terms:
                    if term == EMPTY:
                        raise ValueError("state_of_term: EMPTY has no state")
                    sid = ids.get(term)
                    out.append(self._state_of(term) if sid is None else sid)
            finally:
                if self.num_states > num:
                    self._complete = False
                    self._dense = None
            return out

    def union_state(self, a: int, b: int) -> int:
        """The state whose language is the union of states ``a``'s and ``b``'s (the term
        ``ALT(term(a), term(b))``): where one token takes two paths (``TokenIndex``'s
        wildcard edges). A new state makes the automaton incomplete again.
        """
        if a == b:
            return a
        with self._lock:
            num = self.num_states
            sid = self._state_of(self.arena.alt([self._terms[a], self._terms[b]]))
            if self.num_states > num:
                self._complete = False
                self._dense = None
            return sid

    # ---- construction --------------------------------------------------------------

    def _state_of(self, term: int) -> int:
        sid = self._ids.get(term)
        if sid is not None:
            return sid
        sid = len(self._terms)
        if sid >= self._slot.shape[0]:
            self._grow_states()
        self._ids[term] = sid
        self._terms.append(term)
        self._accepting[sid] = self.arena.nullable[term]
        self._num_out[sid] = self.arena.first[term].bit_count()
        return sid

    def _grow_states(self) -> None:
        cap = self._slot.shape[0] * 2
        for name, fill in (("_slot", -1), ("_accepting", False), ("_num_out", 0)):
            old = getattr(self, name)
            new = np.full(cap, fill, old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def _new_row_slot(self) -> int:
        self._rows = rows_holding(self._rows, self._num_rows)
        return self._num_rows

    def _live_classes(self, term: int, first: int) -> list[tuple[int, object]]:
        """(representative byte, where in a row) per class of ``first`` (the bytes that can
        start ``term``) in the refinement of ``term``'s front masks, by representative (its
        lowest byte); "where" is the byte itself
        for a one-byte class, else a bool ``[256]`` of the class's bytes.

        The bytes outside ``first`` have an ``EMPTY`` derivative, so they need no class: a
        row's derivatives are taken for the live classes only. Cached per (first, front).
        """
        front = self.arena.front(term)
        key = (first, front)
        hit = self._partitions.get(key)
        if hit is not None:
            return hit
        out: list[tuple[int, object]] = []
        # by lowest byte: the refinement is unique, the order its masks come in is not (equal
        # fronts iterate in the order their sets were built), so rows derive in one order
        for c in sorted(refine_classes(first, front), key=lambda c: c & -c):
            rep = (c & -c).bit_length() - 1
            if c & (c - 1) == 0:
                out.append((rep, rep))
                continue
            bits = self._masks.get(c)
            if bits is None:
                bits = self._masks[c] = _mask_bits(c)
            out.append((rep, bits))
        self._partitions[key] = out
        return out

    def _class_table(self, classes: list[tuple[int, object]]) -> tuple[list[int], np.ndarray]:
        """``(class of each byte (-1: none), row template)`` of a ``_live_classes`` list: the
        template is int32 ``[256]``, ``PENDING`` on the classes' bytes and -1 elsewhere (a
        lazily built row is one copy of it). Cached per list (the lists are cached and kept
        by ``_partitions``, so their ids stay theirs).
        """
        hit = self._class_of.get(id(classes))
        if hit is not None:
            return hit
        table = np.full(256, -1, np.int32)
        for k, (_, where) in enumerate(classes):
            table[where] = k
        template = np.where(table >= 0, np.int32(PENDING), np.int32(-1)).astype(np.int32)
        hit = self._class_of[id(classes)] = (table.tolist(), template)
        return hit

    def _build_row(self, state: int, lazy: bool = False) -> None:
        """Build the row of ``state``; ``lazy``: live classes left ``PENDING`` (a literal's
        one class and terms with intersection or complement are derived at once).
        """
        if self._num_rows >= self.max_states:
            raise GrammarTooComplexError(
                f"automaton exceeds {self.max_states} states (rows built); simplify the "
                "pattern or reduce bounded repetitions"
            )
        term = self._terms[state]
        arena = self.arena
        first = arena.first[term]
        slot = self._new_row_slot()
        row = self._rows[slot]
        c = terms._c
        boolean = arena.has_boolean(term)
        if c is not None and (boolean or not lazy or first & (first - 1) == 0):
            # the whole row in C (csrc/regex_derive.h fill_row: the same derivatives, in the
            # same order, as below); a lazy row with several classes stays PENDING below. A
            # term without intersection or complement has none in its derivatives either,
            # so each non-EMPTY one is live; with them (``boolean``: the row whole, as
            # below) fill_row asks ``is_empty`` of each derivative, in the same order
            c.fill_row(
                arena, arena._cctx or arena._context(), term, row, self._ids, self._state_of,
                boolean,
            )  # fmt: skip
            if boolean:  # ``first`` over-approximates: count the live bytes
                self._num_out[state] = int((row >= 0).sum())
            self._num_rows += 1
            self._slot[state] = slot
            return
        if first & (first - 1) == 0 and first and self._literal_row(state, term, first, slot):
            return
        if first & (first - 1) == 0:  # at most one byte can start it (a literal)
            classes = [(first.bit_length() - 1, first.bit_length() - 1)] if first else []
        else:
            classes = self._live_classes(term, first)
        if lazy and len(classes) > 1 and not boolean:
            class_of, template = self._class_table(classes)
            row[:] = template  # PENDING on the live classes' bytes, dead elsewhere
            # before the slot is published
            self._pending[state] = [classes, class_of, bytearray(len(classes)), len(classes)]
            self._num_rows += 1
            self._slot[state] = slot
            return
        row[:] = -1  # dead; a slot left by a build that raised is reused
        for b, where in classes:
            d = arena.derivative(term, b)
            if d != EMPTY and not arena.is_empty(d):
                row[where] = self._state_of(d)
        if boolean:  # ``first`` over-approximates: count the live bytes
            self._num_out[state] = int((row >= 0).sum())
        self._num_rows += 1
        self._slot[state] = slot

    def _literal_row(self, state: int, term: int, first: int, slot: int) -> bool:
        """Build the row of ``state`` in row slot ``slot`` when its term is one byte ``b``
        (``first`` is ``1 << b``) or ``CONCAT(b, tail)``: the derivative by ``b`` is ``EPS``
        or ``tail`` itself (what ``TermArena.derivative`` gives, without its calls and walk
        of the spine). False (nothing written) for any other term (a repetition or
        alternation that only ``b`` can start): the general build. Property names and other
        literals of a schema build one such row per byte.
        """
        arena = self.arena
        kind = arena.kind
        k = kind[term]
        if k == BYTES:
            d = EPS
        elif k == CONCAT and kind[arena.args[term][0]] == BYTES:
            d = arena.args[term][1]  # the head is one byte: not nullable, first == first(h)
        else:
            return False
        b = first.bit_length() - 1
        row = self._rows[slot]
        row[:] = -1  # a slot left by a build that raised is reused
        if not arena.is_empty(d):  # the tail of a term with intersection or complement
            row[b] = self._state_of(d)
        elif arena.has_boolean(term):
            self._num_out[state] = 0
        self._num_rows += 1
        self._slot[state] = slot
        return True

    def _pending_entry(self, state: int) -> list | None:
        """The ``_pending`` entry of ``state`` (under the lock), None when its row has no
        ``PENDING`` class. An entry None (a row the C token-trie walk built or derived a class
        of, ``csrc/dfa_rows.h``) is rebuilt from the row: a class is derived when its
        representative byte's entry is not ``PENDING`` (a class is written whole).
        """
        entry = self._pending.get(state)
        if entry is None and state in self._pending:
            term = self._terms[state]
            classes = self._live_classes(term, self.arena.first[term])
            class_of, _ = self._class_table(classes)
            row = self._rows[self._slot[state]]
            derived = bytearray(int(row[b]) != PENDING for b, _ in classes)
            entry = self._pending[state] = [classes, class_of, derived, derived.count(0)]
        return entry

    def _derive_class(self, state: int, byte: int) -> None:
        """Derive the ``PENDING`` class of ``byte`` in the row of ``state`` (under the lock)."""
        entry = self._pending_entry(state)
        if entry is None:
            return
        classes, class_of, derived, _ = entry
        k = class_of[byte]
        if k < 0 or derived[k]:
            return
        b, where = classes[k]
        d = self.arena.derivative(self._terms[state], b)
        nxt = -1 if d == EMPTY or self.arena.is_empty(d) else self._state_of(d)
        self._rows[self._slot[state]][where] = nxt
        derived[k] = 1
        entry[3] -= 1
        if not entry[3]:
            del self._pending[state]

    def _derive_all(self, state: int) -> None:
        """Derive every ``PENDING`` class of the row of ``state`` (under the lock)."""
        entry = self._pending_entry(state)
        if entry is None:
            return
        for k, (b, _) in enumerate(entry[0]):
            if not entry[2][k]:
                self._derive_class(state, b)

    def row(self, state: int) -> np.ndarray:
        """int32 ``[256]``: next state per byte (-1 = dead), built on first use (whole:
        never ``PENDING``).

        Raises:
            GrammarTooComplexError: building it exceeded a budget.
        """
        if self._slot[state] < 0 or state in self._pending:
            with self._lock:
                if self._slot[state] < 0:
                    self._build_row(state)
                self._derive_all(state)
        row = self._rows[self._slot[state]]
        row.flags.writeable = False
        return row

    def has_whole_row(self, state: int) -> bool:
        """True when the row of ``state`` is built with no ``PENDING`` entry (``row`` would
        build nothing). Raises: never.
        """
        return self._slot[state] >= 0 and state not in self._pending

    def ensure_rows(self, states: np.ndarray) -> None:
        """Build the rows of every state in ``states`` (int ``[n]``) that lacks one."""
        missing = states[self._slot[states] < 0]
        pending = self._pending
        if pending:
            missing = np.unique(states)
            missing = missing[[s in pending or self._slot[s] < 0 for s in missing.tolist()]]
        if missing.size == 0:
            return
        with self._lock:
            for s in np.unique(missing).tolist():
                if self._slot[s] < 0:
                    self._build_row(s)
                self._derive_all(s)

    def row_tables(self, state: int = -1, byte: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """The transition tables as they are now, after building the row of ``state``
        first when ``state >= 0`` (its live classes ``PENDING``), and deriving the class of
        ``byte`` in it when ``byte >= 0`` (the token-trie walk's callback,
        ``csrc/tokentrie.c``).

        Returns:
            rows: int32 ``[row slots, 256]``, next state per byte (-1 = dead, ``PENDING``
                = not derived yet: call again with the byte).
            slot: int64 ``[capacity >= num_states]``, row slot of each state, -1 = not built.
            Both read-only views of the live tables: they show rows built later until a
            growth replaces a table (then they keep the contents they had; call again).

        Raises:
            GrammarTooComplexError: building the row exceeded a budget.
        """
        if state >= 0 and (self._slot[state] < 0 or byte >= 0):
            with self._lock:
                if self._slot[state] < 0:
                    self._build_row(state, lazy=True)
                if byte >= 0:
                    self._derive_class(state, byte)
        tables = self._tables  # read-only views, remade when a table is replaced (growth)
        if tables is None or tables[0].base is not self._rows or tables[1].base is not self._slot:
            rows, slot = self._rows.view(), self._slot.view()
            rows.flags.writeable = False
            slot.flags.writeable = False
            tables = self._tables = (rows, slot)
        return tables

    def rows_buildable_in_c(self) -> bool:
        """True when the C token-trie walk may build this automaton's rows over its own
        tables (``walk_direct``, ``csrc/dfa_rows.h``: the same rows, state ids and order as
        ``row_tables(state, byte)``): the C derivatives are in use (``terms.use_extension``).
        The row of a state whose term holds an intersection or complement is built whole
        there too, the emptiness of each derivative asked of ``TermArena.is_empty``.
        Raises: never.
        """
        return terms._c is not None

    def row_tables_whole(self, state: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """``row_tables`` with the row of ``state`` built whole (no ``PENDING`` entry in
        it): for a C walk built before ``PENDING`` existed (``trie.py`` picks it).

        Raises:
            GrammarTooComplexError: building the row exceeded a budget.
        """
        if state >= 0:
            self.row(state)
        return self.row_tables()

    def gather(self, states: np.ndarray, data: np.ndarray) -> np.ndarray:
        """int32 ``[n]``: the next state of ``states[i]`` on byte ``data[i]`` (-1 = dead),
        building the missing rows in one batch (a level step of the numpy token-trie walk).
        """
        self.ensure_rows(states)
        return self._rows[self._slot[states], data]

    def step(self, state: int, byte: int) -> int:
        """Next state after one byte (-1 = dead), without building the whole row."""
        slot = self._slot[state]
        if slot >= 0:
            nxt = int(self._rows[slot, byte])
            if nxt != PENDING:
                return nxt
            with self._lock:
                self._derive_class(state, byte)
                return int(self._rows[slot, byte])
        key = (state << 8) | byte
        nxt = self._steps.get(key)
        if nxt is not None:
            return nxt
        with self._lock:
            d = self.arena.derivative(self._terms[state], byte)
            nxt = -1 if d == EMPTY or self.arena.is_empty(d) else self._state_of(d)
            self._steps[key] = nxt
            return nxt

    def explore(self, max_rows: int | None = None, deadline: Deadline | None = None) -> bool:
        """Build rows breadth-first from the initial state.

        Args:
            max_rows: stop after this many rows are built in total (None: no limit).
            deadline: the CPU-time budget of this call (None: ``max_seconds`` of its own;
                a compile passes its own budget).

        Returns:
            True when every reachable state has its row (the automaton is complete).

        Raises:
            GrammarTooComplexError: the state or time budget is exceeded.
        """
        if self._complete:
            return True
        if deadline is None:
            deadline = Deadline(self.max_seconds)
        with self._lock:
            i = 0
            while i < self.num_states:
                if i in self._pending:
                    self._derive_all(i)
                if self._slot[i] < 0:
                    if max_rows is not None and self._num_rows >= max_rows:
                        return False
                    self._build_row(i)
                    if deadline.expired():
                        raise deadline.error(
                            f"automaton construction ({self.num_states} states; simplify "
                            "the pattern)"
                        )
                i += 1
            self._complete = True
            return True

    @property
    def is_complete(self) -> bool:
        """True once every reachable state has its row (see ``explore``)."""
        return self._complete

    @property
    def transitions(self) -> np.ndarray | None:
        """int32 ``[num_states, 256]`` read-only: the whole table once the automaton is
        complete, else None (it never explores by itself; call ``explore()`` first, or
        use ``row`` which builds one row on demand).
        """
        if not self._complete:
            return None
        if self._dense is None:
            dense = self._rows[self._slot[: self.num_states]]
            dense.setflags(write=False)
            self._dense = dense  # complete: never changes again
        return self._dense

    # ---- matching ------------------------------------------------------------

    def walk(self, state: int, data: bytes) -> int:
        """State after reading ``data`` from ``state``; -1 if it dies.

        Raises:
            GrammarTooComplexError: only if discovering a new state exceeds a budget.
        """
        for b in data:
            if state < 0:
                return -1
            state = self.step(state, b)
        return state

    def accepts(self, data: bytes) -> bool:
        """Whole-string membership.

        Exact without deciding emptiness: the walk follows the built transitions while
        they reach, then derivatives alone (a term that matches nothing is never
        nullable), so an intersection or complement costs no emptiness search here.
        """
        state = self.initial
        for i, b in enumerate(data):
            slot = self._slot[state]
            nxt = int(self._rows[slot, b]) if slot >= 0 else self._steps.get((state << 8) | b)
            if nxt is None or nxt == PENDING:  # not derived yet: derivatives from here
                return self._accepts_by_derivatives(self._terms[state], data[i:])
            if nxt < 0:
                return False
            state = nxt
        return bool(self._accepting[state])

    def _accepts_by_derivatives(self, term: int, data: bytes) -> bool:
        with self._lock:
            arena = self.arena
            for b in data:
                term = arena.derivative(term, b)
                if term == EMPTY:
                    return False
            return bool(arena.nullable[term])
