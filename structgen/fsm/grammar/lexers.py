r"""The terminals' lexers of one grammar as one shared lazy ``ByteDFA``.

A ``ByteDFA``'s states are the terms of its ``TermArena`` (derivatives of the pattern by
the bytes read). A grammar's terminals are lowered into one arena (``compile._lexers``),
so the terms one terminal reaches are often another's too: in llama.cpp's ``json.gbnf``
every punctuation, string, number and literal terminal ends with the optional blank run
``ws ::= | " " | "\n" [ \t]{0,20}``, and after its ``\n`` each is at the same counted
term ``[ \t]{0,20}`` and its 20 successors. With one automaton per terminal each of them
built those 21 rows again (233 lexer rows for 79 terms forcing 600 tokens of JSON); with
one automaton for all terminals a term has one state and one row, and the grammar
automaton's C tables (``csrc/cfgrows.c``), keyed by (shared automaton, lexer state), read
each lexer row and its byte classes once.

``TerminalLexer`` is one terminal's view: the shared automaton read from the terminal's own
start state (``initial``); its other states are the shared automaton's.
"""

from __future__ import annotations

import numpy as np

from ..regex.lazy_dfa import ByteDFA
from ..regex.terms import TermArena

__all__ = ["TerminalLexer", "SharedLexers"]

# the shared automaton's first table size: a fresh request builds few lexer rows (the
# grammar automaton reads a literal's next state off its term, ``csrc/cfgrows.c``), so the
# ByteDFA's default 64 rows (64 KiB filled at every compile) are mostly never used
_CAPACITY = 16


class TerminalLexer:
    """The lexer of one terminal: a ``ByteDFA`` shared with the grammar's other terminals,
    started at this terminal's term. Offers what ``GrammarAutomaton`` and ``completion``
    read of a lexer (``initial``, ``arena``, ``row``, ``is_accepting``, ``term``,
    ``num_states``, ``num_rows_built``), with the shared automaton's state ids.

    Args:
        dfa: the shared automaton (its arena holds ``root``).
        root: the terminal's term (not ``EMPTY``).

    Attributes:
        dfa: the shared automaton.
        arena: its ``TermArena``.
        initial: the state of ``root``.

    Raises:
        ValueError: ``root`` is ``EMPTY``.
    """

    __slots__ = ("dfa", "arena", "initial")

    def __init__(self, dfa: ByteDFA, root: int) -> None:
        self.dfa = dfa
        self.arena = dfa.arena
        self.initial = dfa.state_of_term(root)

    @classmethod
    def at_state(cls, dfa: ByteDFA, state: int) -> TerminalLexer:
        """The lexer started at ``dfa``'s discovered ``state`` (``TerminalLexer(dfa,
        dfa.term(state))``, without looking the term up again). Raises: never.
        """
        lexer = cls.__new__(cls)
        lexer.dfa = dfa
        lexer.arena = dfa.arena
        lexer.initial = state
        return lexer

    @property
    def num_states(self) -> int:
        """States of the shared automaton discovered so far."""
        return self.dfa.num_states

    @property
    def num_rows_built(self) -> int:
        """Rows of the shared automaton built so far (every terminal's)."""
        return self.dfa.num_rows_built

    def has_row(self, state: int) -> bool:
        """True when the row of ``state`` is built. Raises: never for a discovered state."""
        return bool(self.dfa._slot[state] >= 0)

    def row(self, state: int) -> np.ndarray:
        """int32 ``[256]``: next state per byte (-1 = dead), as ``ByteDFA.row``.

        Raises:
            GrammarTooComplexError: the shared automaton's budget is exceeded.
        """
        return self.dfa.row(state)

    def is_accepting(self, state: int) -> bool:
        """True when ``state`` accepts. Raises: never."""
        return self.dfa.is_accepting(state)

    def term(self, state: int) -> int:
        """The arena term of ``state``."""
        return self.dfa.term(state)


class SharedLexers:
    """Makes the ``TerminalLexer`` of each terminal of one grammar on one ``ByteDFA``,
    built with the first terminal's term and the budgets given (the state budget is the
    shared automaton's: every terminal's rows count).

    Args:
        max_states: the shared automaton's budget of rows built.
        max_seconds: its CPU-seconds budget per exploration call.
    """

    def __init__(self, max_states: int, max_seconds: float) -> None:
        self.max_states = max_states
        self.max_seconds = max_seconds
        self.dfa: ByteDFA | None = None

    def __call__(self, arena: TermArena, root: int) -> TerminalLexer:
        """The lexer of the terminal whose term is ``root`` in ``arena`` (the arena of
        every call).

        Raises:
            ValueError: ``root`` is ``EMPTY``, or ``arena`` is not the first call's.
        """
        return TerminalLexer(self._automaton(arena, root), root)

    def _automaton(self, arena: TermArena, root: int) -> ByteDFA:
        """The shared automaton, made with ``root`` on the first call."""
        if self.dfa is None:
            self.dfa = ByteDFA(
                arena,
                root,
                max_states=self.max_states,
                max_seconds=self.max_seconds,
                capacity=_CAPACITY,
            )
        elif self.dfa.arena is not arena:
            raise ValueError("SharedLexers: every terminal must be lowered into one arena")
        return self.dfa

    def lexers(self, arena: TermArena, roots: list[int]) -> list[TerminalLexer]:
        """``[self(arena, root) for root in roots]``: the same automaton (made with
        ``roots[0]`` when it is the first), the same states in the same order, added
        under one hold of its lock (``ByteDFA.states_of_terms``).

        Raises:
            ValueError: a root is ``EMPTY``, or ``arena`` is not the first call's.
        """
        if not roots:
            return []
        dfa = self._automaton(arena, roots[0])
        at = TerminalLexer.at_state
        return [at(dfa, state) for state in dfa.states_of_terms(roots)]
