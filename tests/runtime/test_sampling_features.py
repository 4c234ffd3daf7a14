"""vLLM's remaining SamplingParams fields, checked against transformers on a tiny Llama:
logprobs, prompt_logprobs, penalties, logit_bias and n."""

from __future__ import annotations

import math

import pytest
import torch

from structgen import SamplingParams
from tests.runtime.test_engine import assert_no_leak

PROMPT = "Maria Lopez, 34, works"


@pytest.fixture(scope="module")
def hf(tiny_llama_dir):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(tiny_llama_dir, torch_dtype=torch.float32).eval()


def _hf_logits(hf, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0]  # [L, V]


def test_logprobs_match_transformers(tiny_engine, hf):
    p = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True, logprobs=3)
    out = tiny_engine.generate([PROMPT], p)[0]
    ids = tiny_engine.encode_prompt(PROMPT)
    ref = torch.log_softmax(_hf_logits(hf, ids + out.token_ids), -1)
    assert len(out.logprobs) == 6
    for i, (tok, d) in enumerate(zip(out.token_ids, out.logprobs)):
        row = ref[len(ids) - 1 + i]
        assert next(iter(d)) == tok  # chosen token first
        assert len(d) == 3 or (len(d) == 4 and tok not in row.topk(3).indices.tolist())
        for t, lp in d.items():
            assert math.isclose(lp, float(row[t]), abs_tol=1e-4)


def test_prompt_logprobs_match_transformers(tiny_engine, hf):
    p = SamplingParams(max_tokens=2, temperature=0.0, prompt_logprobs=2)
    out = tiny_engine.generate([PROMPT], p)[0]
    ids = tiny_engine.encode_prompt(PROMPT)
    ref = torch.log_softmax(_hf_logits(hf, ids), -1)
    assert out.prompt_logprobs[0] is None and len(out.prompt_logprobs) == len(ids)
    for pos in range(1, len(ids)):
        d = out.prompt_logprobs[pos]
        assert math.isclose(d[ids[pos]], float(ref[pos - 1, ids[pos]]), abs_tol=1e-4)
    assert out.metrics.cached_tokens == 0


def test_prompt_logprobs_with_chunked_prefill(tiny_llama_dir, tiny_engine):
    from structgen import Engine

    p = SamplingParams(max_tokens=2, temperature=0.0, prompt_logprobs=0)
    whole = tiny_engine.generate([PROMPT], p)[0].prompt_logprobs
    chunked = Engine(str(tiny_llama_dir), dtype="float32", chunked_prefill_tokens=3)
    got = chunked.generate([PROMPT], p)[0].prompt_logprobs
    assert len(got) == len(whole)
    for a, b in zip(got[1:], whole[1:]):
        assert a.keys() == b.keys()
        assert all(math.isclose(a[k], b[k], abs_tol=1e-4) for k in a)


def _reference_greedy_with_penalties(hf, ids, n, presence=0.0, frequency=0.0, bias=None):
    out = []
    for _ in range(n):
        logits = _hf_logits(hf, ids + out)[-1].clone()
        for t in set(out):
            logits[t] -= presence + frequency * out.count(t)
        for t, b in (bias or {}).items():
            logits[t] += b
        out.append(int(logits.argmax()))
    return out


def test_presence_frequency_penalties_and_bias_match_reference(tiny_engine, hf):
    ids = tiny_engine.encode_prompt(PROMPT)
    p = SamplingParams(
        max_tokens=10,
        temperature=0.0,
        ignore_eos=True,
        presence_penalty=0.5,
        frequency_penalty=1.5,
        logit_bias={7: 2.0, 11: -1.0},
    )
    out = tiny_engine.generate([PROMPT], p)[0]
    ref = _reference_greedy_with_penalties(hf, ids, 10, 0.5, 1.5, {7: 2.0, 11: -1.0})
    assert out.token_ids == ref
    plain = tiny_engine.generate(
        [PROMPT], SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
    )[0]
    assert plain.token_ids != out.token_ids  # the penalties changed something


def test_repetition_penalty_matches_transformers_generate(tiny_engine, hf):
    ids = tiny_engine.encode_prompt(PROMPT)
    p = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True, repetition_penalty=1.8)
    out = tiny_engine.generate([PROMPT], p)[0]
    with torch.no_grad():
        ref = hf.generate(
            torch.tensor([ids]),
            max_new_tokens=10,
            min_new_tokens=10,
            do_sample=False,
            repetition_penalty=1.8,
            pad_token_id=0,
        )
    assert out.token_ids == ref[0, len(ids) :].tolist()


def test_logit_bias_forces_a_token(tiny_engine):
    p = SamplingParams(max_tokens=5, temperature=1.0, ignore_eos=True, logit_bias={42: 100.0})
    assert tiny_engine.generate([PROMPT], p)[0].token_ids == [42] * 5


def test_n_branches_share_the_prompt_and_differ(tiny_engine):
    p = SamplingParams(max_tokens=8, temperature=1.0, ignore_eos=True, n=4, seed=3)
    long_prompt = PROMPT * 4
    out = tiny_engine.generate([long_prompt], p)[0]
    assert len(out.choices) == 4 and out.token_ids == out.choices[0].token_ids
    assert len({tuple(c.token_ids) for c in out.choices}) > 1
    n_prompt = out.metrics.num_prompt_tokens
    assert all(c.metrics.cached_tokens >= n_prompt - 8 for c in out.choices[1:])
    again = tiny_engine.generate([long_prompt], p)[0]
    assert [c.token_ids for c in again.choices] == [c.token_ids for c in out.choices]
    assert_no_leak(tiny_engine)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0},
        {"logprobs": 21},
        {"presence_penalty": 3},
        {"repetition_penalty": 0},
        {"repetition_penalty": float("nan")},
        {"repetition_penalty": float("inf")},
        {"temperature": -1.0},
        {"temperature": float("nan")},
        {"temperature": float("inf")},
        {"logit_bias": {"x": 1}},
        {"seed": -5},
        {"seed": 2**64},
    ],
)
def test_bad_fields_are_named(kwargs):
    from structgen.errors import ConfigError

    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        SamplingParams(**kwargs)
