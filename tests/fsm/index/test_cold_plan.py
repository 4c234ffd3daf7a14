"""The regex automaton's cold mask and cold step in one C call each (``TokenIndex.cold_plan``,
``csrc/tokentrie.c`` ``cold_mask`` through ``fill_row``'s sixth argument, and ``cold_step``).

References: brute force over SmolLM2's real vocabulary (``_reference.brute_force_mask``: every
token's bytes stepped through an automaton compiled apart) on the states whose first mask the C
path made, along the cold instances of ``benchmarks/data/cold_schemas.json``; the Python path of
the same compile (the plan off: the same bitmasks, states, rows, cached masks and step memo);
``ByteDFA.walk`` for each step. The memo hit (the form written, no walk) and miss (the mask made
and stored in C, no Python ``fill_form``), an evicted form made again, the declines (a state
whose mask splits; the settings that leave ``walk_direct``) and what ``cold_step`` refuses or
declines are checked one by one.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from structgen.fsm import clear_cache, compile_json_schema, compile_regex
from structgen.fsm.index import token_index, trie
from structgen.fsm.index.token_index import TokenIndex, pack_bitmask
from structgen.fsm.index.vocabulary import Vocabulary
from structgen.fsm.regex import terms
from tests.fsm._reference import brute_force_mask

pytestmark = pytest.mark.skipif(
    token_index.cold_step is None, reason="the _tokentrie extension has no cold_step"
)

SCHEMAS = ("nested", "anyOf", "flat", "formats")


def _case(name: str, tokenizer) -> tuple[dict, str, list[int]]:
    from benchmarks.bench_grammar import COLD_SCHEMAS

    case = json.loads(COLD_SCHEMAS.read_text())[name]
    text = json.dumps(case["instance"], separators=(",", ":"))
    return case["schema"], text, tokenizer.encode(text, add_special_tokens=False)


def _compile(schema, vocab):
    """A fresh compile from empty per-grammar caches (cold_ab's reset: a mask that a cache
    kept from an earlier compile would take another way, its rows built in another order)."""
    clear_cache(memos=True)
    vocab.clear_tables()
    vocab.lexical_masks.clear()
    return compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)


class _PythonFills:
    """Counts ``TokenIndex.fill_form`` calls (the Python way of a first mask)."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        original = TokenIndex.fill_form

        def counted(index, state):
            self.calls += 1
            return original(index, state)

        monkeypatch.setattr(TokenIndex, "fill_form", counted)


def _force(grammar, ids, *, cold: bool, fills: _PythonFills | None = None):
    """Force ``ids`` through a matcher (plan on or off), every mask filled before its token;
    ``[(state, bitmask row, filled by C)]`` per position, and the index."""
    m = grammar.matcher()
    if not cold:
        m._cold = None
    index = m._index
    batch = torch.zeros((1, (index.vocab.vocab_size + 31) // 32), dtype=torch.int32)
    m.fill_bitmask(batch, 0)  # the tensor's layout read (the general way), then the C ways
    out = []
    for tok in ids:
        before = fills.calls if fills else 0
        was_cached = m.is_mask_cached()
        m.fill_bitmask(batch, 0)
        by_c = not was_cached and fills is not None and fills.calls == before
        out.append((m.state, batch[0].numpy().copy(), by_c))
        assert m.advance(tok)
    return out, index


def _rows(dfa) -> tuple[bytes, bytes, int]:
    built = dfa._slot[dfa._slot >= 0]
    return dfa._rows[built].tobytes(), dfa._slot.tobytes(), len(dfa._terms)


@pytest.mark.parametrize("name", SCHEMAS)
def test_cold_path_equals_the_python_path(smollm2_tokenizer, smollm2_vocab, name, monkeypatch):
    """Plan on and off, each on a fresh compile: the same bitmasks and states at every token,
    the same rows and state numbering, cached masks and step memo; and the plan took most
    first masks (the whole-walk states) in C."""
    schema, _, ids = _case(name, smollm2_tokenizer)
    fills = _PythonFills(monkeypatch)
    off, index_off = _force(_compile(schema, smollm2_vocab), ids, cold=False)
    on, index_on = _force(_compile(schema, smollm2_vocab), ids, cold=True, fills=fills)
    assert index_on.cold_plan is not None
    assert [s for s, _, _ in off] == [s for s, _, _ in on]
    for (s, a, _), (_, b, _) in zip(off, on):
        assert np.array_equal(a, b), (name, s)
    assert _rows(index_off.dfa) == _rows(index_on.dfa)
    assert index_off.steps == index_on.steps
    assert list(index_off._masks) == list(index_on._masks)
    for state in index_off._masks:
        assert np.array_equal(index_off._masks.peek(state), index_on._masks.peek(state))
    assert set(index_off.fill_forms) == set(index_on.fill_forms)
    assert sum(c for _, _, c in on) >= len({s for s, _, _ in on}) // 3, name


@pytest.mark.parametrize("name", SCHEMAS)
def test_cold_masks_equal_brute_force_smollm2(smollm2_tokenizer, smollm2_vocab, name, monkeypatch):
    """The bitmask of each state whose first mask the C path made (up to six per schema, the
    first of the instance included) against brute force over SmolLM2's vocabulary."""
    schema, _, ids = _case(name, smollm2_tokenizer)
    vocab = smollm2_vocab
    grammar = _compile(schema, vocab)
    fills = _PythonFills(monkeypatch)
    run, _ = _force(grammar, ids, cold=True, fills=fills)
    by_c = [k for k, (_, _, c) in enumerate(run) if c]
    assert by_c, name
    picks = sorted({by_c[0], *random.Random(name).sample(by_c, min(5, len(by_c)))})
    words = (vocab.vocab_size + 31) // 32
    for k in picks:
        prefix = b"".join(vocab.token_bytes[t] for t in ids[:k])
        want = pack_bitmask(brute_force_mask(grammar, vocab, prefix), words)
        assert np.array_equal(run[k][1], want), (name, k)


def test_memo_miss_hit_and_evicted_form(smollm2_tokenizer, smollm2_vocab, monkeypatch):
    """A miss makes the mask in C (no Python ``fill_form``): stored read-only in the mask
    cache, its form beside it, marked used; a hit writes that form again without a walk (the
    entries unchanged); a form evicted with its mask is made again, the same words."""
    schema, _, ids = _case("nested", smollm2_tokenizer)
    grammar = _compile(schema, smollm2_vocab)
    m = grammar.matcher()
    index = m._index
    batch = torch.zeros((2, (index.vocab.vocab_size + 31) // 32), dtype=torch.int32)
    other = grammar.matcher()  # at the initial state, whose mask the first fill makes the
    other.fill_bitmask(batch, 1)  # general way (the layout read: no form), the second fill
    other.fill_bitmask(batch, 1)  # in Python (a cached mask without a form is declined)
    assert other.state in index.fill_forms
    for tok in ids[:3]:
        assert m.advance(tok)
    state = m.state
    assert state not in index.fill_forms

    def no_python(index, state):
        raise AssertionError("the Python fill_form was called")

    monkeypatch.setattr(TokenIndex, "fill_form", no_python)
    m.fill_bitmask(batch, 0)
    mask = index._masks.peek(state)
    assert mask is not None and not mask.flags.writeable and mask.dtype == np.int32
    form = index.fill_forms[state]
    assert form[1] is True
    assert np.array_equal(batch[0].numpy(), mask)
    form[1] = False
    other.fill_bitmask(batch, 0)  # another mask over row 0 (no in-place op on the tensor)
    assert not np.array_equal(batch[0].numpy(), mask)
    num_rows = index.dfa._num_rows
    m.fill_bitmask(batch, 0)  # hit: the stored form, marked used again
    assert index.fill_forms[state] is form and form[1] is True
    assert index._masks.peek(state) is mask and index.dfa._num_rows == num_rows
    assert np.array_equal(batch[0].numpy(), mask)
    monkeypatch.undo()
    # evicted: a one-entry cache holding another state's mask drops this one's form
    index.max_cached_masks = 1
    other.fill_bitmask(batch, 0)
    assert state not in index.fill_forms and state not in index._masks
    monkeypatch.setattr(TokenIndex, "fill_form", no_python)
    m.fill_bitmask(batch, 0)
    assert state in index.fill_forms
    assert np.array_equal(batch[0].numpy(), mask)


def test_declined_states_and_settings_take_the_python_way(
    smollm2_tokenizer, smollm2_vocab, monkeypatch
):
    """A string's inside (its mask split into a shared head part and exits) is made by the C
    path through its split callback (``_walk_split``; no Python ``fill_form``), the same
    words; every state is declined while a setting leaves ``walk_direct`` (the C walk off,
    rows through the callback, Python derivatives): the Python ``fill_form`` makes those
    masks, the same words as with every setting on."""
    schema, text, ids = _case("nested", smollm2_tokenizer)
    vocab = smollm2_vocab
    fills = _PythonFills(monkeypatch)
    ref, _ = _force(_compile(schema, vocab), ids, cold=False)
    run, _ = _force(_compile(schema, vocab), ids, cold=True, fills=fills)
    inside = text.index('":"') + 3  # the first string value's inside
    k = next(
        k for k in range(len(ids)) if len(b"".join(vocab.token_bytes[t] for t in ids[:k])) >= inside
    )
    assert run[k][2] and np.array_equal(run[k][1], ref[k][1])
    for switch in (trie.use_extension, trie.use_direct_rows, terms.use_extension):
        switch(False)
        try:
            before = fills.calls
            again, _ = _force(_compile(schema, vocab), ids[:12], cold=True, fills=fills)
        finally:
            switch(True)
        assert not any(c for _, _, c in again), switch
        assert fills.calls > before
        for (s, a, _), (t, b, _) in zip(ref, again):
            assert s == t and np.array_equal(a, b), switch


def test_cold_step_equals_byte_walk(smollm2_tokenizer, smollm2_vocab) -> None:
    """``cold_step`` along nested: with the state's mask cached, the forced token and 20
    random ones equal ``ByteDFA.walk`` and are memoised as ``token_step`` does; a token the
    mask refuses is -1 (memoised); ids out of range, EOS, special and empty are -1 and never
    memoised; a cached row answers; a state with neither is declined (None, nothing
    memoised)."""
    schema, _, ids = _case("nested", smollm2_tokenizer)
    vocab = smollm2_vocab
    grammar = _compile(schema, vocab)
    index, dfa = grammar.token_index, grammar.token_index.dfa
    plan, step = index.cold_plan, token_index.cold_step
    never = sorted(vocab.special_token_ids | vocab.eos_token_ids)
    never += [i for i, t in enumerate(vocab.token_bytes) if not t][:3]
    rng = random.Random(0)
    batch = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    m = grammar.matcher()
    for pos, tok in enumerate(ids):
        state = m.state
        tokens = [tok, *rng.sample(range(vocab.vocab_size), 20)]
        if pos % 4 == 3:  # nothing cached: declined
            if state not in index._masks and index._rows.peek(state) is None:
                assert step(plan, state, tok) is None and (state, tok) not in index.steps
        if pos % 4 == 1:
            index.next_states(state)  # a cached row
        m.fill_bitmask(batch, 0)
        for t in tokens:
            if t in never:
                continue
            index.steps.pop((state, t), None)
            expected = dfa.walk(state, vocab.token_bytes[t])
            assert step(plan, state, t) == expected == index.steps[(state, t)], (pos, t)
            assert step(plan, state, np.int64(t)) == expected
        for t in [*never, -1, vocab.vocab_size, 1 << 40]:
            assert step(plan, state, t) == -1 and (state, t) not in index.steps
        assert step(plan, state, 3.0) is None
        index.steps.pop((state, tok))
        assert m.advance(tok) and m.state == dfa.walk(state, vocab.token_bytes[tok])
        assert index.steps[(state, tok)] == m.state
    assert m.is_accepting()


def test_no_plan_where_it_does_not_apply(tiny_vocab: Vocabulary) -> None:
    """A grammar automaton has no regex plan (its masks take a grammar plan's way,
    ``test_grammar_way.py``; no ``cold_step``); a regex over a hand-built vocabulary has one,
    and its masks equal the plan-off ones."""
    from structgen.fsm import compile_grammar

    g = compile_grammar('root ::= "a" root | "b"', tiny_vocab, syntax="gbnf")
    plan = g.matcher()._index.cold_plan
    assert plan is None or token_index.is_grammar_plan(plan)
    grammar = compile_regex("(ab|c)+", tiny_vocab)
    plan = grammar.token_index.cold_plan
    assert plan is not None and not token_index.is_grammar_plan(plan)
    masks = []
    for cold in (False, True):
        clear_cache()
        grammar = compile_regex("(ab|c)+", tiny_vocab)
        run, _ = _force(grammar, [4, 6, 2, 3], cold=cold)
        masks.append([(s, a.tobytes()) for s, a, _ in run])
    assert masks[0] == masks[1]


def test_ndarray_bitmask_takes_the_cold_mask(smollm2_tokenizer, smollm2_vocab, monkeypatch):
    """An ``ndarray`` bitmask (the torch-free engine's: ``fill_row`` does not take it) gets a
    state's first mask from ``cold_mask`` (no Python walk for the whole-walk states): the same
    rows and states as the plan off, along nested; ``cold_mask`` returns the cached mask
    itself, and None for a state that has a form already."""
    schema, _, ids = _case("nested", smollm2_tokenizer)
    vocab = smollm2_vocab
    walks = {"n": 0}
    original = TokenIndex._walk

    def counted(index, *args, **kwargs):
        walks["n"] += 1
        return original(index, *args, **kwargs)

    monkeypatch.setattr(TokenIndex, "_walk", counted)
    runs = []
    for cold in (False, True):
        grammar = _compile(schema, vocab)
        m = grammar.matcher()
        if not cold:
            m._cold = None
        bitmask = np.zeros((2, (vocab.vocab_size + 31) // 32), np.int32)
        walks["n"] = 0
        run = []
        for tok in ids:
            m.fill_bitmask(bitmask, 1)
            run.append((m.state, bitmask[1].copy()))
            assert m.advance(tok)
        runs.append((run, walks["n"], m._index))
    (off, walks_off, _), (on, walks_on, index) = runs
    assert [s for s, _ in off] == [s for s, _ in on]
    for (s, a), (_, b) in zip(off, on):
        assert np.array_equal(a, b), s
    assert walks_on < walks_off // 2, (walks_on, walks_off)
    state = on[-1][0]
    assert state in index.fill_forms
    assert token_index.cold_mask(index.cold_plan, index.fill_forms, state) is None
    index._masks.pop(state)
    index.fill_forms.pop(state, None)
    made = token_index.cold_mask(index.cold_plan, index.fill_forms, state)
    assert made is not None and made is index._masks.peek(state) and not made.flags.writeable
    assert np.array_equal(made, on[-1][1])
