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


@pytest.mark.parametrize(
    "setting, expected",
    [("auto", torch.bfloat16), ("int8", torch.bfloat16), ("float32", torch.float32)],
)
def test_activation_dtype_setting_reaches_every_quantized_module(tiny_llama_dir, setting, expected):
    from structgen.runtime.quantization import QuantEmbedding, QuantLinear

    q = Engine(
        str(tiny_llama_dir),
        dtype="float32",
        quantization="int4",
        max_kv_tokens=256,
        activation_dtype=setting,
    )
    mods = [m for m in q.runner.model.modules() if isinstance(m, (QuantLinear, QuantEmbedding))]
    assert mods and {m.activation_dtype for m in mods} == {expected}
    assert q.generate(["Maria"], SamplingParams(max_tokens=3, temperature=0.0))[0].token_ids


def test_attention_and_activation_settings_are_validated(tiny_llama_dir):
    with pytest.raises(ConfigError, match="activation_dtype"):
        Engine(str(tiny_llama_dir), activation_dtype="bfloat16")
    with pytest.raises(ConfigError, match="attention_backend"):
        Engine(str(tiny_llama_dir), attention_backend="flash")


def test_attention_backend_setting_reaches_the_runner(tiny_llama_dir, tiny_engine):
    eng = Engine(
        str(tiny_llama_dir),
        dtype="float32",
        max_kv_tokens=2048,
        page_size=4,
        attention_backend="torch",
    )
    assert (
        eng.runner.attention_backend == "torch" and tiny_engine.runner.attention_backend == "auto"
    )
    p = SamplingParams(max_tokens=8, temperature=0.0)
    ref = tiny_engine.generate(["Maria Lopez, 34"], p)[0].token_ids
    assert eng.generate(["Maria Lopez, 34"], p)[0].token_ids == ref  # same model, same greedy text


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, "gguf"),  # the packaged model: a GGUF file on one CPU process
        ({"model": "/models/x.GGUF"}, "gguf"),
        ({"model": "/models/folder"}, None),  # a Hugging Face folder: float weights
        ({"tensor_parallel_size": 2}, None),  # tensor parallelism needs float weights
        ({"quantization": None}, None),  # the exact configuration, asked for
        ({"quantization": "int4"}, "int4"),
    ],
)
def test_quantization_auto_resolves_to_the_fast_path_on_cpu(kwargs, expected):
    from structgen.runtime.config import EngineConfig

    assert EngineConfig(device="cpu", **kwargs).resolved().quantization == expected


def test_quantization_auto_keeps_float_weights_on_cuda():
    from structgen.runtime.config import EngineConfig

    assert EngineConfig(device="cuda").resolved().quantization is None


@pytest.mark.parametrize(
    "stored, device, want",
    [
        ("bfloat16", "cpu", "bfloat16"),  # the checkpoint's dtype: faster than widening
        ("float32", "cpu", "float32"),
        ("float16", "cpu", "float32"),  # no fp16 CPU kernels: widened
        (None, "cpu", "float32"),
        ("bfloat16", "cuda", "bfloat16"),
    ],
)
def test_auto_dtype_of_a_folder_follows_its_bfloat16_checkpoint(tmp_path, stored, device, want):
    import json

    from structgen.runtime.config import EngineConfig

    cfg = {"model_type": "llama"} | ({} if stored is None else {"torch_dtype": stored})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    got = EngineConfig(model=str(tmp_path), device=device).resolved()
    assert got.dtype == want
    assert EngineConfig(model=str(tmp_path), device=device, dtype="float32").resolved().dtype == (
        "float32"
    )
    gguf = EngineConfig(model=str(tmp_path / "m.gguf"), device="cpu").resolved()
    assert gguf.dtype == "float32"
