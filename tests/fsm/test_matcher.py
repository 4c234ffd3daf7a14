"""TokenIndex + Matcher: masks, EOS, validate/rollback/fork/forced_bytes, random walks."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from benchmarks.support import allowed_ids, mask_bits
from structgen.errors import NoVocabularyError
from structgen.fsm import Vocabulary, compile_json_schema, compile_regex
from tests.fsm._contact_cards import contact_card_grammars


def test_mask_and_advance_tiny(tiny_vocab: Vocabulary) -> None:
    # tokens: 0 <eos>, 1 <|im_start|>, 2 a, 3 b, 4 ab, 5 abc, 6 c, 7 ", 8 \xc3, 9 (empty)
    m = compile_regex(r"(ab)+c?", tiny_vocab).matcher()
    mask = torch.zeros(1, 1, dtype=torch.int32)
    m.fill_bitmask(mask, 0)
    assert set(allowed_ids(mask[0], 10)) == {2, 4, 5}
    assert not m.advance(3) and m.num_accepted_tokens == 0  # refused, unchanged
    assert not m.advance(0)  # EOS before acceptance
    assert not m.advance(1) and not m.advance(9) and not m.advance(99) and not m.advance(-1)
    assert m.advance(4) and m.is_accepting() and not m.is_terminated()
    m.fill_bitmask(mask, 0)
    assert set(allowed_ids(mask[0], 10)) == {0, 2, 4, 5, 6}  # EOS now allowed
    assert m.advance(5)  # "abc": accepting, nothing can follow
    assert m.is_accepting() and m.is_terminated()
    m.fill_bitmask(mask, 0)
    assert set(allowed_ids(mask[0], 10)) == {0}  # EOS is the only way on
    assert m.advance(0) and m.is_terminated()
    m.fill_bitmask(mask, 0)
    assert int(mask.abs().sum()) == 0
    assert not m.advance(0) and not m.advance(2)  # sticky
    assert m.num_accepted_tokens == 3


def test_bitmask_layout_lsb_first_and_padding() -> None:
    tokens = [b"<eos>"] + [bytes([ord("a") + i % 3]) * (1 + i // 3) for i in range(39)]
    vocab = Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0])
    m = compile_regex(r"a+", vocab).matcher()
    logits_vocab = 100  # larger than the tokenizer's 40: 4 words, last ones zero
    mask = torch.full((3, (logits_vocab + 31) // 32), -1, dtype=torch.int32)
    m.fill_bitmask(mask, 1)
    expected = {i for i, t in enumerate(tokens) if t and set(t) == {ord("a")}}
    assert set(allowed_ids(mask[1], logits_vocab)) == expected
    word0 = sum(1 << i for i in expected if i < 32)
    assert int(mask[1, 0]) == word0 - (1 << 32 if word0 >= 1 << 31 else 0)  # int32 view
    assert int(mask[1, 2]) == 0 and int(mask[1, 3]) == 0
    assert (mask[0] == -1).all() and (mask[2] == -1).all()  # other rows untouched
    assert 34 in expected and (int(mask[1, 1]) & (1 << 2))  # token 34 -> word 1, bit 2


def test_fill_bitmask_into_strided_and_narrow_views() -> None:
    tokens = [b"<eos>"] + [bytes([ord("a") + i % 3]) * (1 + i // 3) for i in range(39)]
    vocab = Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0])
    m = compile_regex(r"a+", vocab).matcher()
    expected = {i for i, t in enumerate(tokens) if t and set(t) == {ord("a")}}
    base = torch.full((6, 9), -1, dtype=torch.int32)
    view = base[1::2, 2:7]  # rows 1, 3, 5; words 2..6: not contiguous
    m.fill_bitmask(view, 1)
    assert set(allowed_ids(view[1].contiguous(), 5 * 32)) == expected
    untouched = torch.ones_like(base, dtype=torch.bool)
    untouched[3, 2:7] = False
    assert (base[untouched] == -1).all()  # nothing outside the target row's words
    narrow = torch.full((1, 1), -1, dtype=torch.int32)  # fewer words than the vocabulary
    m.fill_bitmask(narrow, 0)
    assert set(allowed_ids(narrow[0], 32)) == {i for i in expected if i < 32}
    assert m.advance(expected.pop()) and m.advance(0)  # EOS taken: all zero from now on
    m.fill_bitmask(view, 2)
    untouched[5, 2:7] = False
    assert int(view[2].abs().sum()) == 0 and (base[untouched] == -1).all()


def test_validate_rollback_fork_reset(tiny_vocab: Vocabulary) -> None:
    m = compile_regex(r"(ab)+c?", tiny_vocab).matcher()
    assert m.validate([4, 2, 3, 6, 0]) == 5
    assert m.validate([4, 3]) == 1 and m.validate([0]) == 0
    assert m.num_accepted_tokens == 0
    for t in (2, 3, 4):
        assert m.advance(t)
    f = m.fork()
    m.rollback(2)
    assert m.num_accepted_tokens == 1 and not m.is_accepting()
    assert f.num_accepted_tokens == 3 and f.is_accepting()  # fork unaffected
    assert m.advance(3) and m.advance(6) and m.advance(0) and m.is_terminated()
    m.rollback(1)  # undo EOS: "ababc" cannot continue, so still terminated (EOS allowed)
    assert m.is_terminated() and m.is_accepting() and m.validate([0]) == 1
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()
    m.rollback(100)
    assert m.num_accepted_tokens == 0
    m.advance(4)
    m.reset()
    assert m.num_accepted_tokens == 0 and not m.is_accepting()


def test_forced_bytes() -> None:
    vocab = Vocabulary([b"<eos>", b"x"], eos_token_ids=[0], special_token_ids=[0])
    m = compile_regex(r'\{"name":"[a-z]+"\}', vocab).matcher()
    assert m.forced_bytes() == b'{"name":"'
    g = compile_regex(r"(abc|abd)e", vocab)
    assert g.matcher().forced_bytes() == b"ab"  # stops where it branches
    assert compile_regex(r"a|ab", vocab).matcher().forced_bytes() == b"a"
    m = compile_regex(r"xy?", vocab).matcher()
    assert m.advance(1) and m.forced_bytes() == b""  # accepting: stop


def test_no_vocab_matcher_raises() -> None:
    with pytest.raises(NoVocabularyError):
        compile_regex("a").matcher()


def test_matcher_stores_max_tokens(tiny_vocab: Vocabulary) -> None:
    assert compile_regex("a", tiny_vocab).matcher(max_tokens=7).max_tokens == 7


def _random_walk(grammar, vocab: Vocabulary, rng: random.Random, max_steps: int = 60) -> bytes:
    """Sample allowed tokens; check the mask invariants at every step."""
    m = grammar.matcher()
    words = (vocab.vocab_size + 31) // 32
    mask = torch.zeros(1, words, dtype=torch.int32)
    out = b""
    for _ in range(max_steps):
        m.fill_bitmask(mask, 0)
        allowed = np.flatnonzero(mask_bits(mask[0], vocab.vocab_size))
        assert allowed.size > 0, out  # never empty before EOS
        eos_ok = bool(set(allowed.tolist()) & vocab.eos_token_ids)
        assert eos_ok == m.is_accepting()
        assert not set(allowed.tolist()) & (vocab.special_token_ids - vocab.eos_token_ids)
        tok = int(rng.choice(allowed.tolist()))
        assert m.advance(tok)
        if tok in vocab.eos_token_ids:
            assert grammar.matches(out) and m.is_terminated()
            return out
        out += vocab.token_bytes[tok]
        state = grammar.dfa.walk(grammar.dfa.initial, out)
        assert state >= 0 and state == m.state  # always a live prefix
    return out


def test_random_walks_hand_built() -> None:
    tokens = [
        b"<eos>",
        b"<s>",
        b"{",
        b"}",
        b'"',
        b"a",
        b"1",
        b",",
        b":",
        b'{"',
        b'a"',
        b"\xc3",
        b"\xa9",
        b"\xc3\xa9",
        b"\\",
        b"n",
        b"-",
        b"0",
        b"12",
        b".5",
        b"e",
        b"true",
        b"t",
        b"[",
        b"]",
        b'":',
        b'"k"',
    ]
    # every printable ASCII byte is a token too, so no live DFA state is unreachable by tokens
    tokens += [bytes([c]) for c in range(32, 127) if bytes([c]) not in tokens]
    vocab = Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0, 1])
    schema = {
        "type": "object",
        "properties": {
            "k": {"type": "string"},
            "a": {"type": "number"},
            "b": {"type": "array", "items": {"type": "boolean"}},
        },
    }
    grammar = compile_json_schema(schema, vocab)
    rng = random.Random(0)
    for _ in range(100):
        _random_walk(grammar, vocab, rng)


@pytest.mark.slow
def test_random_walks_smollm2(smollm2_vocab: Vocabulary) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"enum": ["a", "é", "😀"]}},
        },
        "required": ["name", "age"],
    }
    grammar = compile_json_schema(schema, smollm2_vocab)
    rng = random.Random(3)
    for _ in range(10):
        out = _random_walk(grammar, smollm2_vocab, rng, max_steps=200)
        assert grammar.dfa.walk(grammar.dfa.initial, out) >= 0


@pytest.mark.slow
def test_masks_are_cached_smollm2(smollm2_vocab: Vocabulary, monkeypatch) -> None:
    """A state's mask is built by one vocabulary walk, then served from the cache (the same
    array, no walk). Mask speed itself is measured in benchmarks/bench_grammar.py."""
    grammar = compile_regex(r'\{"text":"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"\}', smollm2_vocab)
    index = grammar.token_index
    first = [index.bitmask(state) for state in range(grammar.dfa.num_states)]

    def no_walk(*args):
        raise AssertionError("a cached mask was built again")

    monkeypatch.setattr(index, "_walk", no_walk)
    for state, mask in enumerate(first):
        assert index.bitmask(state) is mask


def _forced_reference(dfa, state: int) -> bytes:
    """``forced_bytes`` by its rule, walked afresh (no memo): the brute-force reference."""
    from structgen.fsm.index.vocabulary import MARKER_BYTE

    out, seen = bytearray(), set()
    while not dfa.is_accepting(state) and state not in seen:
        live = [b for b in range(256) if dfa.row(state)[b] >= 0]
        if len(live) != 1 or live[0] == MARKER_BYTE:
            break
        seen.add(state)
        out.append(live[0])
        state = int(dfa.row(state)[live[0]])
    return bytes(out)


def _reachable_states(dfa, limit: int) -> list[int]:
    order, todo = [dfa.initial], [dfa.initial]
    seen = {dfa.initial}
    while todo and len(order) < limit:
        for nxt in dfa.row(todo.pop()).tolist():
            if nxt >= 0 and nxt not in seen:
                seen.add(nxt)
                order.append(nxt)
                todo.append(nxt)
    return order


def _at(grammar, state: int):
    m = grammar.matcher()
    m._history = [(state, False)]  # a cursor at ``state``
    return m


def test_forced_bytes_equals_brute_force_on_copy_grammars(smollm2_vocab: Vocabulary):
    """Contact-card copy grammars over SmolLM2's vocabulary: ``forced_bytes`` at every
    reachable state (up to 1500 per grammar, in random orders) equals a brute-force walk
    of its rule; so do the forced bytes along random token walks."""
    rng = random.Random(5)
    checked = nonempty = 0
    for grammar in contact_card_grammars(smollm2_vocab, 3, seed=2):
        dfa = grammar.token_index.dfa
        states = _reachable_states(dfa, 1500)
        expected = {s: _forced_reference(dfa, s) for s in states}
        for _ in range(2):
            rng.shuffle(states)
            for s in states:
                assert _at(grammar, s).forced_bytes() == expected[s], s
        checked += len(states)
        nonempty += sum(1 for s in states if expected[s])
        m = grammar.matcher()
        for _ in range(60):
            assert m.forced_bytes() == _forced_reference(dfa, m.state)
            mask = torch.zeros(1, (smollm2_vocab.vocab_size + 31) // 32, dtype=torch.int32)
            m.fill_bitmask(mask, 0)
            ids = [t for t in allowed_ids(mask[0]) if t not in smollm2_vocab.eos_token_ids]
            if not ids:
                break
            assert m.advance(rng.choice(ids))
    assert checked > 1000 and nonempty > 100


def test_forced_bytes_on_regex_loops(tiny_vocab: Vocabulary) -> None:
    """Forced runs into, through and out of loops: at every state, in random orders,
    ``forced_bytes`` equals a brute-force walk of its rule."""
    rng = random.Random(0)
    for pattern in [r"x(ab)*c", r"abc(d|e)fg", r"(abc)+", r"a(bca)*bcz", r"\"[a-c]{0,3}\"end"]:
        for _ in range(5):
            grammar = compile_regex(pattern, tiny_vocab)
            dfa = grammar.token_index.dfa
            states = _reachable_states(dfa, 200)
            expected = {s: _forced_reference(dfa, s) for s in states}
            rng.shuffle(states)
            for s in states:
                assert _at(grammar, s).forced_bytes() == expected[s], (pattern, s)
