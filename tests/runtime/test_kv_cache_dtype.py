"""``EngineConfig.kv_cache_dtype``: validated, resolved, and the pool stores K/V in it."""

from __future__ import annotations

import warnings

import pytest
import torch

from structgen.errors import ConfigError
from structgen.runtime.config import EngineConfig


@pytest.mark.parametrize("name", ["fp8", "int8", "float64", "", "bf16"])
def test_bad_kv_cache_dtype_is_a_config_error(name):
    with pytest.raises(ConfigError, match="kv_cache_dtype"):
        EngineConfig(kv_cache_dtype=name)


@pytest.mark.parametrize(
    "dtype,kv,want",
    [
        ("float32", "bfloat16", torch.bfloat16),
        ("float32", "float16", torch.float16),
        ("bfloat16", "float32", torch.float32),
        ("float32", "float32", torch.float32),
    ],
)
def test_explicit_kv_cache_dtype(dtype, kv, want):
    cfg = EngineConfig(dtype=dtype, kv_cache_dtype=kv, device="cpu").resolved()
    assert cfg.dtype == dtype and cfg.torch_kv_cache_dtype is want


def test_every_kv_cache_dtype_resolves_quietly_on_cpu():
    """float16 has C kernels on CPU now (F16C loads): no warning for any cache dtype."""
    for kv in ("float16", "bfloat16", "float32", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            EngineConfig(kv_cache_dtype=kv, device="cpu").resolved()


@pytest.mark.parametrize(
    "kwargs,want",
    [
        # the default engine: packaged GGUF kept quantized, int8 activations, C kernels
        ({}, "float16"),
        ({"model": "m.gguf"}, "float16"),
        ({"quantization": "int8"}, "float16"),
        ({"activation_dtype": "int8"}, "float16"),
        ({"dtype": "float32"}, "float16"),  # the compute dtype alone does not make it exact
        # exact float32 selected: float weights, or float32 activations
        ({"quantization": None}, "float32"),
        ({"model": "some/hf-folder"}, "float32"),  # quantization "auto" -> None for a folder
        ({"activation_dtype": "float32"}, "float32"),
        # not the CPU C kernels' fast path: the compute dtype, as before
        ({"dtype": "bfloat16"}, "bfloat16"),
        ({"attention_backend": "torch"}, "float32"),
        ({"device": "cuda"}, "bfloat16"),
        ({"device": "cuda", "dtype": "float32"}, "float32"),
        # an explicit cache dtype always wins
        ({"kv_cache_dtype": "float32"}, "float32"),
        ({"quantization": None, "kv_cache_dtype": "float16"}, "float16"),
    ],
)
def test_auto_kv_cache_dtype_rule(kwargs, want):
    """``"auto"``: float16 only for a float32 CPU engine with quantized weights, int8
    activations and the C attention kernels; else the compute dtype (benchmarks/RESULTS.md,
    "Session 25, k7")."""
    from structgen.runtime.cpu import ops as cpu_ops

    if not cpu_ops.kernel_available() and want == "float16" and "kv_cache_dtype" not in kwargs:
        want = "float32"  # no C kernels: the torch references, much slower on fp16
    kwargs = {"device": "cpu", **kwargs}
    cfg = EngineConfig(**kwargs).resolved()
    assert cfg.kv_cache_dtype == want
    assert cfg.torch_kv_cache_dtype is getattr(torch, want)
    assert cfg.resolved() == cfg  # resolving twice changes nothing


def test_auto_kv_cache_dtype_without_the_c_kernels(monkeypatch):
    """The C kernels off (not built): the float16 cache would run the torch references,
    20-60x slower, so ``"auto"`` stays the compute dtype."""
    from structgen.runtime.cpu import ops as cpu_ops

    monkeypatch.setattr(cpu_ops, "_ENABLED", False)
    assert EngineConfig(device="cpu").resolved().kv_cache_dtype == "float32"
