"""Logprobs of a constrained request that jump-forwards: the sampled tokens keep the
log-probabilities they were sampled with (jump-forward does not retokenize them), forced
tokens report 0.0, and the text is the tokens' bytes."""

from __future__ import annotations

import math

import pytest

from structgen import Regex, SamplingParams

pytestmark = pytest.mark.slow

PROMPT = "Is a cat's sound meow or purr? Answer:"


@pytest.mark.parametrize("seed", range(3))
def test_the_sampled_choice_keeps_its_logprob(smollm2_engine, seed):
    engine = smollm2_engine
    assert engine.config.jump_forward
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=seed, logprobs=3)
    out = engine.generate([PROMPT], params, Regex(" (meow|purr)"))[0]
    assert out.text in (" meow", " purr")
    assert engine.vocab.decode(out.token_ids).decode() == out.text
    assert len(out.logprobs) == len(out.token_ids)
    # the choice between the two words is a sampled token: its dict holds the options the
    # mask allowed (more than one, finite) and its own log-probability, below 0
    chosen = [lp[tok] for tok, lp in zip(out.token_ids, out.logprobs)]
    decisions = [
        i for i, lp in enumerate(out.logprobs) if sum(math.isfinite(v) for v in lp.values()) >= 2
    ]
    assert decisions, out.logprobs
    assert all(chosen[i] < 0 for i in decisions)
    # every other token was forced by the grammar: alone in its dict, at 0.0
    for i, lp in enumerate(out.logprobs):
        if i not in decisions:
            assert chosen[i] == 0.0 or sum(math.isfinite(v) for v in lp.values()) == 1
