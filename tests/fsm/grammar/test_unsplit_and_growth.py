"""Two shortcuts of a grammar automaton's cold masks (``TokenIndex``, ``csrc/tokentrie.c``).

* ``GrammarAutomaton.unsplit``: the configurations ``node_free_key`` found with no lexeme
  ``MIN_HEAD_BYTES`` bytes can start. ``TokenIndex._walk_split`` answers None for them at
  once and the C cold plan does not call it. Reference: ``lexical_key``'s full per-lexeme
  check (every lexeme sent to it) answers None for each of them; states with a key exist
  along the same walks; ``_walk_split`` is never entered for a state in the set.
* The C walk keeps the row tables' buffers while the rows callback answers the same two
  arrays, and takes them again when a table was replaced: with a first row capacity of 2,
  every walk crosses table growths, and the masks along the recursive instance and random
  walks equal the tokens' bytes stepped through an automaton compiled apart.
"""

from __future__ import annotations

import json
import random

import numpy as np
import torch

from structgen.fsm.grammar import automaton
from structgen.fsm.index.token_index import TokenIndex
from tests.fsm.grammar.test_node_free_masks import (
    RECURSIVE,
    _compile,
    _reference_bits,
    _small_vocab,
    _token_data,
)


class _AlwaysWide(dict):
    """A ``GrammarAutomaton._wide`` that sends every lexeme to ``lexical_key``'s full check."""

    def get(self, key, default=None):
        return True


def _token_paths(g, vocab, walks: int, steps: int, seed: int) -> list[list[int]]:
    """The recursive instance forced longest token first, then random walks over the allowed
    tokens (EOS left out)."""
    data = json.dumps(RECURSIVE["instance"], separators=(",", ":")).encode()
    path, done = [], b""
    while done != data:
        rest = data[len(done) :]
        tid = max(
            (t for t, tb in enumerate(vocab.token_bytes) if tb and rest.startswith(tb)),
            key=lambda t: len(vocab.token_bytes[t]),
        )
        path.append(tid)
        done += vocab.token_bytes[tid]
    paths, rng = [path], random.Random(seed)
    never, eos = vocab.index_tables
    for _ in range(walks):
        m, path = g.matcher(), []
        for _ in range(steps):
            allowed = [
                t
                for t in np.flatnonzero(_bits(g, m.state, vocab)).tolist()
                if not never[t] and t not in eos.tolist()
            ]
            if not allowed:
                break
            tid = rng.choice(allowed)
            assert m.advance(tid)
            path.append(tid)
        paths.append(path)
    return paths


def _bits(g, state: int, vocab) -> np.ndarray:
    mask = g.token_index.bitmask(state)
    return np.unpackbits(mask.view(np.uint8), bitorder="little")[: vocab.vocab_size].astype(bool)


def _forced_masks(g, vocab, paths) -> list[tuple[bytes, np.ndarray]]:
    """(bytes read, bitmask row written by ``fill_bitmask``) before every token of ``paths``."""
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    out = []
    for path in paths:
        m, read = g.matcher(), b""
        for tid in path:
            m.fill_bitmask(buf, 0)
            out.append((read, buf[0].numpy().copy()))
            assert m.advance(tid)
            read += vocab.token_bytes[tid]
    return out


def test_unsplit_configurations_have_no_lexical_key(monkeypatch) -> None:
    vocab = _small_vocab()
    paths = _token_paths(_compile(RECURSIVE["schema"], vocab), vocab, walks=8, steps=30, seed=5)
    _ = vocab.token_trie.subtree_tables  # built: the C cold plan takes every first mask
    calls: list[bool] = []  # per _walk_split entered: was its state in unsplit?
    split = TokenIndex._walk_split

    def spy(self, state):
        calls.append(state in self._unsplit)
        return split(self, state)

    monkeypatch.setattr(TokenIndex, "_walk_split", spy)
    g = _compile(RECURSIVE["schema"], vocab)
    masks = _forced_masks(g, vocab, paths)
    dfa, depth = g.dfa, g.token_index._trie.max_depth
    assert dfa.unsplit and len(masks) > 100
    assert calls and not any(calls), "_walk_split entered for a configuration in unsplit"
    ends = vocab.token_ends  # unsplit states whose masks were walked (no node-free key) exist
    assert any(dfa.node_free_key(s, ends) is None for s in dfa.unsplit)
    wide = dfa._wide
    dfa._wide = _AlwaysWide()
    try:
        for state in sorted(dfa.unsplit):
            assert dfa.lexical_key(state, depth) is None, state
        keyed = [s for s in range(dfa.num_states) if dfa.lexical_key(s, depth) is not None]
    finally:
        dfa._wide = wide
    assert keyed, "no configuration with a lexical key: the check above is vacuous"
    assert not set(keyed) & dfa.unsplit


def test_masks_across_row_table_growths_equal_the_reference(monkeypatch) -> None:
    vocab = _small_vocab()
    ref = _compile(RECURSIVE["schema"], vocab)
    paths = _token_paths(ref, vocab, walks=6, steps=30, seed=11)
    monkeypatch.setattr(automaton, "_ROW_CAPACITY", 2)
    g = _compile(RECURSIVE["schema"], vocab)
    assert g.dfa._rows.shape[0] <= 2
    masks = _forced_masks(g, vocab, paths)
    assert g.dfa.num_rows_built > 8 * 2  # the row table was replaced several times
    data = _token_data(vocab)
    for read, row in masks:
        state = ref.dfa.walk(ref.dfa.initial, read)
        assert state >= 0
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: vocab.vocab_size]
        assert (bits.astype(bool) == _reference_bits(ref.dfa, state, vocab, data)).all(), read
