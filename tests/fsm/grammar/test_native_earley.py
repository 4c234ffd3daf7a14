"""The Earley charts in C (``csrc/earley.c``) build the Python reference's nodes.

On random scans of llama.cpp's grammars, the grammars of ``bench_grammar.py --grammars``
and the Lark test grammars, C and Python charts of one grammar must return the same node
for every scan and hold the same nodes (items, waiting lists, final flag, expected
terminals) and item count, with the completion memo unbounded and emptied often; a budget
error must come at the same scan and record nothing. Accept decisions of grammars compiled
on the C charts equal the Python charts' and ``lark``'s on derived sentences and their
mutations.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.errors import GrammarTooComplexError
from structgen.fsm.grammar import compile_grammar, earley, parse_grammar
from structgen.fsm.grammar.compile import clear_cache
from structgen.fsm.grammar.earley import EarleyCharts
from structgen.fsm.grammar.lower import CfgGrammar, lower_grammar
from tests.fsm.grammar._derive import derive, mutate
from tests.fsm.grammar._grammars import LARK_GRAMMARS
from tests.fsm.grammar.test_membership import _lark_accepts

pytestmark = pytest.mark.skipif(
    not earley.HAVE_C_EARLEY, reason="the _earley C extension is not built"
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"
DATA = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "grammars"
SOURCES = {
    **{f"gbnf:{n}": (FIXTURES / f"{n}.gbnf", "gbnf") for n in ("arithmetic", "c", "json")},
    **{f"cfg:{p.name}": (p, p.suffix[1:]) for p in sorted(DATA.glob("*.*"))},
}


def _text(name: str) -> tuple[str, str]:
    if name in LARK_GRAMMARS:
        return LARK_GRAMMARS[name], "lark"
    path, syntax = SOURCES[name]
    return path.read_text(encoding="utf-8"), "lark" if syntax == "lark" else "gbnf"


def _is_context_free(name: str) -> bool:
    """The grammar has Earley charts (a regular one is compiled to a plain DFA)."""
    text, syntax = _text(name)
    return isinstance(lower_grammar(parse_grammar(text, syntax)), CfgGrammar)


CONTEXT_FREE = [n for n in sorted(SOURCES) + sorted(LARK_GRAMMARS) if _is_context_free(n)]


def _pair(name: str) -> tuple[EarleyCharts, EarleyCharts]:
    """Python and C charts of one compiled grammar's productions."""
    text, syntax = _text(name)
    clear_cache()
    charts = compile_grammar(text, syntax=syntax).dfa.charts
    nullable = {t for t in range(len(charts.cfg.terminals)) if charts._nullable(-1 - t)}
    return (
        EarleyCharts(charts.cfg, nullable, native=False),
        EarleyCharts(charts.cfg, nullable, native=True),
    )


def _assert_same_nodes(py: EarleyCharts, c: EarleyCharts) -> None:
    assert c.num_nodes == py.num_nodes
    assert list(c.items) == py.items
    assert list(c.waiting) == py.waiting
    assert c.final == py.final
    assert c.expected == py.expected
    assert c.num_items == py.num_items


def _walk(py: EarleyCharts, c: EarleyCharts, seed: int, max_scans: int) -> int:
    """Random scans from the root on both; every result compared. The scans made."""
    rng = random.Random(seed)
    frontier, scans = [py.root], 0
    assert c.root == py.root
    while frontier and scans < max_scans:
        node = frontier.pop(rng.randrange(len(frontier)))
        for t in py.expected[node]:
            nid = py.scan(node, t)
            assert c.scan(node, t) == nid, (node, t)
            scans += 1
            frontier.append(nid)
    return scans


@pytest.mark.parametrize("bound", [None, 40])  # 40: the completion memo emptied often
@pytest.mark.parametrize("name", CONTEXT_FREE)
def test_c_charts_build_the_python_nodes(name, bound):
    py, c = _pair(name)
    assert not py.native and c.native
    if bound is not None:
        py.max_completed_items = c.max_completed_items = bound
    scans = _walk(py, c, seed=len(name), max_scans=1500)
    assert scans > 0
    _assert_same_nodes(py, c)
    # a second walk over the built nodes (memoised scans) and on from them
    _walk(py, c, seed=len(name) + 1, max_scans=3000)
    _assert_same_nodes(py, c)


def test_budget_error_at_the_same_scan_records_nothing():
    py, c = _pair("gbnf:c")
    _walk(py, c, seed=3, max_scans=200)
    budget = py.max_items
    py.max_items = py.num_items
    c.max_items = c.num_items  # the next new node raises, in both
    rng = random.Random(5)
    failed = None
    for _ in range(2000):
        node = rng.randrange(py.num_nodes)
        for t in py.expected[node]:
            try:
                nid = py.scan(node, t)
            except GrammarTooComplexError as exc:
                with pytest.raises(GrammarTooComplexError) as raised:
                    c.scan(node, t)
                assert str(raised.value) == str(exc)
                failed = (node, t)
                break
            assert c.scan(node, t) == nid
        if failed:
            break
    assert failed is not None, "no scan needed a new node"
    assert c.num_nodes == py.num_nodes
    py.max_items = c.max_items = budget
    assert c.scan(*failed) == py.scan(*failed)  # built now, the same node
    _walk(py, c, seed=6, max_scans=800)
    _assert_same_nodes(py, c)


def test_bad_node_or_terminal_raises_index_error():
    _, c = _pair("gbnf:arithmetic")
    with pytest.raises(IndexError):
        c.scan(c.num_nodes, 0)
    with pytest.raises(IndexError):
        c.scan(0, len(c.cfg.terminals))
    with pytest.raises(IndexError):
        c.items[-1]


def _compiled(text: str, native: bool, monkeypatch):
    clear_cache()
    with monkeypatch.context() as m:
        m.setattr(earley, "HAVE_C_EARLEY", native)  # EarleyCharts' default
        grammar = compile_grammar(text, syntax="lark")
    clear_cache()
    assert grammar.dfa.charts.native == native
    return grammar


@pytest.mark.parametrize("name", sorted(LARK_GRAMMARS))
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(data=st.data())
def test_accept_decisions_match_python_and_lark(name, data, monkeypatch):
    text = LARK_GRAMMARS[name]
    on_c, on_py = _compiled(text, True, monkeypatch), _compiled(text, False, monkeypatch)
    sentence = derive(parse_grammar(text, "lark"), data)
    mutated = mutate(sentence, data)
    for s in (sentence, mutated):
        ok = _lark_accepts(name, s)
        assert on_c.matches(s) == on_py.matches(s) == ok, s
