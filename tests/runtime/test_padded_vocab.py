"""A model whose embedding has more rows than its tokenizer has tokens (a padded vocabulary,
as Qwen2.5's 151,936 rows for 151,665 tokens): the padded ids are never sampled, constrained
or not, speculative or not, and never reach the detokenizer.

The fixture's padded rows of ``lm_head`` are scaled up so that, unmasked, they would take most
of the probability (checked against transformers' logits): a test that cannot pass by luck.
"""

from __future__ import annotations

import re

import pytest
import torch

from structgen import Engine, Regex, SamplingParams
from tests.tiny_llama import save_tiny_llama

NUM_PADDED = 96


@pytest.fixture(scope="module")
def padded_dir(tmp_path_factory, tiny_tokenizer):
    n = len(tiny_tokenizer)

    def boost_padded(model):
        model.lm_head.weight[n:] *= 40.0  # the padded ids would win almost every draw

    return save_tiny_llama(
        tmp_path_factory.mktemp("padded_vocab"),
        tiny_tokenizer,
        seed=3,
        vocab_size=n + NUM_PADDED,
        edit=boost_padded,
    )


def _prompts(count: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(3, 300, (6,), generator=g).tolist() for _ in range(count)]


def test_padded_ids_would_dominate_unmasked(padded_dir, tiny_tokenizer):
    from transformers import LlamaForCausalLM

    hf = LlamaForCausalLM.from_pretrained(padded_dir, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        probs = hf(torch.tensor(_prompts(8))).logits[:, -1].softmax(-1)
    assert float(probs[:, len(tiny_tokenizer) :].sum(-1).min()) > 0.5


def _check(outs, num_tokens: int) -> int:
    total = 0
    for out in outs:
        for o in out.choices or [out]:
            assert o.finish_reason in ("length", "stop"), o.finish_reason
            assert all(0 <= t < num_tokens for t in o.token_ids), o.token_ids
            total += len(o.token_ids)
    return total


def test_padded_ids_never_sampled_plain_constrained_and_greedy(padded_dir, tiny_tokenizer):
    eng = Engine(str(padded_dir), dtype="float32", page_size=4, max_kv_tokens=8192)
    n = len(tiny_tokenizer)
    assert eng.vocab_size == n + NUM_PADDED and eng.step_context.num_sampled_ids == n
    prompts = _prompts(32)
    hot = SamplingParams(max_tokens=64, temperature=1.0, ignore_eos=True, seed=1)
    with_logprobs = SamplingParams(max_tokens=64, temperature=1.0, ignore_eos=True, logprobs=2)
    outs = eng.generate(prompts, [hot] * 28 + [with_logprobs] * 4)
    assert _check(outs, n) == 32 * 64  # 2,048 draws at temperature 1
    assert all(max(d) < n for o in outs[28:] for d in o.logprobs)  # top logprobs: tokens only
    outs = eng.generate(
        prompts[:8], SamplingParams(max_tokens=40, temperature=1.0), Regex(r"[a-z ]{4,40}")
    )
    _check(outs, n)
    assert all(re.fullmatch(r"[a-z ]{4,40}", o.text) for o in outs)
    greedy = SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True)
    _check(eng.generate(prompts[:4], greedy), n)


@pytest.mark.parametrize("method", ["ngram", "draft"])
def test_padded_ids_never_sampled_speculative(padded_dir, tiny_tokenizer, method):
    spec = "ngram" if method == "ngram" else {"method": "draft", "draft_model": str(padded_dir)}
    eng = Engine(
        str(padded_dir), dtype="float32", page_size=4, max_kv_tokens=4096, speculative=spec
    )
    n = len(tiny_tokenizer)
    prompts = [p * 3 for p in _prompts(8)]  # repeats give the n-gram proposer matches
    params = SamplingParams(max_tokens=32, temperature=1.0, ignore_eos=True, seed=5)
    outs = eng.generate(prompts, params)
    assert _check(outs, n) == 8 * 32
    assert sum(o.metrics.spec_proposed_tokens for o in outs) > 0
