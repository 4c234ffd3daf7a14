"""``earley._derivers``' worklist in C (``csrc/earley.c`` ``derivers``) against its Python loop
and the textbook fixpoint (``test_derivers._fixpoint``): random grammars with dead and
``only`` terminal sets, and the grammars of the fixtures; bad tables raise."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.earley import HAVE_C_EARLEY, _derivers, use_c_derivers
from structgen.fsm.grammar.lower import CfgGrammar
from tests.fsm.grammar.test_derivers import _fixpoint, _random_grammar

pytestmark = pytest.mark.skipif(not HAVE_C_EARLEY, reason="the _earley C extension is not built")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"


def _both(cfg, num_nt, dead=frozenset(), only=None) -> list[bool]:
    """The C answer, checked equal to the Python loop's."""
    was = use_c_derivers(False)
    try:
        py = _derivers(cfg, num_nt, dead, only)
    finally:
        use_c_derivers(True)
    c = _derivers(cfg, num_nt, dead, only)
    use_c_derivers(was)
    assert c == py
    return c


@pytest.mark.parametrize("seed", range(300))
def test_c_derivers_equal_python_and_the_fixpoint(seed) -> None:
    rng = random.Random(1000 + seed)
    cfg, num_nt, num_t = _random_grammar(rng)
    dead = {-1 - t for t in range(num_t) if rng.random() < 0.3}
    only_t = {-1 - t for t in range(num_t) if rng.random() < 0.5}
    for d, only in ((frozenset(), None), (dead, None), (frozenset(), frozenset()),
                    (dead, frozenset(only_t)), (frozenset(), frozenset(only_t))):  # fmt: skip
        got = _both(cfg, num_nt, d, only)
        assert got == _fixpoint(
            cfg, num_nt, lambda s, d=d, o=only: s not in d and (o is None or s in o)
        )


@pytest.mark.parametrize("name", ["json", "c", "arithmetic", "list", "chess"])
def test_c_derivers_on_fixture_grammars(name) -> None:
    path = FIXTURES / f"{name}.gbnf"
    if not path.exists():
        pytest.skip(f"no fixture {name}.gbnf")
    dfa = compile_grammar(path.read_text(), syntax="gbnf").dfa
    charts = getattr(dfa, "charts", None)
    if charts is None:
        pytest.skip("a regular grammar: no charts")
    cfg = charts.cfg
    num_nt, num_t = len(cfg.names), len(cfg.terminals)
    assert any(_both(cfg, num_nt))
    rng = random.Random(7)
    for _ in range(20):
        dead = frozenset(-1 - t for t in range(num_t) if rng.random() < 0.2)
        only = frozenset(-1 - t for t in range(num_t) if rng.random() < 0.6)
        _both(cfg, num_nt, dead, None)
        _both(cfg, num_nt, frozenset(), only)


def test_c_derivers_reject_bad_tables() -> None:
    from structgen.fsm.grammar.earley import _EXT

    cfg = CfgGrammar()
    cfg.lhs.extend([0, 1])
    cfg.rhs.extend([(1, -1), ()])
    assert _EXT.derivers(cfg.rhs, cfg.lhs, 2, frozenset(), None) == [True, True]
    with pytest.raises(ValueError, match="past the nonterminals"):
        _EXT.derivers([(2,), ()], [0, 1], 2, frozenset(), None)
    with pytest.raises(ValueError, match="lhs"):
        _EXT.derivers([(), ()], [0, 5], 2, frozenset(), None)
    with pytest.raises(ValueError, match="differ in length"):
        _EXT.derivers([()], [0, 1], 2, frozenset(), None)
    with pytest.raises(TypeError):
        _EXT.derivers([()], [0], 1, frozenset())
