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
