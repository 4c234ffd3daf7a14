"""The default configuration (``Engine()``: the packaged GGUF's blocks kept quantized, int8
activations, every CPU extension through the C attention kernel) is batch invariant: a
request's greedy tokens *and their logprobs* are bit-identical whether it runs alone, inside a
batch of 8 or of 64, or with its prompt prefilled in small chunks beside other requests.

The reference is the same request run alone on an engine without prefix caching. No tie
allowance: every row of every op is computed the same way whatever the step holds, so any
difference at all is a bug (a batch-size-dependent kernel path, SDPA on long chunks).
"""

from __future__ import annotations

import pytest

from structgen import Engine, SamplingParams

pytestmark = pytest.mark.slow

GREEDY = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, logprobs=1)
SUBJECTS = ["France", "Japan", "Peru", "Kenya", "Norway", "Chile", "Egypt", "Canada"]
TASKS = [
    "Name the capital of {}.",
    "Describe the flag of {} in one sentence.",
    "What language is spoken in {}?",
    "Give one famous dish from {}.",
    "How many neighbours does {} have?",
    "Name a river in {}.",
    "What currency does {} use?",
    "Name a mountain in {}.",
]
PROMPTS = [
    [{"role": "user", "content": task.format(subject)}] for task in TASKS for subject in SUBJECTS
]  # 64 distinct chat prompts of different lengths
TARGETS = [0, 21, 63]  # requests checked against their batch-1 runs


def _run(engine: Engine, prompts) -> list[tuple[list[int], list[dict[int, float]]]]:
    return [(o.token_ids, o.logprobs) for o in engine.generate(prompts, GREEDY)]


@pytest.fixture(scope="module")
def alone():
    """Each target request alone on an engine without prefix caching (batch 1)."""
    engine = Engine(prefix_cache=False, max_kv_tokens=2048)
    assert engine.config.quantization == "gguf"  # the default under test
    return {i: _run(engine, [PROMPTS[i]])[0] for i in TARGETS}


def test_default_is_gguf_with_int8_activations(smollm2_engine):
    import torch

    from structgen.runtime.quantization.linear import QuantLinear

    assert smollm2_engine.config.quantization == "gguf"
    mods = [m for m in smollm2_engine.loaded.model.modules() if isinstance(m, QuantLinear)]
    assert mods and all(m.activation_dtype != torch.float32 for m in mods)
    # "auto" KV cache of this configuration: float16 over the C kernels (EngineConfig)
    from structgen.runtime.cpu import ops as cpu_ops

    want = torch.float16 if cpu_ops.kernel_available() else torch.float32
    assert smollm2_engine.pool.dtype == want


@pytest.mark.parametrize("size", [8, 64])
def test_greedy_alone_equals_inside_batch(smollm2_engine, alone, size):
    order = range(64) if size == 64 else (63, 40, 21, 17, 0, 9, 50, 33)
    batch = [PROMPTS[i] for i in order]
    outs = _run(smollm2_engine, batch)
    for i in TARGETS:
        got = outs[batch.index(PROMPTS[i])]
        assert got == alone[i], f"request {i} differs inside a batch of {size}"


def test_greedy_alone_equals_small_chunks_beside_others(alone):
    engine = Engine(max_kv_tokens=4096, chunked_prefill_tokens=7, max_batch_tokens=40, page_size=4)
    batch = [PROMPTS[i] for i in (5, 63, 12, 0, 33, 21)]
    for _ in range(2):  # the second round reads the first one's KV from the prefix cache
        outs = _run(engine, batch)
        for i in TARGETS:
            if PROMPTS[i] in batch:
                assert outs[batch.index(PROMPTS[i])] == alone[i], f"request {i} differs"
    assert engine.stats()["prefix_hit_tokens"] > 0
