"""Engine(quantization=...) on the tiny model: smaller weights, close outputs, clear errors."""

from __future__ import annotations

import pytest
import torch

from structgen import Engine, SamplingParams
from structgen.errors import ConfigError


def test_int8_engine_reports_smaller_weights_and_close_logprobs(tiny_llama_dir, tiny_engine):
    q = Engine(str(tiny_llama_dir), dtype="float32", quantization="int8")
    full, small = tiny_engine.memory_report(), q.memory_report()
    assert small["weight_bytes"] < 0.5 * full["weight_bytes"]
    assert small["kv_bytes"] > 0
    p = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    a = tiny_engine.generate(["Maria Lopez, 34"], p)[0].prompt_logprobs[1:]
    b = q.generate(["Maria Lopez, 34"], p)[0].prompt_logprobs[1:]
    la = torch.tensor([next(iter(d.values())) for d in a])
    lb = torch.tensor([next(iter(d.values())) for d in b])
    assert (la - lb).abs().max() < 0.1  # int8 per-channel weights, bf16 packed activations


def test_unknown_quantization_is_named(tiny_llama_dir):
    with pytest.raises(ConfigError, match="int3"):
        Engine(str(tiny_llama_dir), quantization="int3")
