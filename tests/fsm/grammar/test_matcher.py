"""The matcher interface over grammar automata: rollback, fork and validate equal
re-feeding; forced bytes on fixed keywords; budget-aware closing on recursive grammars."""

from __future__ import annotations

import random

import numpy as np
import torch

from structgen.fsm import Vocabulary
from structgen.fsm.grammar import compile_grammar
from tests.fsm.grammar._grammars import BALANCED, JSON_GBNF

TOKENS = [
    b"<eos>",
    b"[",
    b"]",
    b"[[",
    b"]]",
    b"(",
    b")",
    b"()",
    b"{",
    b"}",
    b"{}",
    b"x",
    b"1",
    b",",
    b" ",
    b'"',
    b'"a',
    b'a"',
    b"a",
    b"true",
    b"null",
    b"[1",
    b"1]",
    b":",
    b'{"',
    b"select",
    b"sel",
    b"ect",
    b" from",
    b"from",
    b"t",
]
KEYWORDS = r"""
root ::= "(" "select " item " from " name ")"
item ::= root | name
name ::= [a-z]+
"""


def _vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0])


def _allowed(matcher, vocab) -> list[int]:
    bitmask = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(bitmask, 0)
    words = bitmask[0].numpy().view(np.uint32)
    return [t for t in range(vocab.vocab_size) if (words[t >> 5] >> (t & 31)) & 1]


def _random_walk(matcher, vocab, rng, steps) -> list[int]:
    taken = []
    for _ in range(steps):
        allowed = [t for t in _allowed(matcher, vocab) if t not in vocab.eos_token_ids]
        if not allowed:
            break
        t = rng.choice(allowed)
        assert matcher.advance(t)
        taken.append(t)
    return taken


def _snapshot(matcher, vocab):
    return (
        matcher.state,
        matcher.is_accepting(),
        matcher.is_terminated(),
        _allowed(matcher, vocab),
    )


def test_rollback_fork_validate_equal_refeeding():
    vocab = _vocab()
    for text in (BALANCED, JSON_GBNF):
        grammar = compile_grammar(text, vocab)
        rng = random.Random(5)
        for _ in range(5):
            matcher = grammar.matcher()
            taken = _random_walk(matcher, vocab, rng, 15)
            k = rng.randint(0, len(taken))
            fork = matcher.fork()
            matcher.rollback(len(taken) - k)
            fresh = grammar.matcher()
            for t in taken[:k]:
                assert fresh.advance(t)
            assert _snapshot(matcher, vocab) == _snapshot(fresh, vocab)
            assert matcher.validate(taken[k:]) == len(taken) - k  # the rest is valid again
            assert _snapshot(matcher, vocab) == _snapshot(fresh, vocab)  # validate: no move
            for t in taken[k:]:
                assert matcher.advance(t)
            assert _snapshot(matcher, vocab) == _snapshot(fork, vocab)
            bad = [t for t in range(1, vocab.vocab_size) if t not in _allowed(fork, vocab)]
            if bad:
                before = _snapshot(fork, vocab)
                assert fork.validate([bad[0]]) == 0
                assert not fork.advance(bad[0])
                assert _snapshot(fork, vocab) == before


def test_forced_bytes_on_fixed_keywords():
    vocab = _vocab()
    grammar = compile_grammar(KEYWORDS, vocab)
    matcher = grammar.matcher()
    assert matcher.forced_bytes() == b"(select "
    assert matcher.advance(TOKENS.index(b"("))
    assert matcher.forced_bytes() == b"select "
    for tok in (b"select", b" ", b"(", b"select", b" ", b"t", b" from", b" ", b"t", b")"):
        assert matcher.advance(TOKENS.index(tok)), tok
    assert matcher.forced_bytes() == b" from "
    assert not matcher.is_accepting()


def test_budget_closes_recursive_grammar():
    vocab = _vocab()
    grammar = compile_grammar(BALANCED, vocab)
    for budget in (1, 3, 6):
        rng = random.Random(budget)
        for _ in range(3):
            matcher = grammar.matcher(max_tokens=budget)
            used, out = 0, b""
            while not matcher.is_terminated():
                allowed = _allowed(matcher, vocab)
                assert allowed, "a budgeted mask never leaves no way out"
                non_eos = [t for t in allowed if t not in vocab.eos_token_ids]
                if not non_eos or rng.random() < 0.1 and 0 in allowed:
                    assert matcher.advance(0)
                    break
                t = rng.choice(non_eos)
                assert matcher.advance(t)
                used, out = used + 1, out + TOKENS[t]
            assert used <= budget
            assert matcher.is_accepting() and grammar.matches(out), out


def test_budget_after_deep_nesting():
    """After 40 nested brackets the parser's completion (no search over 40 levels) lets
    the budget allow what still fits; with 2 tokens left after 4, only ``]]`` does."""
    vocab = _vocab()
    grammar = compile_grammar(JSON_GBNF, vocab)
    matcher = grammar.matcher(max_tokens=65)
    for _ in range(40):
        assert matcher.advance(TOKENS.index(b"["))
    assert TOKENS.index(b"[[") in _allowed(matcher, vocab)  # 42 open: 21 of 24 left
    tight = grammar.matcher(max_tokens=6)
    for _ in range(4):
        assert tight.advance(TOKENS.index(b"["))
    assert _allowed(tight, vocab) == [TOKENS.index(b"]]")]
