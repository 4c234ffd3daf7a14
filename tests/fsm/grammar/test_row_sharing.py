"""Rows of the grammar automaton that reuse the row of the configuration that first
reached them (``GrammarAutomaton._shared_targets``) equal rows computed by parser steps
alone (``share_rows=False``), by brute force.

The counts of a bounded whitespace repetition ``"\\n" [ \\t]{0,K}`` (llama.cpp's JSON
grammars) are configurations that differ in one lexer state, so each one's row comes from
the previous count's: every token's bytes are walked through the reference automaton from
states around the bound ``K`` (no more whitespace allowed, one more, two more) and, on
SmolLM2's vocabulary, around the longest run of spaces a token starts with; the mask of
``fill_bitmask`` (the C token-trie walk over the shared rows) must allow exactly the tokens
the reference keeps alive.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from structgen.fsm import Vocabulary
from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.automaton import GrammarAutomaton


def _grammar(k: int) -> str:
    return (
        'root ::= "[" ws item ("," ws item)* "]"\n'
        'item ::= "1" ws | "\\"a\\"" ws | "[" ws item ("," ws item)* "]" ws\n'
        f'ws ::= | " " | "\\n" [ \\t]{{0,{k}}}\n'
    )


def _mask_bits(matcher, vocab_size: int) -> np.ndarray:
    bitmask = torch.zeros(1, (vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(bitmask, 0)
    words = bitmask[0].numpy().view(np.uint32)
    ids = np.arange(vocab_size)
    return ((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)


def _reference(dfa) -> GrammarAutomaton:
    """The same charts and lexers, every row by parser steps."""
    return GrammarAutomaton(dfa.charts, dfa.lexers, sorted(dfa.ignore), share_rows=False)


def _check(vocab, k: int, prefixes: list[list[bytes]], walk_steps: int = 0, seed: int = 0) -> int:
    """Compare masks after each prefix (tokens given by their bytes; then ``walk_steps``
    random allowed tokens) with the reference automaton; returns the states checked."""
    grammar = compile_grammar(_grammar(k), vocab, syntax="gbnf")
    ref = _reference(grammar.dfa)
    specials = set(vocab.special_token_ids) | set(vocab.eos_token_ids)
    ids = {data: tid for tid, data in enumerate(vocab.token_bytes) if tid not in specials}
    rng = random.Random(seed)
    checked = 0
    for pieces in prefixes:
        matcher = grammar.matcher()
        for piece in pieces:
            assert matcher.advance(ids[piece]), pieces
        text = b"".join(pieces)
        for step in range(walk_steps + 1):
            start = ref.walk(ref.initial, text)
            assert start >= 0, text
            allowed = _mask_bits(matcher, vocab.vocab_size)
            for tid, data in enumerate(vocab.token_bytes):
                if tid in specials or not data:
                    continue
                assert allowed[tid] == (ref.walk(start, data) >= 0), (text, data)
            checked += 1
            if step == walk_steps:
                break
            live = [t for t in np.flatnonzero(allowed).tolist() if t not in specials]
            if not live:
                break
            tid = rng.choice(live)
            assert matcher.advance(tid)
            text += vocab.token_bytes[tid]
    return checked


def _counts(k: int, near: list[int]) -> list[list[bytes]]:
    """Prefixes ``[`` + newline + ``j`` blanks (one token each) for each ``j`` in ``near``
    that the bound ``k`` allows, inside an item and at the top level."""
    out = []
    for j in sorted({j for j in near if 0 <= j <= k}):
        blanks = [b" " if i % 3 else b"\t" for i in range(j)]
        out.append([b"[", b"\n", *blanks])
        out.append([b"[", b"1", b",", b"\n", *blanks])
        out.append([b"[", b"[", b"\n", *blanks])
    return out


SMALL_TOKENS = [
    b"<eos>",
    b"[",
    b"]",
    b"1",
    b",",
    b'"a"',
    b'"',
    b"a",
    b"\n",
    b"\t",
    b" \t",
    b"\t\t1",
    b" ]",
    b"\t]",
    b",\n",
    b"]\n",
    *[b" " * n for n in range(1, 12)],
    *[b"\n" + b" " * n for n in range(1, 12)],
    *[b" " * n + b'"a"' for n in range(1, 12)],
    *[b" " * n + b"[1" for n in (3, 5, 8)],
]


@pytest.mark.parametrize("k", [1, 4, 7, 9, 10, 11, 12])
def test_shared_rows_equal_parser_steps_small_vocab(k):
    """Bounds below, at and above the longest blank run of a token (11 blanks)."""
    vocab = Vocabulary(SMALL_TOKENS, eos_token_ids=[0])
    near = [0, 1, 2, k - 11, k - 10, k - 2, k - 1, k]
    assert _check(vocab, k, _counts(k, near), walk_steps=6, seed=k) > 0


@pytest.mark.slow
@pytest.mark.parametrize("k", [20, 64, 66])
def test_shared_rows_equal_parser_steps_smollm2_vocab(k, smollm2_vocab):
    """llama.cpp's bound (20) and bounds around the longest run of blanks a SmolLM2 token
    starts with (64): every token's bytes walked through the reference automaton."""
    lead = max(len(d) - len(d.lstrip(b" \t")) for d in smollm2_vocab.token_bytes)
    near = [0, 1, k - lead - 1, k - lead, k - lead + 1, k - 1, k]
    assert _check(smollm2_vocab, k, _counts(k, near)[::3], walk_steps=1, seed=k) > 0


@pytest.mark.parametrize("name", ["json", "json_arr", "c"])
def test_joint_byte_classes_match_lexer_rows(name):
    """Every memoised joint byte-class answer (``_disjoint_classes_of``'s concatenation or
    the row comparison) agrees with the lexers' rows byte by byte: the live bytes exactly,
    each byte's class holding its moves, classes distinct, the class byte inside it."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "fixtures" / "gbnf" / f"{name}.gbnf").read_text()
    vocab = Vocabulary(SMALL_TOKENS, eos_token_ids=[0])
    grammar = compile_grammar(text, vocab, syntax="gbnf")
    dfa = grammar.dfa
    sample = {
        "json": b'{"a": [1, {"b": "c"}],\n  "d":\t-2}',
        "json_arr": b'[\n{"a": [1, {"b": "c"}]},\n  "d"]',
        "c": b"int f(int a){a = a+1;}",
    }[name]
    state = dfa.initial
    for b in sample:  # builds rows (and their joint classes) along a text of the grammar
        dfa.row(state)
        state = dfa.step(state, b)
        if state < 0:
            break
    assert dfa._joint
    for states, (cols, inverse, reps, firsts) in dfa._joint.items():
        moves = np.stack([dfa.lexers[t].row(s) for t, s in states])  # [k, 256]
        live = np.flatnonzero((moves >= 0).any(axis=0))
        assert sorted(cols.tolist()) == live.tolist()
        for j, b in enumerate(cols.tolist()):
            assert reps[inverse[j]] == moves[:, b].tolist()
        assert len({tuple(r) for r in reps}) == len(reps)
        for c, b in enumerate(firsts):
            assert reps[c] == moves[:, b].tolist()
