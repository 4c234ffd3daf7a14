"""``earley._derivers`` (productive and nullable nonterminals, one worklist pass) against
the textbook fixpoint on random grammars: a nonterminal derives when some production's
every symbol does (a terminal when it is usable)."""

from __future__ import annotations

import random

import pytest

from structgen.fsm.grammar.earley import _derivers, _nullable, _productive
from structgen.fsm.grammar.lower import CfgGrammar


def _fixpoint(cfg: CfgGrammar, num_nt: int, usable) -> list[bool]:
    derives = [False] * num_nt
    changed = True
    while changed:
        changed = False
        for lhs, rhs in zip(cfg.lhs, cfg.rhs, strict=True):
            if not derives[lhs] and all(derives[s] if s >= 0 else usable(s) for s in rhs):
                derives[lhs] = changed = True
    return derives


def _random_grammar(rng: random.Random) -> tuple[CfgGrammar, int, int]:
    num_nt, num_t = rng.randint(1, 8), rng.randint(1, 5)
    cfg = CfgGrammar()
    for _ in range(rng.randint(1, 20)):
        cfg.lhs.append(rng.randrange(num_nt))
        cfg.rhs.append(
            tuple(
                rng.randrange(num_nt) if rng.random() < 0.5 else -1 - rng.randrange(num_t)
                for _ in range(rng.randint(0, 4))
            )
        )
    return cfg, num_nt, num_t


@pytest.mark.parametrize("seed", range(400))
def test_derivers_match_the_fixpoint(seed):
    rng = random.Random(seed)
    cfg, num_nt, num_t = _random_grammar(rng)
    dead = {-1 - t for t in range(num_t) if rng.random() < 0.3}
    nullable_terminals = {t for t in range(num_t) if rng.random() < 0.3}
    assert _productive(cfg, num_nt, dead) == _fixpoint(cfg, num_nt, lambda s: s not in dead)
    nullable = _nullable(cfg, num_nt, nullable_terminals)
    ref = _fixpoint(cfg, num_nt, lambda s: (-1 - s) in nullable_terminals)
    assert [nullable(s) for s in range(num_nt)] == ref
    assert [nullable(-1 - t) for t in range(num_t)] == [
        t in nullable_terminals for t in range(num_t)
    ]
    only = frozenset(-1 - t for t in nullable_terminals)
    assert _derivers(cfg, num_nt, dead, only) == _fixpoint(
        cfg, num_nt, lambda s: s in only and s not in dead
    )
