"""Prefix caching through the engine: hits counted, outputs unchanged, no page leaks."""

from __future__ import annotations

import pytest

from structgen import Engine, SamplingParams
from tests.runtime.test_engine import PROMPTS, assert_no_leak

GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
SYSTEM = "The quick brown fox jumps over the lazy dog. " * 6


@pytest.fixture(scope="module")
def engines(tiny_llama_dir):
    def make(**kw):
        return Engine(str(tiny_llama_dir), dtype="float32", page_size=4, **kw)

    return make


def test_shared_prefix_hits_and_identical_output(engines):
    prompts = [SYSTEM + q for q in ("Maria?", "Lyon?", "nurse?", "34?")]
    cached = engines(prefix_cache=True)
    plain = engines(prefix_cache=False)
    ref = [o.token_ids for o in plain.generate(prompts, GREEDY)]
    outs = cached.generate(prompts, GREEDY)
    assert [o.token_ids for o in outs] == ref
    # requests after the first reuse the shared system prompt (whole pages)
    n_shared = len(cached.encode_prompt(SYSTEM)) // 4 * 4 - 4
    assert outs[0].metrics.cached_tokens == 0
    assert all(o.metrics.cached_tokens >= n_shared for o in outs[1:])
    stats = cached.stats()
    assert stats["prefix_hit_tokens"] == sum(o.metrics.cached_tokens for o in outs)
    assert 0 < stats["prefix_hit_rate"] < 1
    again = cached.generate(prompts, GREEDY)  # second round: everything but the tail cached
    assert [o.token_ids for o in again] == ref
    assert all(o.metrics.cached_tokens >= o.metrics.num_prompt_tokens - 4 for o in again)
    assert_no_leak(cached)


def test_multi_turn_conversation_reuses_previous_turns(engines):
    engine = engines()
    msgs = [{"role": "user", "content": "Maria Lopez, 34"}]
    prev_prompt = 0  # read from the second turn on
    for turn in range(3):
        out = engine.generate([msgs], GREEDY)[0]
        if turn:
            assert out.metrics.cached_tokens >= prev_prompt - 8
        prev_prompt = out.metrics.num_prompt_tokens
        msgs = msgs + [
            {"role": "assistant", "content": out.text},
            {"role": "user", "content": "and then?"},
        ]
    assert_no_leak(engine)


@pytest.mark.parametrize(
    "settings",
    [
        {"schedule_policy": "fcfs"},
        {"max_kv_tokens": 128, "chunked_prefill_tokens": 5},  # eviction + preemption + chunks
        {"max_batch_tokens": 7, "max_running_requests": 2},
    ],
)
def test_cache_with_pressure_keeps_greedy_output(engines, tiny_engine, settings):
    prompts = PROMPTS + [SYSTEM + "x", SYSTEM + "y"]
    ref = [o.token_ids for o in engines(prefix_cache=False).generate(prompts, GREEDY)]
    engine = engines(**settings)
    for _ in range(2):
        assert [o.token_ids for o in engine.generate(prompts, GREEDY)] == ref
    if "max_kv_tokens" in settings:
        assert engine.stats()["preemptions"] > 0  # the pressure case really preempted
    assert_no_leak(engine)


def test_listener_raising_on_final_output_leaves_engine_whole(engines):
    """A listener that raises on a request's final output (the CLI raising CliError for a
    failed single text) makes the loop abort requests already released: the exception
    propagates as itself, no page is freed twice, and the engine serves the next call."""
    engine = engines(prefix_cache=True)
    ref = [o.token_ids for o in engine.generate(PROMPTS[:2], GREEDY)]

    class Stop(Exception):
        pass

    def listener(_i, out):
        if out.finish_reason is not None:
            raise Stop

    reqs = [engine.make_request(p, GREEDY) for p in PROMPTS[:2]]
    with pytest.raises(Stop):
        engine.run_requests(reqs, listener)
    assert_no_leak(engine)
    assert [o.token_ids for o in engine.generate(PROMPTS[:2], GREEDY)] == ref
    assert_no_leak(engine)


def test_partial_page_copy_gives_the_logits_of_recomputing(engines):
    """Requests that part from a cached prompt inside a page start from a copy of that
    page's leading slots (``Scheduler(partial_pages=True)``); their prompt log-probs and
    first-token log-probs, in float32, equal those of an engine without a prefix cache."""
    prompts = [SYSTEM + q for q in (" Maria Lopez", " Maria L.", " Mario", " Lyon, France")]
    cached, plain = engines(prefix_cache=True), engines(prefix_cache=False)
    start = len(cached.encode_prompt(SYSTEM)) - 1  # log-probs of the last tokens only
    params = SamplingParams(
        max_tokens=1, temperature=0.0, logprobs=5, prompt_logprobs=5, prompt_logprobs_start=start
    )
    assert cached.scheduler.partial_pages
    cached.generate([SYSTEM + " Maria Lopez, 34"], GREEDY)  # its pages go into the tree
    outs = cached.generate(prompts, params)
    refs = plain.generate(prompts, params)
    assert cached.scheduler.num_partial_hit_tokens > 0  # the copy really served tokens
    assert all(o.metrics.cached_tokens % 4 for o in outs[:2])  # a partial page's worth
    for out, ref in zip(outs, refs):
        assert out.token_ids == ref.token_ids
        got = [d for d in out.prompt_logprobs if d] + list(out.logprobs)
        want = [d for d in ref.prompt_logprobs if d] + list(ref.logprobs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.keys() == w.keys()
            assert max(abs(g[t] - w[t]) for t in w) < 1e-4
    assert_no_leak(cached)


def test_finished_generations_partial_page_gives_the_logits_of_recomputing(engines):
    """Scoring requests continuing a finished generation inside its last, partial page
    (extraction's candidates) copy that page from the tree (``insert_partial``) instead
    of recomputing it; their prompt and first-token log-probs, in float32, equal those
    of an engine without a prefix cache."""
    cached, plain = engines(prefix_cache=True), engines(prefix_cache=False)
    prompt = cached.encode_prompt(SYSTEM + " Maria")
    # the last sampled token is never computed: prompt + max_tokens - 1 tokens have KV,
    # 3 of them in the last page
    max_tokens = 5 + (3 - (len(prompt) + 4) % 4) % 4
    gen = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    out = cached.generate([prompt], gen)[0]
    assert out.token_ids == plain.generate([prompt], gen)[0].token_ids
    known = prompt + out.token_ids
    assert (len(known) - 1) % 4 == 3  # the generation's KV ends inside a page
    hits = cached.scheduler.num_partial_hit_tokens
    # each continues the generation's tokens, all or all but the last, then its own
    prompts = [known + [5, 6], known[:-1] + [7], known + [9]]
    params = SamplingParams(
        max_tokens=1,
        temperature=0.0,
        logprobs=5,
        prompt_logprobs=5,
        prompt_logprobs_start=len(known) - 1,
    )
    outs = cached.generate(prompts, params)
    refs = plain.generate(prompts, params)
    assert cached.scheduler.num_partial_hit_tokens > hits  # the tree's partial page served
    for o, ref in zip(outs, refs):
        assert o.token_ids == ref.token_ids
        got = [d for d in o.prompt_logprobs if d] + list(o.logprobs)
        want = [d for d in ref.prompt_logprobs if d] + list(ref.logprobs)
        assert len(got) == len(want) and got
        for g, w in zip(got, want):
            assert g.keys() == w.keys()
            assert max(abs(g[t] - w[t]) for t in w) < 1e-4
    assert_no_leak(cached)
