"""A head split's first mask in the C cold mask (``TokenIndex._walk_split``, the cold plan's
last entry, called back by ``csrc/tokentrie.c`` ``cold_mask`` for a concatenation with a wide
head: a string's inside, an e-mail's or URI's parts), its mask stored and written from C.

References: the same compile with the callback withheld (the plan's last entry None: such a
state takes the Python ``fill_form``, main's way): the same bitmasks, states, rows, step memo,
cached masks (order included), forms, lexical cache counts and entries; brute force over
SmolLM2's real vocabulary (``_reference.brute_force_mask``) on the states the callback
answered.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.index import token_index
from structgen.fsm.index.token_index import TokenIndex, pack_bitmask
from structgen.fsm.index.vocabulary import Vocabulary
from tests.fsm._reference import brute_force_mask

pytestmark = pytest.mark.skipif(
    token_index.cold_step is None, reason="the _tokentrie extension has no cold_step"
)

SCHEMAS = ("nested", "anyOf", "flat", "formats")


@pytest.fixture(scope="module")
def prepared_vocab(smollm2_tokenizer) -> Vocabulary:
    """A SmolLM2 vocabulary of its own, prepared (the string heads pinned, the quote's exit
    tables built): the load a server does."""
    return Vocabulary.from_tokenizer(smollm2_tokenizer).prepare()


def _case(name: str, tokenizer) -> tuple[dict, list[int]]:
    from benchmarks.bench_grammar import COLD_SCHEMAS

    case = json.loads(COLD_SCHEMAS.read_text())[name]
    text = json.dumps(case["instance"], separators=(",", ":"))
    return case["schema"], tokenizer.encode(text, add_special_tokens=False)


def _compile(schema, vocab):
    """A fresh compile from empty per-grammar caches (cold_ab's reset)."""
    clear_cache(memos=True)
    vocab.clear_tables()
    vocab.lexical_masks.clear()
    return compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)


def _force(grammar, ids, *, split: bool, monkeypatch):
    """Force ``ids`` (plan on; its split callback withheld unless ``split``), every mask
    filled before its token: ``[(state, bitmask row, made in C by the split callback)]``, the
    index, the lexical cache's (hits, misses) over the run."""
    m = grammar.matcher()
    index = m._index
    assert isinstance(m._cold, tuple) and m._cold[-1] is not None
    answered, fills = [], [0]
    walk_split, fill_form = TokenIndex._walk_split, TokenIndex.fill_form

    def counted_split(self, state):
        mask = walk_split(self, state)
        answered.append(mask is not None)
        return mask

    def counted_fill(self, state):
        fills[0] += 1
        return fill_form(self, state)

    monkeypatch.setattr(TokenIndex, "_walk_split", counted_split)
    monkeypatch.setattr(TokenIndex, "fill_form", counted_fill)
    # the plan's bound method was taken before the patch
    m._cold = m._cold[:-1] + ((index._walk_split if split else None),)
    lex = index.vocab.lexical_masks
    hits, misses = lex.hits, lex.misses
    batch = torch.zeros((1, (index.vocab.vocab_size + 31) // 32), dtype=torch.int32)
    m.fill_bitmask(batch, 0)
    out = []
    for tok in ids:
        before, python = sum(answered), fills[0]
        m.fill_bitmask(batch, 0)
        by_c = sum(answered) > before and fills[0] == python
        out.append((m.state, batch[0].numpy().copy(), by_c))
        assert m.advance(tok)
    monkeypatch.undo()
    return out, index, (lex.hits - hits, lex.misses - misses)


@pytest.mark.parametrize("name", SCHEMAS)
def test_split_callback_equals_the_python_way(smollm2_tokenizer, prepared_vocab, name, monkeypatch):
    """Callback on and off, each on a fresh compile: the same bitmasks and states at every
    token, rows and state numbering, step memo, cached masks and their order, forms, the
    lexical cache's hit and miss counts, parts and exit tables; on nested and formats the
    callback answered in C."""
    schema, ids = _case(name, smollm2_tokenizer)
    lex = prepared_vocab.lexical_masks
    off, index_off, counts_off = _force(
        _compile(schema, prepared_vocab), ids, split=False, monkeypatch=monkeypatch
    )
    parts_off = [
        (k, type(v), np.asarray(getattr(v, "mask", v)).tobytes())
        for k, v in lex._parts._data.items()
    ]
    exits_off = list(lex._exits._data)
    on, index_on, counts_on = _force(
        _compile(schema, prepared_vocab), ids, split=True, monkeypatch=monkeypatch
    )
    parts_on = [
        (k, type(v), np.asarray(getattr(v, "mask", v)).tobytes())
        for k, v in lex._parts._data.items()
    ]
    assert parts_off == parts_on
    assert exits_off == list(lex._exits._data)
    assert [s for s, _, _ in off] == [s for s, _, _ in on]
    for (s, a, _), (_, b, _) in zip(off, on):
        assert np.array_equal(a, b), (name, s)
    assert not any(c for _, _, c in off)
    dfa_off, dfa_on = index_off.dfa, index_on.dfa
    assert dfa_off._terms == dfa_on._terms
    built = dfa_off._slot >= 0
    assert np.array_equal(dfa_off._slot, dfa_on._slot)
    assert np.array_equal(dfa_off._rows[dfa_off._slot[built]], dfa_on._rows[dfa_on._slot[built]])
    assert index_off.steps == index_on.steps
    assert list(index_off._masks) == list(index_on._masks)
    for state in index_off._masks:
        assert np.array_equal(index_off._masks.peek(state), index_on._masks.peek(state))
    assert set(index_off.fill_forms) == set(index_on.fill_forms)
    assert counts_off == counts_on
    if name in ("nested", "formats"):
        assert any(c for _, _, c in on), name


@pytest.mark.parametrize("name", ("nested", "formats"))
def test_split_masks_equal_brute_force_smollm2(
    smollm2_tokenizer, prepared_vocab, name, monkeypatch
):
    """The bitmask of each state the callback answered (up to six per schema, the first
    included) against brute force over SmolLM2's vocabulary."""
    schema, ids = _case(name, smollm2_tokenizer)
    vocab = prepared_vocab
    grammar = _compile(schema, vocab)
    run, _, _ = _force(grammar, ids, split=True, monkeypatch=monkeypatch)
    by_split = [k for k, (_, _, c) in enumerate(run) if c]
    assert by_split, name
    picks = sorted({by_split[0], *random.Random(name).sample(by_split, min(5, len(by_split)))})
    words = (vocab.vocab_size + 31) // 32
    for k in picks:
        prefix = b"".join(vocab.token_bytes[t] for t in ids[:k])
        want = pack_bitmask(brute_force_mask(grammar, vocab, prefix), words)
        assert np.array_equal(run[k][1], want), (name, k)
