"""Token masks of grammar matchers are exact, by brute force.

For states sampled along random token walks that follow the mask:

* the packed mask of ``Matcher.fill_bitmask`` equals, token by token, "the token's bytes
  walked one byte at a time through the automaton stay alive" (a scalar path, independent
  of the C token-trie walk and the mask cache), and EOS is allowed exactly where the
  output so far is accepted by the reference;
* each allowed token can still be completed: the automaton's shortest completion
  (``completion.py``, what the token budget uses) is accepted by ``lark`` after it.

A small hand-built vocabulary (every test) and SmolLM2's real vocabulary (slow).
"""

from __future__ import annotations

import functools
import random

import lark
import numpy as np
import pytest
import torch

from structgen.fsm import Vocabulary
from structgen.fsm.grammar import compile_grammar
from tests.fsm.grammar._grammars import (
    ARITHMETIC,
    BALANCED,
    NESTED_LISTS,
    RIGHT_RECURSIVE,
    STATEMENTS,
)

SMALL_TOKENS = [
    b"<eos>",
    b"1",
    b"2",
    b"12",
    b"+",
    b"-",
    b"*",
    b"(",
    b")",
    b" ",
    b"  ",
    b"(1",
    b"1)",
    b"+(",
    b")*",
    b"((",
    b"))",
    b"[",
    b"]",
    b"[[",
    b"]]",
    b"{",
    b"}",
    b"{}",
    b"()",
    b",",
    b"ab",
    b"a",
    b'"',
    b'"a"',
    b"x",
    b"=",
    b";",
    b"if",
    b"if(",
    b"else",
    b" {",
    b"} ",
    b"--",
    b"----",
    b"- -",
    b"!",
    b"~",
    b"!!",
    b"+-",
    b"-(",
]


@functools.cache
def _lark(text: str) -> lark.Lark:
    return lark.Lark(text, parser="earley", lexer="dynamic_complete")


def _accepts(text: str, data: bytes) -> bool:
    try:
        _lark(text).parse(data.decode("utf-8"))
    except (lark.exceptions.LarkError, UnicodeDecodeError):
        return False
    return True


def _mask_bits(matcher, vocab_size: int) -> np.ndarray:
    bitmask = torch.zeros(1, (vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(bitmask, 0)
    words = bitmask[0].numpy().view(np.uint32)
    ids = np.arange(vocab_size)
    return ((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)


def _check_state(grammar, text, matcher, prefix: bytes, vocab, checked: int, rng) -> None:
    """Check one state's mask; ``text`` is the Lark reference grammar."""
    dfa = grammar.dfa
    state = matcher.state
    allowed = _mask_bits(matcher, vocab.vocab_size)
    for tid, data in enumerate(vocab.token_bytes):
        if tid in vocab.eos_token_ids:
            assert allowed[tid] == _accepts(text, prefix), (prefix, "EOS")
            continue
        if tid in vocab.special_token_ids or not data:
            assert not allowed[tid]
            continue
        s = state
        for b in data:  # scalar, one byte at a time
            s = dfa.step(s, b)
            if s < 0:
                break
        assert allowed[tid] == (s >= 0), (prefix, data)
    live = np.flatnonzero(allowed).tolist()
    for tid in rng.sample(live, min(checked, len(live))):
        if tid in vocab.eos_token_ids:
            continue
        data = vocab.token_bytes[tid]
        tail = dfa.shortest_completion(dfa.walk(state, data))
        assert tail is not None, (prefix, data)
        assert _accepts(text, prefix + data + tail), prefix + data + tail


def _walk_and_check(
    text, vocab, *, walks: int, steps: int, checked: int, seed: int, syntax="lark", reference=None
) -> None:
    """Random mask-following walks over ``text`` (read as ``syntax``), each state checked
    against ``reference`` (the Lark text of the same language; default ``text``)."""
    grammar = compile_grammar(text, vocab, syntax=syntax)
    text = text if reference is None else reference
    rng = random.Random(seed)
    for _ in range(walks):
        matcher = grammar.matcher()
        prefix = b""
        for _ in range(steps):
            _check_state(grammar, text, matcher, prefix, vocab, checked, rng)
            allowed = np.flatnonzero(_mask_bits(matcher, vocab.vocab_size)).tolist()
            allowed = [t for t in allowed if t not in vocab.eos_token_ids]
            if not allowed:
                break
            tid = rng.choice(allowed)
            assert matcher.advance(tid)
            prefix += vocab.token_bytes[tid]


@pytest.mark.parametrize("text", [ARITHMETIC, NESTED_LISTS, STATEMENTS, BALANCED, RIGHT_RECURSIVE])
def test_masks_exact_small_vocab(text):
    vocab = Vocabulary(SMALL_TOKENS, eos_token_ids=[0])
    _walk_and_check(text, vocab, walks=3, steps=12, checked=6, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("text", [ARITHMETIC, NESTED_LISTS, STATEMENTS, RIGHT_RECURSIVE])
def test_masks_exact_smollm2_vocab(text, smollm2_vocab):
    _walk_and_check(text, smollm2_vocab, walks=1, steps=6, checked=4, seed=3)
