"""The C walk's first level read from ``TokenTrie.first_nodes`` (``csrc/tokentrie.c``): the
first-level node of each byte, a node whose byte is dead in the start state's row skipped
without reading the node arrays.

References: ``first_nodes`` against a scan of the preorder layout; along the nested, anyOf
and formats cold instances (fresh automata, rows built by the walks themselves) every walk
with the table equals the walk without it (the same next states, mask, visited count, rows
and states built), and the first states of each equal ``ByteDFA.walk`` token by token. A
table that drops a live byte changes the mask (the table is read); inconsistent tables
raise ``ValueError``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.index import trie

pytestmark = pytest.mark.skipif(
    not hasattr(trie._EXT, "walk_direct"), reason="C walk (walk_direct) not built"
)

COLD = json.loads(
    (Path(__file__).resolve().parents[3] / "benchmarks/data/cold_schemas.json").read_text()
)


def _walk(dfa, tt, state: int, firsts) -> tuple[int, np.ndarray, np.ndarray]:
    """(visited, next states, mask) of the C walk from ``state`` with the subtree tables and
    ``firsts`` (None: the first level read from the node arrays)."""
    out = np.full(tt.vocab_size, -1, np.int32)
    mask = np.zeros((tt.vocab_size + 31) // 32, np.int32)
    stack = np.empty(tt.max_depth + 1, np.int32)
    args = [tt.byte, tt.depth, tt.skip, tt.token, stack, out, mask, state, trie._tables(dfa)]
    args += [dfa, tt.subtree_tables]
    if firsts is not None:
        args.append(firsts)
    visited = trie._EXT.walk_direct(*args)
    return visited, out, mask


def test_first_nodes_are_the_first_level(smollm2_vocab) -> None:
    tt = smollm2_vocab.token_trie
    want = np.full(256, -1, np.int32)
    for i in range(tt.num_nodes):
        if tt.depth[i] == 1:
            assert want[tt.byte[i]] == -1
            want[tt.byte[i]] = i
    assert np.array_equal(tt.first_nodes, want)
    assert (want >= 0).sum() > 200


@pytest.mark.parametrize("name", ["nested", "anyOf", "formats"])
def test_walks_along_a_cold_instance_equal_without_the_table(
    smollm2_tokenizer, smollm2_vocab, name
) -> None:
    tt = smollm2_vocab.token_trie
    text = json.dumps(COLD[name]["instance"], separators=(",", ":")).encode()
    ids = smollm2_tokenizer.encode(text.decode(), add_special_tokens=False)
    runs = []
    for firsts in (None, tt.first_nodes):
        clear_cache()
        dfa = compile_json_schema(COLD[name]["schema"], smollm2_vocab).dfa
        state, run = dfa.initial, []
        for tid in ids:
            visited, out, mask = _walk(dfa, tt, state, firsts)
            run.append((state, visited, out, mask, dfa.num_rows_built, dfa.num_states))
            state = int(out[tid])
            assert state >= 0
        runs.append((dfa, run))
    (_, plain), (dfa, read) = runs
    assert len(plain) == len(read) == len(ids)
    for a, b in zip(plain, read):
        assert a[0] == b[0] and a[1] == b[1] and a[4:] == b[4:], (name, a[0])
        assert np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3]), (name, a[0])
    for state, _, out, _, _, _ in read[:3]:  # brute force: each token through the automaton
        for tid in tt.token[tt.token >= 0].tolist():
            assert out[tid] == dfa.walk(state, smollm2_vocab.token_bytes[tid]), (state, tid)


def test_a_table_without_a_live_byte_changes_the_mask(smollm2_vocab) -> None:
    tt = smollm2_vocab.token_trie
    clear_cache()
    dfa = compile_json_schema(COLD["flat"]["schema"], smollm2_vocab).dfa
    _, _, mask = _walk(dfa, tt, dfa.initial, tt.first_nodes)
    firsts = tt.first_nodes.copy()
    firsts[ord("{")] = -1
    _, _, dropped = _walk(dfa, tt, dfa.initial, firsts)
    assert mask.any() and not dropped.any()


def test_inconsistent_tables_raise(smollm2_vocab) -> None:
    tt = smollm2_vocab.token_trie
    clear_cache()
    dfa = compile_json_schema(COLD["flat"]["schema"], smollm2_vocab).dfa
    deeper = tt.first_nodes.copy()
    deeper[ord("{")] = int(np.flatnonzero(tt.depth == 2)[0])  # not a first-level node
    outside = tt.first_nodes.copy()
    outside[ord("{")] = tt.num_nodes
    for bad in (deeper, outside, tt.first_nodes[:-1]):
        with pytest.raises(ValueError):
            _walk(dfa, tt, dfa.initial, np.ascontiguousarray(bad))
