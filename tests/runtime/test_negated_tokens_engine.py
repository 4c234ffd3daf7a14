"""End to end under ``!<X>`` (any one token but X): the tiny random Llama generates a
special token, one to four tokens none of which is special, the special token again, then
fixed text; with a self-draft speculative decoder (drafts validated and rolled back across
the token edges) greedy output is the plain engine's, token for token.
"""

from __future__ import annotations

import pytest

from structgen import Engine, Grammar, SamplingParams

GRAMMAR = 'root ::= <|im_start|> !<|im_start|>{1,4} <|im_start|> " ok"'
SETTINGS = dict(dtype="float32", max_kv_tokens=2048, page_size=4)


@pytest.fixture
def plain(tiny_engine) -> Engine:
    return tiny_engine  # SETTINGS


def _check(engine: Engine, out) -> None:
    vocab = engine.vocab
    start = vocab.special_token_texts["<|im_start|>"]
    ids = out.token_ids
    assert out.finish_reason == "stop", out
    assert ids[0] == start
    second = ids.index(start, 1)
    assert 1 <= second - 1 <= 4, ids  # exactly that many tokens, whatever their bytes
    assert not set(ids[1:second]) & vocab.special_token_ids, ids
    assert vocab.decode(ids[second + 1 :]) == b" ok", ids


def test_sampled_outputs_follow_the_grammar(plain: Engine) -> None:
    params = [SamplingParams(max_tokens=24, temperature=1.0, seed=s) for s in range(8)]
    outs = plain.generate(["Hello"] * len(params), params, Grammar(GRAMMAR))
    for out in outs:
        _check(plain, out)
    assert len({tuple(o.token_ids) for o in outs}) > 1  # the edge let the model choose


def test_speculative_greedy_equals_plain(tiny_llama_dir, plain: Engine) -> None:
    spec = Engine(
        str(tiny_llama_dir),
        speculative={"method": "draft", "draft_model": plain, "num_tokens": 4},
        **SETTINGS,
    )
    params = SamplingParams(max_tokens=24, temperature=0.0)
    prompts = ["Hello", "def f(x):"]
    want = plain.generate(prompts, params, Grammar(GRAMMAR))
    got = spec.generate(prompts, params, Grammar(GRAMMAR))
    for a, b in zip(want, got, strict=True):
        _check(plain, b)
        assert a.token_ids == b.token_ids
    assert sum(o.metrics.spec_accepted_tokens for o in got) > 0  # drafts crossed the edges
