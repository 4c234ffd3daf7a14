"""``Request.prompt_only``: a scoring request computes its prompt's rows but the last and
samples nothing; its prompt log-probabilities equal a sampling request's."""

from __future__ import annotations

import pytest

from structgen import Engine, SamplingParams
from tests.runtime.test_engine import PROMPTS, assert_no_leak

SYSTEM = "The quick brown fox jumps over the lazy dog. " * 4


@pytest.fixture(scope="module")
def engine(tiny_llama_dir):
    return Engine(str(tiny_llama_dir), dtype="float32", page_size=4)


def _counted(engine: Engine) -> list[int]:
    """Rows through the forward and logits rows, counted at ``runner.execute``."""
    counts = [0, 0]
    execute = engine.runner.execute

    def counted(scheduled):
        counts[0] += sum(num for _, num in scheduled.scheduled)
        out = execute(scheduled)
        counts[1] += 0 if out.logits is None else out.logits.shape[0]
        return out

    engine.runner.execute = counted
    return counts


def _run(engine: Engine, prompts: list[list[int]], params: list[SamplingParams], only: bool):
    reqs = [engine.make_request(p, sp) for p, sp in zip(prompts, params)]
    for req in reqs:
        req.prompt_only = only
    return engine.run_requests(reqs)


@pytest.mark.parametrize("cache", [False, True])
def test_prompt_only_gives_the_same_prompt_logprobs_one_row_fewer(tiny_llama_dir, cache):
    """Against the same requests sampling their one token (the reference): every prompt
    log-prob equal (the same rows, keys and values), no output token, finish "length",
    one row and one logits row fewer per request, no page leaked; with the prefix cache
    warm from a shared head too (the cache serves the same prefix to both)."""
    e = Engine(str(tiny_llama_dir), dtype="float32", page_size=4, prefix_cache=cache)
    head = e.encode_prompt(SYSTEM)
    prompts = [e.encode_prompt(SYSTEM + q) for q in (" Maria Lopez", " Lyon", " nurse, 34")]
    params = [
        SamplingParams(
            max_tokens=1, temperature=0.0, prompt_logprobs=k, prompt_logprobs_start=start
        )
        for k, start in ((0, len(head) - 1), (5, len(head)), (0, 1))
    ]
    if cache:
        e.generate([head], SamplingParams(max_tokens=2, temperature=0.0))
    counts = _counted(e)
    refs = _run(e, prompts, params, only=False)
    rows_ref, logits_ref = counts
    counts[:] = [0, 0]
    outs = _run(e, prompts, params, only=True)
    for out, ref in zip(outs, refs):
        assert out.finish_reason == "length" and out.token_ids == [] and out.text == ""
        assert ref.finish_reason in ("stop", "length") and len(ref.token_ids) == 1
        assert len(out.prompt_logprobs) == len(ref.prompt_logprobs)
        for got, want in zip(out.prompt_logprobs, ref.prompt_logprobs):
            assert got == want
    if not cache:
        assert counts == [rows_ref - len(prompts), logits_ref - len(prompts)]
    assert_no_leak(e)


def test_prompt_only_batches_with_generation_and_frees_its_pages(engine):
    """Mixed with ordinary requests in one run: their greedy outputs are those of a run
    without the scoring requests; the scoring requests finish without sampling."""
    greedy = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    ref = [o.token_ids for o in engine.generate(PROMPTS, greedy)]
    score = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    gen_reqs = [engine.make_request(p, greedy) for p in PROMPTS]
    score_reqs = [engine.make_request(SYSTEM + p, score) for p in PROMPTS]
    for req in score_reqs:
        req.prompt_only = True
    outs = engine.run_requests(gen_reqs + score_reqs)
    assert [o.token_ids for o in outs[: len(PROMPTS)]] == ref
    assert all(o.token_ids == [] and o.finish_reason == "length" for o in outs[len(PROMPTS) :])
    assert all(o.prompt_logprobs is not None for o in outs[len(PROMPTS) :])
    assert_no_leak(engine)


def test_prompt_only_of_one_token_finishes_without_a_step(engine):
    """A one-token prompt has no row to compute: finished at admission, nothing run."""
    counts = _counted(engine)
    req = engine.make_request([5], SamplingParams(max_tokens=1, prompt_logprobs=0))
    req.prompt_only = True
    (out,) = engine.run_requests([req])
    assert out.finish_reason == "length" and out.token_ids == []
    assert counts == [0, 0]
    assert_no_leak(engine)
