"""``sample_step`` on host logits picks a greedy row's token among its allowed ids without
masking the row (``step._greedy_picks``): the same tokens and logprobs as masking every
row (``GREEDY_PICK_MAX_WORDS = 0``), over random masks, ties, non-finite logits,
``min_tokens`` bans, logprobs and temperature rows."""

from __future__ import annotations

import types

import numpy as np
import pytest

from structgen import SamplingParams
from structgen.fsm.matcher import Matcher
from structgen.runtime import step
from structgen.runtime.sampler import make_generator


class WordsMatcher(Matcher):
    """A ``Matcher`` whose mask is a given int32 row (no grammar)."""

    def __init__(self, words: np.ndarray) -> None:  # noqa: D107 - no grammar to build
        self.words = words

    def fill_bitmask(self, bitmask, row: int) -> None:
        bitmask[row] = self.words


def masks(rng: np.random.Generator, vocab: int, n: int) -> list[np.ndarray]:
    words = -(-vocab // 32)
    out = []
    for i in range(n):
        allowed = np.zeros(words * 32, bool)
        kind = i % 5
        if kind == 0:
            allowed[rng.integers(0, vocab, 3)] = True  # a few tokens
        elif kind == 1:
            allowed[rng.integers(0, words * 32, 5)] = True  # bits past the vocabulary too
        elif kind == 2:
            allowed[: vocab // 2] = True  # many words
        elif kind == 3:
            allowed[rng.integers(0, vocab, 1)] = True  # one token
        else:
            allowed[words * 32 - 1] = True  # only a bit past the vocabulary (or the last)
        out.append(np.packbits(allowed, bitorder="little").view(np.int32).copy())
    return out


def requests(rng, vocab: int, n: int) -> list:
    reqs = []
    for i, words in enumerate(masks(rng, vocab, n)):
        kind = i % 7
        params = SamplingParams(
            temperature=0.8 if kind == 5 else 0.0,
            seed=3 if kind == 5 else None,
            logprobs=2 if kind == 6 else None,
            min_tokens=3 if kind == 4 else 0,
            logit_bias={1: 5.0} if kind == 3 else None,
        )
        reqs.append(
            types.SimpleNamespace(
                params=params,
                matcher=None if i % 11 == 10 else WordsMatcher(words),
                output_token_ids=[5],
                prompt_token_ids=[1, 2, 3],
                generator=make_generator(3, "cpu") if kind == 5 else None,
                finish=lambda *a: None,
            )
        )
    return reqs


@pytest.mark.parametrize("vocab", [40, 64, 1000, 49_152])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_picks_equal_masking_every_row(monkeypatch, vocab, seed):
    rng = np.random.default_rng(seed * 1000 + vocab)
    n = 23
    logits = (rng.standard_normal((n, vocab)) * 3).astype(np.float32)
    logits[2] = np.round(logits[2])  # ties
    logits[7, ::3] = np.nan
    logits[8] = -np.inf
    logits[9, ::2] = np.inf
    logits[12] = 1.0  # every logit tied
    state = rng.bit_generator.state
    got_x = logits.copy()
    got = step.sample_step(got_x, requests(rng, vocab, n), frozenset({0}))
    rng.bit_generator.state = state
    monkeypatch.setattr(step, "GREEDY_PICK_MAX_WORDS", 0)
    want_x = logits.copy()
    want = step.sample_step(want_x, requests(rng, vocab, n), frozenset({0}))
    assert got[0] == want[0]
    assert [None if d is None else list(d.items()) for d in got[1]] == [
        None if d is None else list(d.items()) for d in want[1]
    ]
    picked = [r for r in range(n) if not np.array_equal(got_x[r], want_x[r], equal_nan=True)]
    assert picked  # the shortcut ran: those rows left unmasked
    assert all(np.isneginf(got_x[r]).sum() < np.isneginf(want_x[r]).sum() for r in picked)


def test_greedy_picks_rows():
    logits = np.array([[0.0, 3.0, 3.0, 1.0], [5.0, 1.0, 2.0, 2.0]], np.float32)
    bitmask = np.array([[0b0110], [0b1100]], np.int32)
    reqs = [types.SimpleNamespace(params=SamplingParams(temperature=0.0), output_token_ids=[])] * 2
    assert step._greedy_picks(logits, bitmask, [0, 1], reqs) == {0: 1, 1: 2}
