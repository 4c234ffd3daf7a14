"""Lexer + Earley parser as one lazily built deterministic automaton over bytes.

A *configuration* is the set of lexemes in progress: ``(terminal, node, lexer state)``
triples, where ``node`` is the Earley chart node (``earley.py``) at which the lexeme
started and ``lexer state`` a state of that terminal's lexer (the regex layer's lazy
``ByteDFA``, one for all the terminals of a grammar: ``lexers.TerminalLexer``), plus
whether the bytes so far are a complete parse. Reading a byte steps every lexeme's DFA;
a lexeme whose DFA accepts may end there (the parser scans it: ``EarleyCharts.scan``,
which for an ``%ignore`` lexeme is the node itself), and every node reached that way
starts the lexemes it expects. Ending a lexeme and going on with it are both kept, so the
automaton reads the language exactly (every split of the text into lexemes is tried;
Lark's ``lexer="dynamic_complete"``).

Configurations are interned, so the result is a deterministic automaton whose states are
configurations, built row by row on demand. It offers the ``ByteDFA`` interface the
token layer uses (``row``, ``row_tables``, ``gather``, ``step``, ``walk``, ``accepts``,
``is_accepting``), so ``index.TokenIndex`` computes masks with the C token-trie walk
(calling back into Python only for rows not built yet), masks are cached per
configuration, and ``fsm.matcher.Matcher`` (rollback, fork, validate, budget-aware
closing, forced bytes) works unchanged. A row costs one parser step per byte class
(bytes on which every lexeme's DFA moves alike), memoised on the lexemes the class moves
(rows whose configurations differ only in lexemes dead on a class share its step).

With the C extension built (``csrc/cfgrows.c``, ``native=True``: the default when it is), the
configurations, lexemes, byte classes and step memo are C tables and a row is built there;
a lexer state's row and the flags of the states it leads to are built there too, over the
terminal's ``ByteDFA`` tables (``Core.set_lexers``, ``use_c_lexer_rows``), and the lexemes a
node starts read from the charts' lists (``Core.set_starts``). Python is called back (``_c_*``)
only where those decline: a lexer state's row (with the flags of the state a literal row
leads to) where the lexer's row budget is reached, the flags of a state whose term holds an
intersection or complement, the chart node after a lexeme ends over Python charts, a node
the lists lack (``_c_node``). The token-trie walk's
``row_tables`` callback is ``Core.row_tables``, which builds a missing row without the
interpreter (Python entered only to grow the tables or raise the row budget:
``_row_tables_py``). The matcher's cold step walks a token through ``Core.walk``: a
configuration without a row takes the step of the byte's class alone (the step the row
would hold for that byte, the same memo), so the configurations inside a token get no
row. The Python path below is the
reference and the fallback; both give the same automaton up to the numbering of its
configurations (``tests/fsm/grammar/test_native_rows.py``).

A configuration inside one lexeme splits its token mask as a regex state does
(``index.lexical_masks``): ``lexical_key`` keys the lexeme's lexer state with the bytes that
can start what follows the lexeme, so the tokens that stay inside it come from the
vocabulary's shared cache (entries any grammar or request stored, regex or not) and only
the tokens holding an exit byte are walked through this automaton.

Dead configurations do not exist: every chart item is a viable prefix (all kept
productions are productive) and every lexer state can still accept, so a configuration
with no lexeme in progress that is not accepting is the dead state (-1).
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import ConfigError, GrammarTooComplexError
from ..index.lexical_masks import MIN_HEAD_BYTES, split_key
from ..regex.lazy_dfa import ByteDFA, rows_holding
from ..regex.terms import BYTES, CONCAT, EPS
from .earley import EarleyCharts

try:  # optional C extension built by setup.py (csrc/cfgrows.c)
    from . import _cfgrows as _EXT
except ImportError:  # pragma: no cover - exercised when the extension is missing
    _EXT = None

__all__ = ["GrammarAutomaton", "DEFAULT_MAX_CONFIGS", "HAVE_C_ROWS", "use_c_lexer_rows"]

HAVE_C_ROWS = _EXT is not None  # the C row builder is built

DEFAULT_MAX_CONFIGS = 200_000  # rows built (1 KiB each)

# Initial capacities of the row and configuration tables. The rows start unfilled
# (``np.empty``: a row is written whole before its slot is published, and pages never
# written are never committed), so a roomy start costs a small grammar nothing, while a
# 64-row start made a recursive schema's cold request grow the table twice (64 -> 128 ->
# 256), each growth a fill and a copy and, natively, a round trip through
# ``_row_tables_py``. The configuration arrays hold ``_ROW_CAPACITY`` states: the C
# builder wants room for 256 new configurations past the last before each row.
_ROW_CAPACITY = 1024

# whether the C core builds the lexer rows itself (``use_c_lexer_rows``)
_C_LEXER_ROWS = [True]


def use_c_lexer_rows(on: bool) -> bool:
    """Turn the C lexer rows on or off for automata made from now on (tests, A/B): on, the C
    core (``csrc/cfgrows.c``, ``Core.set_lexers``) builds a lexer state's row, and reads the
    flags of the states it leads to, over the terminal's ``ByteDFA`` tables
    (``csrc/dfa_rows.h``) instead of calling ``_c_lexer_row`` / ``_c_lexer_flags``: the same
    rows, states and state numbering. Returns the previous setting. Raises: never.
    """
    was = _C_LEXER_ROWS[0]
    _C_LEXER_ROWS[0] = bool(on)
    return was


def _c_lexer_dfas(lexers: list, group: list[int]) -> list[ByteDFA | None]:
    """Per lexer group (``group[t]`` of terminal ``t``), the ``ByteDFA`` whose rows the C core
    may build (a plain ``ByteDFA``, shared or a terminal's own, with the C derivatives in
    use: ``ByteDFA.rows_buildable_in_c``), else None (``_c_lexer_row`` answers).
    """
    out: list[ByteDFA | None] = [None] * (max(group, default=-1) + 1)
    for t, lexer in enumerate(lexers):
        dfa = getattr(lexer, "dfa", lexer)
        if type(dfa) is ByteDFA and dfa.rows_buildable_in_c():
            out[group[t]] = dfa
    return out


class GrammarAutomaton:
    """Configurations of a grammar's lexer and parser as a lazy ``ByteDFA`` look-alike.

    Args:
        charts: the Earley chart nodes.
        lexers: one ``ByteDFA`` per terminal id.
        ignore: terminal ids that are ``%ignore`` lexemes.
        max_states: budget of rows built (``GrammarTooComplexError`` past it).
        lead_in: a ``ByteDFA`` of the text read before the grammar starts (free text up
            to a trigger, or a literal prefix; its end leads to the root node), or None.
        native: build rows in C (``csrc/cfgrows.c``); None: when the extension is built.

    Attributes:
        initial: the start state (0).

    Raises:
        ConfigError: ``native=True`` without the C extension built.
    """

    def __init__(
        self,
        charts: EarleyCharts,
        lexers: list[ByteDFA],
        ignore: list[int],
        max_states: int = DEFAULT_MAX_CONFIGS,
        lead_in: ByteDFA | None = None,
        native: bool | None = None,
    ) -> None:
        if native and _EXT is None:
            raise ConfigError(
                "GrammarAutomaton(native=True): the C extension _cfgrows is not built"
            )
        self._core = _EXT.Core() if (HAVE_C_ROWS if native is None else native) else None
        self.charts = charts
        self.lexers = lexers if lead_in is None else [*lexers, lead_in]
        self._trigger = -1 if lead_in is None else len(lexers)
        # terminals whose lexers are one shared automaton (``lexers.TerminalLexer``) share
        # its states: their rows, byte classes and liveness are keyed by (group, state)
        groups: dict[int, int] = {}
        self._group = [
            groups.setdefault(id(getattr(d, "dfa", d)), len(groups)) for d in self.lexers
        ]
        if self._core is not None:
            self._core.set_groups(self._group)
            if _C_LEXER_ROWS[0]:  # each group's lexer rows built in C over its ByteDFA
                self._core.set_lexers(_c_lexer_dfas(self.lexers, self._group))
        self._completions = None
        self._live: dict[tuple[int, int], bool] = {}
        # (group, lexer state) -> at least MIN_HEAD_BYTES bytes can start it (lexical_key)
        self._wide: dict[tuple[int, int], bool] = {}
        self._classes: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, list[int]]] = {}
        self._joint: dict[tuple, tuple[np.ndarray, np.ndarray, list[list[tuple[int, int]]]]] = {}
        self._moves: dict[tuple[int, int, int], tuple[int, bool]] = {}  # see _move
        self._steps: dict[tuple[tuple[int, int, int], ...], int] = {}  # see _step
        self.ignore = frozenset(ignore)
        self.max_states = max_states
        self.initial = 0
        self._lock = threading.RLock()
        # lexemes each node starts: (terminal, node, initial lexer state), when it can move
        self._starts: dict[int, tuple[tuple[int, int, int], ...]] = {}
        # a lexer that cannot move from its start never starts a lexeme (``_live_after``:
        # read from its first bytes, no row built)
        self._movable = [self._live_after(t, d.initial) for t, d in enumerate(self.lexers)]
        # (terminal, initial lexer state) of the lexers that can move, in terminal order, and
        # of the ``%ignore`` ones (every node starts those): what ``_starts_of`` reads
        self._initials = [d.initial for d in self.lexers]
        self._ignored = [t for t in sorted(self.ignore) if self._movable[t]]
        self._configs: list[tuple[tuple[int, int, int], ...]] = []
        self._ids: dict[tuple, int] = {}
        cap = _ROW_CAPACITY
        self._rows = np.empty((max(1, min(cap, max_states)), 256), np.int32)
        self._slot = np.full(cap, -1, np.int64)
        self._accepting = np.zeros(cap, bool)
        self._num_rows = 0
        self._tables: tuple[np.ndarray, np.ndarray] | None = None
        self._follow: dict[int, int] = {}  # node -> first bytes of the lexemes it starts
        self._digests: dict[int, dict[int, bytes]] = {}  # id(arena) -> head_key memo
        # (terminal, lexer state) -> no token ends that lexeme before its last byte
        self._ends_inside: dict[tuple[int, int], bool] = {}
        # lexemes' (terminal, lexer state) tuple -> (node-free, some lexeme is wide): what
        # node_free_key reads per configuration, shared across chart nodes
        self._shapes: dict[tuple[tuple[int, int], ...], tuple[bool, bool]] = {}
        # configurations node_free_key found with no wide lexeme: lexical_key is None for
        # them (``TokenIndex._walk_split`` and the C cold plan skip asking it)
        self.unsplit: set[int] = set()
        self._tails: dict[int, dict[int, tuple[bytes, bool]]] = {}  # id(arena) -> _fixed_tail memo
        self._tail_answers: dict[tuple[bytes, bool], bool] = {}  # the TokenEnds answers
        if lead_in is None:
            self._config_of(self._starts_of(charts.root), charts.final[charts.root])
        else:
            self._config_of(((self._trigger, charts.root, lead_in.initial),), False)
        if self._core is not None:
            if charts.native:  # lexeme ends by a C call to the C charts' scan (``_c_end``'s)
                own_end = bytes(
                    t in self.ignore or t == self._trigger for t in range(len(self.lexers))
                )
                self._core.set_charts(charts._core, own_end)
            # the lexemes a node starts read from the charts' lists in C (``_c_node``'s answer
            # without a Python frame per node)
            self._core.set_starts(
                charts.expected, charts.final, bytes(self._movable), self._initials, self._ignored
            )
            # the token-trie walk's callback in C: a missing row built there under the lock,
            # the interpreter entered only to grow the tables (``_row_tables_py``)
            self._core.attach(self)
            self.row_tables = self._core.row_tables

    # ---- views ---------------------------------------------------------------------

    @property
    def num_states(self) -> int:
        """Configurations discovered so far."""
        if self._core is not None:
            return self._core.num_configs
        return len(self._configs)

    @property
    def native(self) -> bool:
        """True when rows are built in C (``csrc/cfgrows.c``)."""
        return self._core is not None

    @property
    def num_rows_built(self) -> int:
        """Configurations whose row is built."""
        return self._num_rows

    @property
    def accepting(self) -> np.ndarray:
        """Bool ``[num_states]``: which configurations are complete parses."""
        view = self._accepting[: self.num_states]
        view.flags.writeable = False
        return view

    is_complete = False  # the automaton of a recursive grammar is infinite
    transitions = None

    def is_accepting(self, state: int) -> bool:
        """True when the bytes read to ``state`` are a complete parse. Raises: never."""
        return bool(self._accepting[state])

    @property
    def trigger_id(self) -> int:
        """The lexer id of the lead-in text (trigger or prefix; -1 without one)."""
        return self._trigger

    def shortest_completion(self, state: int) -> bytes | None:
        """Bytes that take ``state`` to acceptance (``completion.Completions``: from the
        shortest derivation of each nonterminal); None for the dead state.

        Raises:
            GrammarTooComplexError: a budget is exceeded while scanning.
        """
        with self._lock:
            if self._completions is None:
                from .completion import Completions

                self._completions = Completions(self)
            return self._completions.from_state(state)

    def lexemes(self, state: int) -> tuple[tuple[int, int, int], ...]:
        """The ``(terminal, node, lexer state)`` lexemes in progress, sorted.

        Raises:
            IndexError: no configuration ``state``.
        """
        if self._core is not None:
            return self._core.config(state)
        return self._configs[state]

    def lexical_key(self, state: int, max_depth: int) -> tuple[bytes, int] | None:
        """The key of ``state``'s head part in the vocabulary's ``LexicalMaskCache`` (what
        ``TokenIndex.lexical_key`` asks): the ``lexical_masks.split_key`` of one lexeme's
        lexer state, with ``after`` = the first bytes of the lexemes started where that
        lexeme ends, when every other lexeme of the configuration starts with an exit byte
        of that key (typically the lexemes started at its end, in their initial states: a
        token with no exit byte cannot move them); None when no lexeme qualifies.

        Args:
            state: a configuration id.
            max_depth: the vocabulary's longest token, in bytes.

        Raises:
            GrammarTooComplexError: the Earley item budget is exceeded (scanning a lexeme).
        """
        lexemes = self.lexemes(state)
        group, wide = self._group, self._wide
        for t, _, s in lexemes:  # most configurations have no lexeme split_key would take
            hit = wide.get((group[t], s))
            if hit is None:
                with self._lock:
                    hit = wide[(group[t], s)] = self._first(t, s).bit_count() >= MIN_HEAD_BYTES
            if hit:
                break
        else:
            return None
        with self._lock:  # the lexers' shared arena and the charts are used under it
            firsts = [self._first(t, s) for t, _, s in lexemes]
            for i, (t, node, s) in enumerate(lexemes):
                if firsts[i].bit_count() < MIN_HEAD_BYTES:
                    continue  # no head split_key would take
                key = self._lexeme_key(t, node, s, max_depth)
                if key is not None and all(not f & ~key[1] for j, f in enumerate(firsts) if j != i):
                    return key
        return None

    def node_free_key(self, state: int, ends) -> tuple | None:
        """A key under which ``state``'s token mask is that of every configuration with the
        same key, whatever their chart nodes: ``(accepting, ((terminal, lexer state),
        ...))``, the lexemes less their nodes in the configuration's order (two
        configurations of the same lexer states may have different keys: less sharing,
        never a wrong one); None when ``state`` has no lexeme or one fails the test.

        A configuration's mask depends on its lexemes' chart nodes only through the tokens
        that end a lexeme before their last byte (what follows the end is the node's); a
        token that stays inside a lexeme, or ends it at its last byte, is allowed iff its
        bytes are live in that lexeme's lexer (every lexer state can still accept and every
        chart node after a lexeme is viable: the module docstring). So when no allowable
        token can end any of the lexemes before its last byte and none accepts already
        (``_ends_inside_never``, memoised per lexeme, read in order until one fails), the
        mask is the union of the lexemes' lexer-live tokens, plus EOS when accepting: a
        function of the key. ``TokenIndex`` shares one such configuration's mask with the
        others (a recursive schema's objects at every depth). Both tests are memoised per
        tuple of lexer states (``_shape_of``). ``state`` is also added to ``unsplit`` when
        fewer than ``MIN_HEAD_BYTES`` bytes can start each of its lexemes (``lexical_key``
        is None for it).

        Args:
            state: a configuration id.
            ends: the vocabulary's ``index.token_ends.TokenEnds``.

        Raises:
            IndexError: no configuration ``state``.
        """
        lexemes = self.lexemes(state)
        if not lexemes:
            return None
        shape = tuple([(t, s) for t, _, s in lexemes])
        hit = self._shapes.get(shape)
        if hit is None:
            with self._lock:  # the lexers' shared arena is read under it
                hit = self._shapes[shape] = self._shape_of(shape, ends)
        if not hit[1]:
            self.unsplit.add(state)
        return (bool(self._accepting[state]), shape) if hit[0] else None

    def _shape_of(self, shape: tuple[tuple[int, int], ...], ends) -> tuple[bool, bool]:
        """``(node-free, wide)`` of a configuration whose lexemes are ``shape`` (under the
        lock): node-free when ``_ends_inside_never`` holds for every lexeme (memoised per
        lexeme in ``_ends_inside``, read in order until one fails); wide when
        ``MIN_HEAD_BYTES`` bytes or more can start one of them (``lexical_key``'s first test:
        not wide, it answers None).
        """
        memo, free = self._ends_inside, True
        for t, s in shape:
            never = memo.get((t, s))
            if never is None:
                never = memo[(t, s)] = self._ends_inside_never(t, s, ends)
            if not never:
                free = False
                break
        group, wide = self._group, self._wide
        for t, s in shape:
            hit = wide.get((group[t], s))
            if hit is None:
                hit = wide[(group[t], s)] = self._first(t, s).bit_count() >= MIN_HEAD_BYTES
            if hit:
                return free, True
        return free, False

    def _ends_inside_never(self, t: int, s: int, ends) -> bool:
        """True when no allowable token can end a lexeme of terminal ``t`` in lexer state
        ``s`` before the token's last byte, nor does the lexeme accept already (under the
        lock). Sufficient, read off the state's term (boolean-free, else False): a term
        whose language is one string ``F`` ends there iff a token starts with ``F`` and goes
        on (``TokenEnds.starts_longer``); any other term's strings all end with its fixed
        suffix ``S`` (``_fixed_tail``), so such a token holds ``S`` before its last byte
        (``TokenEnds.holds_before_end``; no suffix: False). ``%ignore`` lexemes and the
        lead-in: False (their ends keep the node).
        """
        if t in self.ignore or t == self._trigger:
            return False
        lexer = self.lexers[t]
        if lexer.is_accepting(s):
            return False
        arena, term = lexer.arena, lexer.term(s)
        if arena.has_boolean(term):
            return False
        tail = _fixed_tail(arena, term, self._tails.setdefault(id(arena), {}))
        never = self._tail_answers.get(tail)
        if never is None:
            suffix, whole = tail
            if whole:
                never = not ends.starts_longer(suffix)
            else:
                never = bool(suffix) and not ends.holds_before_end(suffix)
            self._tail_answers[tail] = never
        return never

    def _first(self, t: int, s: int) -> int:
        """256-bit mask: bytes on which state ``s`` of terminal ``t``'s lexer may move."""
        lexer = self.lexers[t]
        return lexer.arena.first[lexer.term(s)]

    def _lexeme_key(self, t: int, node: int, s: int, max_depth: int) -> tuple[bytes, int] | None:
        """``split_key`` of lexeme ``(t, node, s)`` alone (under the lock)."""
        end = node if t in self.ignore or t == self._trigger else self.charts.scan(node, t)
        after = self._follow.get(end)
        if after is None:
            after = 0
            for u, _, q in self._starts_of(end):
                after |= self._first(u, q)
            self._follow[end] = after
        lexer = self.lexers[t]
        memo = self._digests.setdefault(id(lexer.arena), {})
        return split_key(lexer.arena, lexer.term(s), max_depth, memo, after)

    # ---- construction ----------------------------------------------------------------

    def _starts_of(self, node: int) -> tuple[tuple[int, int, int], ...]:
        hit = self._starts.get(node)
        if hit is None:
            movable, initials = self._movable, self._initials
            terms = [t for t in self.charts.expected[node] if movable[t]] + self._ignored
            hit = self._starts[node] = tuple([(t, node, initials[t]) for t in terms])
        return hit

    def _config_of(self, lexemes, accepting: bool) -> int:
        if self._core is not None:
            self._reserve_states(1)
            return self._core.intern(lexemes, accepting, self._accepting)
        key = (tuple(sorted(set(lexemes))), accepting)
        sid = self._ids.get(key)
        if sid is not None:
            return sid
        if not key[0] and not accepting:
            return -1
        sid = len(self._configs)
        self._reserve_states(1)
        self._ids[key] = sid
        self._configs.append(key[0])
        self._accepting[sid] = accepting
        return sid

    def _reserve_states(self, extra: int) -> None:
        """Grow ``_slot`` and ``_accepting`` to hold ``extra`` more configurations."""
        need = self.num_states + extra
        if need > self._slot.shape[0]:
            cap = self._slot.shape[0]
            while cap < need:
                cap *= 2
            for name, fill in (("_slot", -1), ("_accepting", False)):
                old = getattr(self, name)
                new = np.full(cap, fill, old.dtype)
                new[: old.shape[0]] = old
                setattr(self, name, new)

    # the C row builder's callbacks (csrc/cfgrows.c), under the lock as _build_row

    def _c_lexer_row(self, t: int, s: int) -> bytes:
        """int32 ``[256]`` next states of state ``s`` of terminal ``t``'s lexer (a literal
        byte's row from its term, ``_literal_row``; else the lexer's own row), then uint8
        ``[256]``: per byte, the ``_c_lexer_flags`` of its next state (a literal row's one
        live byte, ``_target_flags``), 255 elsewhere (dead, or not read here), as bytes.
        """
        lexer = self.lexers[t]
        row = _literal_row(lexer, s)
        if row is not None:  # one live byte: its int32 is the first not all 0xff
            at = (1024 - len(row.lstrip(b"\xff"))) >> 2
            flags = self._target_flags(t, int.from_bytes(row[4 * at : 4 * at + 4], "little"))
            before, after = _FLAG_PARTS[at]
            return b"".join((row, before, bytes((flags,)), after))
        # a derived row's next states are asked of _c_lexer_flags when a step needs them
        return np.ascontiguousarray(lexer.row(s), np.int32).tobytes() + _NO_FLAGS

    def _target_flags(self, t: int, s: int) -> int:
        """``_c_lexer_flags(t, s)`` for a state reached by a lexer row, or 255 when its term
        holds an intersection or complement and its liveness is not known yet (then read
        from its own row: ``_live_after``, left to ``_c_lexer_flags`` when a step needs it).
        """
        live = self._live.get((self._group[t], s))
        if live is None:
            lexer = self.lexers[t]
            if lexer.arena.has_boolean(lexer.term(s)):
                return 255
            live = self._live_after(t, s)
        return int(self.lexers[t].is_accepting(s)) | 2 * int(live)

    def _c_lexer_flags(self, t: int, s: int) -> int:
        """Bit 0: state ``s`` of terminal ``t``'s lexer accepts; bit 1: it can go on."""
        return int(self.lexers[t].is_accepting(s)) | 2 * int(self._live_after(t, s))

    def _c_end(self, t: int, node: int) -> int:
        """The chart node after a lexeme of terminal ``t`` begun at ``node`` ends (the node
        itself for an ``%ignore`` lexeme or the lead-in). Not called over C charts: the C
        core calls their scan itself (``set_charts``).
        """
        return node if t in self.ignore or t == self._trigger else self.charts.scan(node, t)

    def _c_node(self, node: int) -> tuple[tuple[tuple[int, int], ...], bool]:
        """``((terminal, initial lexer state), ...)`` of the lexemes ``node`` starts, and
        whether the parse may end at ``node`` (asked by the C core only for a node the charts'
        lists handed to ``Core.set_starts`` do not hold).
        """
        return tuple([(t, s) for t, _, s in self._starts_of(node)]), self.charts.final[node]

    def _live_after(self, t: int, s: int) -> bool:
        """True when state ``s`` of terminal ``t``'s DFA has a way on (a live byte): read
        from its term's ``first`` (exact without intersection or complement, so no lexer
        row is built for a state the walk may never enter), else from its row. Records
        the state's ``_wide`` flag (``lexical_key``'s) from the same term on the way, so
        the first key of a configuration finds it without the lock.
        """
        key = (self._group[t], s)
        hit = self._live.get(key)
        if hit is None:
            lexer = self.lexers[t]
            term = lexer.term(s)
            first = lexer.arena.first[term]
            # lexical_key's flag of the same state, from the same read (``_first``)
            self._wide[key] = first.bit_count() >= MIN_HEAD_BYTES
            if lexer.arena.has_boolean(term):
                hit = bool((lexer.row(s) >= 0).any())
            else:
                hit = first != 0
            self._live[key] = hit
        return hit

    def _step(self, moved: tuple[tuple[int, int, int], ...]) -> int:
        """The configuration after a byte that moves the lexemes ``moved`` (each
        ``(terminal, node, next lexer state)``; the lexemes that die on it left out).

        Memoised on ``moved``: the result depends on the moved lexemes alone (a dead
        lexeme adds nothing), so configurations that differ only in lexemes dead on a
        byte class (e.g. the counts of a blank run ``{0,n}`` on a non-blank byte, whose lexemes
        started after the count move alike) share one parser step.
        """
        hit = self._steps.get(moved)
        if hit is not None:
            return hit
        out: list[tuple[int, int, int]] = []
        ended: set[int] = set()
        moves = self._moves
        for key in moved:
            hit = moves.get(key)
            if hit is None:
                hit = moves[key] = self._move(*key)
            if hit[0] >= 0:
                ended.add(hit[0])
            if hit[1]:
                out.append(key)
        accepting = False
        final = self.charts.final
        for node in ended:
            out.extend(self._starts_of(node))
            accepting = accepting or final[node]
        sid = self._steps[moved] = self._config_of(out, accepting)
        return sid

    def _move(self, t: int, node: int, s2: int) -> tuple[int, bool]:
        """``(end, live)`` of lexeme ``(t, node)`` moved to lexer state ``s2`` (memoised
        in ``_moves``: configurations sharing a lexeme share its moves): ``end`` the chart
        node after the lexeme ends there (the node itself for an ``%ignore`` lexeme or the
        lead-in) or -1 when ``s2`` does not accept; ``live`` whether it can go on.
        """
        end = -1
        if self.lexers[t].is_accepting(s2):
            end = node if t in self.ignore or t == self._trigger else self.charts.scan(node, t)
        return end, self._live_after(t, s2)

    def _classes_of(self, t: int, s: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """``(live bytes, class of each, next lexer state per class)`` of state ``s`` of
        terminal ``t``'s DFA (memoised: configurations that differ only in their chart
        node share it).
        """
        key = (self._group[t], s)
        hit = self._classes.get(key)
        if hit is None:
            moves = self.lexers[t].row(s)
            cols = np.flatnonzero(moves >= 0)
            reps, inverse = np.unique(moves[cols], return_inverse=True)
            hit = self._classes[key] = (cols, inverse.reshape(-1), reps.tolist())
        return hit

    def _joint_classes_of(
        self, states: tuple[tuple[int, int], ...]
    ) -> tuple[np.ndarray, np.ndarray, list[list[tuple[int, int]]]]:
        """``(live bytes, class of each, (lexeme index, next lexer state) of each lexeme
        that moves, per class)`` of
        the lexer states ``states`` (``(terminal, lexer state)`` per lexeme) read together:
        the classes are the bytes on which every lexeme moves alike (memoised, as
        ``_classes_of``: configurations that differ only in their chart nodes share it).
        """
        hit = self._joint.get(states)
        if hit is None:
            moves = np.stack([self.lexers[t].row(s) for t, s in states])  # [k, 256]
            cols = np.flatnonzero((moves >= 0).any(axis=0))
            if cols.size:
                keys = np.ascontiguousarray(moves[:, cols].T)  # [live bytes, k]
                keys = keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1])))
                _, first, inverse = np.unique(keys.ravel(), return_index=True, return_inverse=True)
                reps = [
                    [(i, s2) for i, s2 in enumerate(m) if s2 >= 0]
                    for m in moves[:, cols[first]].T.tolist()
                ]  # per class: (lexeme index, next lexer state) of the lexemes it moves
                hit = (cols, inverse.reshape(-1), reps)
            else:
                hit = (cols, cols, [])
            self._joint[states] = hit
        return hit

    def _build_row(self, state: int) -> None:
        if self._num_rows >= self.max_states:
            raise GrammarTooComplexError(
                f"the grammar's automaton exceeds {self.max_states} states (rows built); "
                "simplify the grammar or shorten the output"
            )
        core = self._core
        if core is not None:
            slot = self._num_rows
            if slot >= self._rows.shape[0]:
                self._reserve_row()
            if core.num_configs + 256 > self._slot.shape[0]:
                self._reserve_states(256)  # a row finds at most one configuration per byte
            core.build_row(self, state, self._rows, slot, self._accepting)
            self._num_rows = slot + 1
            self._slot[state] = slot
            return
        lexemes = self._configs[state]
        if len(lexemes) == 1:  # inside one lexeme: its DFA state's byte classes, cached
            t, node, s = lexemes[0]
            cols, inverse, reps = self._classes_of(t, s)
            step = self._step
            targets = [step(((t, node, m),)) for m in reps]
        elif lexemes:
            cols, inverse, reps = self._joint_classes_of(tuple((t, s) for t, _, s in lexemes))
            step = self._step
            targets = [
                step(tuple([(lexemes[i][0], lexemes[i][1], s2) for i, s2 in alive]))
                for alive in reps
            ]
        else:
            targets = []
        slot = self._reserve_row()  # written only now: a step that raised leaves no partial row
        row = self._rows[slot]  # written whole (-1 = dead) before the slot is published
        row.fill(-1)
        if len(targets) == 1:
            row[cols] = targets[0]
        elif targets:
            row[cols] = np.array(targets, np.int32)[inverse]
        self._num_rows += 1
        self._slot[state] = slot

    def _reserve_row(self) -> int:
        """The slot of the next row built (``_rows`` grown to hold it)."""
        self._rows = rows_holding(self._rows, self._num_rows)
        return self._num_rows

    # ---- the ByteDFA interface ----------------------------------------------------------

    def union_state(self, a: int, b: int) -> int:
        """The configuration of both ``a``'s and ``b``'s lexemes (accepting when either
        is): where one token takes two paths (``TokenIndex``'s wildcard edges).
        """
        if a == b:
            return a
        with self._lock:
            accepting = bool(self._accepting[a] or self._accepting[b])
            return self._config_of(self.lexemes(a) + self.lexemes(b), accepting)

    def row(self, state: int) -> np.ndarray:
        """int32 ``[256]``: next state per byte (-1 = dead), built on first use.

        Raises:
            GrammarTooComplexError: a budget (rows, Earley items, a lexer's) is exceeded.
        """
        if self._slot[state] < 0:
            self.row_tables(state)  # builds it (in C when native)
        row = self._rows[self._slot[state]]
        row.flags.writeable = False
        return row

    def ensure_rows(self, states: np.ndarray) -> None:
        """Build the row of every state in ``states`` (int ``[n]``) that lacks one."""
        for s in np.unique(states[self._slot[states] < 0]).tolist():
            self.row(s)

    def row_tables(self, state: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """The tables as they are now, after building the row of ``state`` when
        ``state >= 0``: ``(rows int32 [slots, 256], slot int64 [capacity])``, read-only
        views (as ``ByteDFA.row_tables``, the C token-trie walk's callback). Native, the
        instance's ``row_tables`` is ``Core.row_tables`` (``csrc/cfgrows.c``): the same
        answer, the row built without the interpreter when the tables have room.

        Raises:
            GrammarTooComplexError: a budget (rows, Earley items, a lexer's) is exceeded.
        """
        if state >= 0 and self._slot[state] < 0:
            with self._lock:
                if self._slot[state] < 0:
                    self._build_row(state)
        tables = self._tables
        if tables is None or tables[0].base is not self._rows or tables[1].base is not self._slot:
            rows, slot = self._rows.view(), self._slot.view()
            rows.flags.writeable = False
            slot.flags.writeable = False
            tables = self._tables = (rows, slot)
        return tables

    _row_tables_py = row_tables  # the Python path (native: what ``Core.row_tables`` falls back on)

    def gather(self, states: np.ndarray, data: np.ndarray) -> np.ndarray:
        """int32 ``[n]``: next state of ``states[i]`` on byte ``data[i]`` (-1 = dead)."""
        self.ensure_rows(states)
        return self._rows[self._slot[states], data]

    def step(self, state: int, byte: int) -> int:
        """Next state after one byte (-1 = dead)."""
        return int(self.row(state)[byte])

    def walk(self, state: int, data: bytes) -> int:
        """State after reading ``data`` from ``state``; -1 if it dies."""
        for b in data:
            if state < 0:
                return -1
            state = int(self.row(state)[b])
        return state

    def accepts(self, data: bytes) -> bool:
        """Whole-string membership."""
        state = self.walk(self.initial, data)
        return state >= 0 and bool(self._accepting[state])


def _fixed_tail(
    arena, term: int, memo: dict[int, tuple[bytes, bool]], depth: int = 0
) -> tuple[bytes, bool]:
    """``(suffix, whole)``: bytes every string of ``term`` ends with (a fixed suffix read
    off the concatenation spine: single bytes and ``EPS``; possibly shorter than the
    longest), and whether ``term``'s language is exactly that one string. A boolean-free
    term is assumed (the caller's test). ``memo`` (term -> answer, one per arena) holds
    every spine term read, so the lexer states along one terminal read it once; heads
    nested deeper than ``_TAIL_DEPTH`` count as having no fixed suffix. Raises: never.
    """
    kind, args = arena.kind, arena.args
    spine = []
    while term not in memo and kind[term] == CONCAT:
        spine.append(term)
        term = args[term][1]
    hit = memo.get(term)
    if hit is None:
        hit = memo[term] = _fixed_atom(arena, term)
    tail, whole = hit
    for t in reversed(spine):
        if whole:
            head = args[t][0]
            if kind[head] != CONCAT:
                more, whole = _fixed_atom(arena, head)
            elif depth < _TAIL_DEPTH:  # a head kept whole: its own spine (memoised too)
                more, whole = _fixed_tail(arena, head, memo, depth + 1)
            else:
                more, whole = b"", False
            tail = more + tail
        memo[t] = (tail, whole)
    return tail, whole


_TAIL_DEPTH = 16  # nested concatenation heads _fixed_tail reads


def _fixed_atom(arena, term: int) -> tuple[bytes, bool]:
    """``_fixed_tail`` of a term that is no concatenation: ``EPS`` is the empty string, a
    one-byte ``BYTES`` that byte; anything else has no fixed suffix known here.
    """
    kind = arena.kind[term]
    if kind == EPS:
        return b"", True
    if kind == BYTES:
        mask = arena.args[term][0]
        if mask and not mask & (mask - 1):
            return bytes((mask.bit_length() - 1,)), True
    return b"", False


_DEAD_ROW = b"\xff" * 1024  # int32 [256] of -1
# per byte b: the dead row's bytes before and after b's int32 (one join builds a row)
_DEAD_PARTS = tuple((_DEAD_ROW[: 4 * b], _DEAD_ROW[4 * b + 4 :]) for b in range(256))
_NO_FLAGS = b"\xff" * 256  # uint8 [256]: no next state's flags (``_c_lexer_row``)
# per byte b: the flag bytes before and after b's (a literal row's one target)
_FLAG_PARTS = tuple((_NO_FLAGS[:b], _NO_FLAGS[b + 1 :]) for b in range(256))


def _literal_row(lexer, s: int) -> bytes | None:
    """The row of lexer state ``s`` as ``_c_lexer_row`` returns it, when its term is one
    byte ``b`` followed by ``rest`` (``CONCAT(BYTES({b}), rest)``, no intersection or
    complement; ``BYTES({b})`` alone: ``rest`` is ``EPS``): ``b`` leads to the state of
    ``rest`` and every other byte is dead, which is the lexer's own row (the derivative by
    ``b`` is ``concat(EPS, rest) = rest``, by any other byte ``EMPTY``; a boolean-free term
    other than ``EMPTY`` can still accept, so ``rest`` has a state). Built without the
    lexer's row machinery (~17 us a row there, in the cold masks of a grammar's keys and
    punctuation): the state of ``rest`` is interned in the lexer's automaton
    (``state_of_term``: the id its own row gives, states being interned by term); the
    automaton's row of ``s`` stays unbuilt until something asks for it. None for any other
    term. Raises: never.
    """
    arena = lexer.arena
    dfa = getattr(lexer, "dfa", lexer)  # a TerminalLexer's shared automaton, or a ByteDFA
    term = dfa.term(s)  # (TerminalLexer.term's own read)
    kind = arena.kind[term]
    if kind == CONCAT:
        head, rest = arena.args[term]
        if arena.kind[head] != BYTES:
            return None
    elif kind == BYTES:  # the last byte of a literal: what follows is EPS
        head, rest = term, EPS
    else:
        return None
    mask = arena.args[head][0]
    if mask & (mask - 1) or arena.has_boolean(term):
        return None
    before, after = _DEAD_PARTS[mask.bit_length() - 1]
    return b"".join((before, dfa.state_of_term(rest).to_bytes(4, "little"), after))
