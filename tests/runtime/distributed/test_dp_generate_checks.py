"""``DataParallelEngine.generate`` refuses what ``Engine.generate`` refuses, the same way:
the same error type and message, for the whole call, before any request reaches a replica.

Reference: ``Engine.generate`` of one engine with the same model and settings.
"""

from __future__ import annotations

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import PromptTooLongError, RequestError

SETTINGS = {"dtype": "float32", "max_kv_tokens": 2048, "page_size": 4, "dist_timeout_s": 20}
GREEDY = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def engines(tiny_model_dirs):
    dp = Engine(tiny_model_dirs["llama_gqa"], data_parallel_size=2, **SETTINGS)
    single = Engine(tiny_model_dirs["llama_gqa"], **SETTINGS)
    yield dp, single
    dp.close()
    single.close()


def _refusal(engine, *args):
    with pytest.raises(RequestError) as info:
        engine.generate(*args)
    return type(info.value), str(info.value)


@pytest.mark.timeout(120)
def test_too_long_prompt_raises_as_engine_generate(engines):
    dp, single = engines
    limit = single.max_request_tokens()
    assert dp.max_request_tokens() == limit
    fits = "Maria Lopez, 34, works as a nurse."
    cases = [
        [fits, [5] * limit],  # token ids: exactly no room for one output token
        [fits, "word " * limit],  # text
        [[{"role": "user", "content": "word " * limit}]],  # one chat
    ]
    for prompts in cases:
        before = list(dp.router.num_routed)
        want = _refusal(single, prompts, GREEDY)
        assert want[0] is PromptTooLongError
        assert _refusal(dp, prompts, GREEDY) == want  # type and message (prompts[i] (of n))
        assert list(dp.router.num_routed) == before  # nothing was sent to a replica
    # n > 1 (served by Engine.generate, not here) is refused before the first prompt is sent
    before = list(dp.router.num_routed)
    assert _refusal(dp, [fits, "Bob is 5."], [GREEDY, SamplingParams(n=2)]) == (
        RequestError,
        "prompts[1] (of 2): n > 1 is not served by a DataParallelEngine; send n requests",
    )
    assert list(dp.router.num_routed) == before
    # the engine serves on, as one engine
    prompts = [fits, [5] * (limit - 7)]
    outs = dp.generate(prompts, GREEDY)
    assert [o.token_ids for o in outs] == [o.token_ids for o in single.generate(prompts, GREEDY)]
    assert all(o.finish_reason == "length" for o in outs)
