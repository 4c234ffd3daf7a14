"""The grammar automaton's parser step memoised on the lexemes a byte class moves
(``GrammarAutomaton._step``) builds the same configurations, in the same order, with the
same rows as the unmemoised step, breadth-first over llama.cpp's context-free grammars
(json.gbnf's ``[ \\t]{0,20}`` counts, whose rows share steps on non-blank bytes, among
them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.automaton import GrammarAutomaton

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"


class _NoMemo(dict):
    """A step memo that never keeps an answer: every step is computed (the reference)."""

    calls = 0

    def get(self, key, default=None):
        self.calls += 1
        return default

    def __setitem__(self, key, value) -> None:
        pass


def _breadth_first(automaton: GrammarAutomaton, rows: int) -> GrammarAutomaton:
    state = 0
    while automaton.num_rows_built < rows and state < automaton.num_states:
        automaton.row(state)
        state += 1
    return automaton


@pytest.mark.parametrize(
    ("name", "rows"), [("arithmetic", 300), ("c", 1200), ("json", 1500), ("json_arr", 1200)]
)
def test_memoised_step_builds_the_unmemoised_automaton(name: str, rows: int) -> None:
    built = compile_grammar((FIXTURES / f"{name}.gbnf").read_text(), syntax="gbnf").dfa
    charts, lexers, ignore = built.charts, built.lexers, sorted(built.ignore)
    reference = GrammarAutomaton(charts, lexers, ignore, native=False)  # the Python step
    reference._steps = _NoMemo()
    reference = _breadth_first(reference, rows)
    memoised = _breadth_first(GrammarAutomaton(charts, lexers, ignore, native=False), rows)
    assert memoised.num_rows_built == reference.num_rows_built
    assert memoised._configs == reference._configs
    np.testing.assert_array_equal(memoised.accepting, reference.accepting)
    for state in range(reference.num_states):
        if reference._slot[state] >= 0:
            np.testing.assert_array_equal(memoised.row(state), reference.row(state))
    assert len(memoised._steps) < reference._steps.calls  # some steps were shared
