"""Structural tags meet a vocabulary: masks exact by brute force, budget closing, jump-forward.

References: each token's bytes walked one at a time through the byte automaton (a scalar
path independent of the token index), and for liveness the plain-Python reading
(``_reference.tag_reference``) of a completion found by a breadth-first search.
"""

from __future__ import annotations

import json
import pickle
import random
import re
from collections import deque

import jsonschema
import numpy as np
import pytest
import torch

from benchmarks.support import allowed_ids, mask_bits
from structgen.fsm import Vocabulary, compile_spec
from structgen.fsm.spec import StructuralTag, TagStructure, spec_of
from tests.fsm.tags._reference import tag_reference

TOKENS = [
    b"<eos>",
    b"<|im_start|>",
    b"<tool_call>",
    b"<tool",
    b"_call>",
    b"</tool_call>",
    b"</",
    b"tool_call>",
    b'{"n":',
    b"{",
    b'"n"',
    b":",
    b"1",
    b"2",
    b"}",
    b"}</tool_call>",
    b" ",
    b"hi",
    b"<",
    b"x",
    b"\n",
    b"",
]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
SPEC = StructuralTag([TagStructure("<tool_call>", "</tool_call>", schema=SCHEMA)])


@pytest.fixture
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=[0, 1])


def _content_ok(text: str) -> bool:
    try:
        return text == text.strip() and jsonschema.Draft202012Validator(SCHEMA).is_valid(
            json.loads(text)
        )
    except json.JSONDecodeError:
        return False


REF = [("<tool_call>", _content_ok, "</tool_call>")]


def _completion(dfa, state: int) -> bytes | None:
    """Shortest printable-ASCII bytes from ``state`` to acceptance (BFS)."""
    seen, todo = {state: b""}, deque([state])
    while todo:
        s = todo.popleft()
        if dfa.is_accepting(s):
            return seen[s]
        for b in range(32, 127):
            t = dfa.step(s, b)
            if t >= 0 and t not in seen:
                seen[t] = seen[s] + bytes([b])
                todo.append(t)
    return None


def test_masks_exact_along_random_walks(vocab: Vocabulary) -> None:
    grammar = compile_spec(SPEC, vocab)
    dfa = grammar.dfa
    rng = random.Random(0)
    buf = torch.zeros(1, 1, dtype=torch.int32)
    inside = outside = 0
    completions: dict[int, bytes] = {}
    for _ in range(8):
        m, prefix = grammar.matcher(), b""
        for _ in range(14):
            m.fill_bitmask(buf, 0)
            got = set(allowed_ids(buf[0], len(TOKENS)))
            expected = {
                t
                for t, data in enumerate(TOKENS)
                if t not in (0, 1) and data and dfa.walk(m.state, data) >= 0
            }
            if dfa.is_accepting(m.state):
                expected.add(0)
            assert got == expected, (prefix, got, expected)
            assert 1 not in got  # the special token: never in free text or in a region
            for t in got - {0}:  # every allowed token leads where the output can still end
                nxt = dfa.walk(m.state, TOKENS[t])
                if nxt not in completions:
                    completions[nxt] = _completion(dfa, nxt)
                done = prefix + TOKENS[t] + completions[nxt]
                assert tag_reference(done.decode(), ["<tool_call>"], REF), done
            if 0 in got:
                assert tag_reference(prefix.decode(), ["<tool_call>"], REF), prefix
                outside += 1
            else:
                inside += 1
            choices = sorted(got - {0})
            if not choices:
                break
            tid = rng.choice(choices)
            assert m.advance(tid)
            prefix += TOKENS[tid]
    assert inside and outside


def test_begin_tag_as_one_token_or_split(vocab: Vocabulary) -> None:
    grammar = compile_spec(SPEC, vocab)
    for ids in (
        [17, 2],
        [17, 3, 4],
        [18, 7],
    ):  # "hi<tool_call>", "hi<tool" "_call>", "<" "tool_call>"
        m = grammar.matcher()
        assert all(m.advance(t) for t in ids), ids
        assert not m.is_accepting()  # inside the region: EOS is not allowed
        assert (
            m.forced_bytes() == b"{"
        )  # jump-forward: the object's brace (then whitespace may come)
        for t in (8, 12, 15):  # '{"n":' '1' '}</tool_call>'
            assert m.advance(t)
        assert m.is_accepting() and not m.is_terminated()  # free text again, or EOS
        assert m.advance(0) and m.is_terminated()


def test_budget_closes_the_region(vocab: Vocabulary) -> None:
    """Random walks under max_tokens: the region the budget finds open is closed in time."""
    grammar = compile_spec(SPEC, vocab)
    buf = torch.zeros(1, 1, dtype=torch.int32)
    rng = random.Random(3)
    opened = 0
    for seed in range(10):
        rng.seed(seed)
        m, out = grammar.matcher(max_tokens=8), b""
        m.advance(2)  # "<tool_call>": a region is open from the first token
        out += TOKENS[2]
        opened += 1
        while not m.is_terminated():
            m.fill_bitmask(buf, 0)
            got = allowed_ids(buf[0], len(TOKENS))
            tid = rng.choice(got)
            assert m.advance(tid)
            if tid == 0:
                break
            out += TOKENS[tid]
        assert m.is_accepting()
        assert m.num_accepted_tokens <= 9
        assert tag_reference(out.decode(), ["<tool_call>"], REF), out
    assert opened == 10


def test_spec_crosses_processes_as_itself() -> None:
    from pydantic import BaseModel

    class Call(BaseModel):
        n: int

    spec = StructuralTag([TagStructure("<a>", "</a>", schema=Call)])
    grammar = compile_spec(spec)
    portable = spec_of(grammar)
    clone = pickle.loads(pickle.dumps(portable))
    assert clone.cache_key() == spec.cache_key()
    assert compile_spec(clone) is grammar  # the same cache entry
    assert re.fullmatch(r"\(.*\)", str(clone.cache_key()), re.S)


@pytest.mark.slow
def test_masks_exact_on_smollm2_states(smollm2_tokenizer, smollm2_vocab) -> None:
    """SmolLM2's whole vocabulary on a few sampled states, free text and inside a region."""
    vocab = smollm2_vocab
    grammar = compile_spec(SPEC, vocab)
    dfa = grammar.dfa
    never = vocab.special_token_ids | vocab.eos_token_ids
    text = 'Let me call it. <tool_call>{"n": 12}</tool_call> done'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    m = grammar.matcher()
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    picks = {0, len(ids) // 3, len(ids) // 2, len(ids) - 1}
    for k, tid in enumerate(ids):
        if k in picks:
            m.fill_bitmask(buf, 0)
            mask = mask_bits(buf[0], vocab.vocab_size)
            ref = np.zeros(vocab.vocab_size, bool)
            for t, data in enumerate(vocab.token_bytes):
                if t not in never and data and dfa.walk(m.state, data) >= 0:
                    ref[t] = True
            for eos in vocab.eos_token_ids:
                ref[eos] = dfa.is_accepting(m.state)
            assert (mask == ref).all(), (k, np.flatnonzero(mask != ref)[:10])
            assert not mask[sorted(vocab.special_token_ids - vocab.eos_token_ids)].any()
        assert m.advance(tid), (text, k)
    assert m.is_accepting()


@pytest.mark.slow
def test_smollm2_special_tokens_named_exactly(smollm2_tokenizer, smollm2_vocab) -> None:
    """On SmolLM2's vocabulary a grammar's ``<|im_start|>`` allows exactly its id, and a
    structural tag whose begin is a special token's text allows that token in free text
    and no other special token."""
    from structgen.fsm import compile_grammar

    vocab = smollm2_vocab
    special = vocab.special_token_texts
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)

    def mask_of(m) -> np.ndarray:
        m.fill_bitmask(buf, 0)
        return mask_bits(buf[0], vocab.vocab_size)

    m = compile_grammar('root ::= "Hi " <|im_start|> "x"', vocab).matcher()
    for tid in smollm2_tokenizer.encode("Hi ", add_special_tokens=False):
        assert m.advance(tid)
    assert np.flatnonzero(mask_of(m)).tolist() == [special["<|im_start|>"]]
    spec = StructuralTag([TagStructure("<filename>", "</f>", regex="[a-z]+")])
    mask = mask_of(spec.compile(vocab).matcher())
    others = sorted(vocab.special_token_ids - vocab.eos_token_ids - {special["<filename>"]})
    assert mask[special["<filename>"]] and not mask[others].any()
    assert mask[[t for t in vocab.eos_token_ids]].all()  # free text may end
