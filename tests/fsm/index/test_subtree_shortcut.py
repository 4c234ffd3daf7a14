"""The C walk's subtree shortcut (``TokenTrie.subtree_tables``, ``csrc/tokentrie.c``): a live
node whose state loops on every byte below it has its descendants' tokens written without a
DFA step.

References: ``descendant_bytes`` against the bytes of each node's subtree rebuilt from the
preorder layout; masks and next states of the states of the formats schema (the e-mail local
part, its domain labels, a URI's scheme, host and path: the states the shortcut is for) by
brute force over SmolLM2's vocabulary (``ByteDFA.walk`` token by token); every mask along the
five cold instances equal with the shortcut off. A corrupted ``ids`` table changes those
masks (the shortcut is taken there), and inconsistent tables raise ``ValueError``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.index import trie
from tests.fsm.index.test_direct_rows import assert_masks_equal_with_and_without

pytestmark = pytest.mark.skipif(
    not hasattr(trie._EXT, "descendant_bytes"), reason="C walk (descendant_bytes) not built"
)

COLD = json.loads(
    (Path(__file__).resolve().parents[3] / "benchmarks/data/cold_schemas.json").read_text()
)
FORMATS_PREFIXES = [  # (text written into the formats instance, then the state's prefix)
    b'{"email":"',
    b'{"email":"ada',
    b'{"email":"ada.b',
    b'{"email":"ada@',
    b'{"email":"ada@ex',
    b'{"email":"ada@example.',
    b'{"email":"ada@example.org',
    b'{"email":"ada@example.org-x',
]
URI_PREFIXES = [b'"', b'"https', b'"https://', b'"https://exa', b'"https://example.org/ad']


def _walk(dfa, tt, state: int, shortcut: bool, tables=None) -> tuple[np.ndarray, np.ndarray]:
    out = np.full(tt.vocab_size, -1, np.int32)
    mask = np.zeros((tt.vocab_size + 31) // 32, np.int32)
    trie.use_subtree_shortcut(shortcut)
    try:
        if tables is None:
            tt.walk(dfa, state, out, mask)
        else:  # the C walk itself, with the given tables
            stack = np.empty(tt.max_depth + 1, np.int32)
            fn = trie._walk_c(dfa)
            args = [tt.byte, tt.depth, tt.skip, tt.token, stack, out, mask, state]
            args.append(trie._tables(dfa))
            if fn is getattr(trie._EXT, "walk_direct", None):
                args.append(dfa)
            fn(*args, tables)
    finally:
        trie.use_subtree_shortcut(True)
    return out, mask


def _brute_force(vocab: Vocabulary, dfa, state: int) -> np.ndarray:
    """The state after each token of the trie (-1: dead), token by token."""
    tt = vocab.token_trie
    out = np.full(tt.vocab_size, -1, np.int32)
    for tid in tt.token[tt.token >= 0].tolist():
        out[tid] = dfa.walk(state, vocab.token_bytes[tid])
    for tid, holder in tt.dups.tolist():
        out[tid] = out[holder]
    return out


def _mask_of(states: np.ndarray, words: int) -> np.ndarray:
    bits = np.zeros(words * 32, np.uint8)
    bits[: states.shape[0]] = states >= 0
    return np.packbits(bits, bitorder="little").view(np.int32)


def test_descendant_bytes_are_the_bytes_below_each_node(smollm2_vocab) -> None:
    tt = smollm2_vocab.token_trie
    below, ranks, ids = tt.subtree_tables
    assert below.shape == (tt.num_nodes, 4) and below.dtype == np.uint64
    bits = np.unpackbits(below.view(np.uint8), bitorder="little").reshape(tt.num_nodes, 256)
    rng = np.random.default_rng(0)
    picks = np.r_[rng.choice(tt.num_nodes, 3000, replace=False), 0, tt.num_nodes - 1]
    for i in picks.tolist():
        j = int(tt.skip[i])
        want = np.zeros(256, np.uint8)
        want[tt.byte[i + 1 : j]] = 1
        assert np.array_equal(bits[i], want), i
        assert ranks[j] - ranks[i + 1] == int((tt.token[i + 1 : j] >= 0).sum())
        assert sorted(ids[ranks[i + 1] : ranks[j]]) == sorted(
            t for t in tt.token[i + 1 : j].tolist() if t >= 0
        )
    assert ranks[-1] == ids.shape[0] == int((tt.token >= 0).sum())


def test_formats_states_by_brute_force(smollm2_vocab) -> None:
    """The formats schema's e-mail and URI states (and a hostname schema's), with the
    shortcut and without, equal ``ByteDFA.walk`` per token over SmolLM2's vocabulary."""
    tt = smollm2_vocab.token_trie
    words = (tt.vocab_size + 31) // 32
    cases = [(COLD["formats"]["schema"], FORMATS_PREFIXES)]
    for fmt in ("uri", "hostname", "email"):
        cases.append(({"type": "string", "format": fmt}, URI_PREFIXES))
    walked = corrupted_differs = 0
    for schema, prefixes in cases:
        clear_cache()
        dfa = compile_json_schema(schema, smollm2_vocab).dfa
        seen = set()
        for p in prefixes:
            s = dfa.walk(dfa.initial, p)
            if s < 0 or s in seen:
                continue
            seen.add(s)
            want = _brute_force(smollm2_vocab, dfa, s)
            for shortcut in (True, False):
                out, mask = _walk(dfa, tt, s, shortcut)
                assert np.array_equal(out, want), (schema, p, shortcut)
                assert np.array_equal(mask, _mask_of(want, words)), (schema, p, shortcut)
            below, ranks, ids = tt.subtree_tables
            bad = (below, ranks, np.ascontiguousarray(ids[::-1]))  # same ids, wrong places
            _, mask = _walk(dfa, tt, s, True, bad)
            corrupted_differs += not np.array_equal(mask, _mask_of(want, words))
            walked += 1
    assert walked >= 12
    assert corrupted_differs >= 8  # the shortcut is taken in most of these states


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COLD))
def test_masks_along_cold_instances_equal_without_shortcut(
    smollm2_tokenizer, smollm2_vocab, name
) -> None:
    assert_masks_equal_with_and_without(
        smollm2_tokenizer, smollm2_vocab, COLD[name], trie.use_subtree_shortcut, name
    )


def test_inconsistent_tables_raise(smollm2_vocab) -> None:
    tt = smollm2_vocab.token_trie
    clear_cache()
    dfa = compile_json_schema({"type": "string", "format": "email"}, smollm2_vocab).dfa
    s = dfa.walk(dfa.initial, b'"ada')
    below, ranks, ids = tt.subtree_tables
    for bad in [
        (below[:-1], ranks, ids),
        (below, ranks[:-1], ids),
        (below, ranks, ids[:10]),  # ranks past ids
        (below, ranks, np.full_like(ids, tt.vocab_size)),  # an id outside the vocabulary
    ]:
        with pytest.raises(ValueError):
            _walk(dfa, tt, s, True, bad)
    with pytest.raises(TypeError):
        _walk(dfa, tt, s, True, (below, ranks))
    with pytest.raises(ValueError):
        trie._EXT.descendant_bytes(tt.byte, tt.depth, np.zeros((3, 4), np.uint64))
    depth = tt.depth.copy()
    depth[0] = 2  # not a preorder layout
    with pytest.raises(ValueError):
        trie._EXT.descendant_bytes(tt.byte, depth, np.zeros((tt.num_nodes, 4), np.uint64))
