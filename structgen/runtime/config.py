"""EngineConfig: the one frozen dataclass holding every engine setting."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from structgen.errors import ConfigError

__all__ = ["EngineConfig"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class EngineConfig:
    """Every engine setting, validated at construction.

    Attributes:
        model: path of a ``.gguf`` file or a Hugging Face folder; None = packaged SmolLM2.
        dtype: compute dtype name: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"``
            (float32 on CPU, bfloat16 on CUDA).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
        max_kv_tokens: KV cache capacity in tokens (rounded up to whole pages); None =
            32,768 on CPU, and on CUDA ``kv_memory_fraction`` of the GPU memory left free
            after the weights are loaded.
        kv_memory_fraction: share of free GPU memory given to the KV cache (CUDA only).
        page_size: tokens per KV page.
        max_batch_tokens: most tokens one forward pass computes, all requests together.
        chunked_prefill_tokens: most tokens of one request per forward (longer prompts are
            prefilled in chunks, interleaved with other requests' decode steps).
        max_running_requests: most requests decoding at once.
        max_model_len: context limit in tokens; None = the model's own.
        prefix_cache: reuse KV of shared prefixes through the radix cache.
        schedule_policy: ``"lpm"`` (longest cached prefix first) or ``"fcfs"``.
        num_threads: torch intra-op threads on CPU; None keeps torch's default.
        jump_forward: append forced grammar text without sampling.

    Raises:
        ConfigError: a field is invalid (the message names it).
    """

    model: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    max_kv_tokens: int | None = None
    kv_memory_fraction: float = 0.85
    page_size: int = 16
    max_batch_tokens: int = 2048
    chunked_prefill_tokens: int = 512
    max_running_requests: int = 64
    max_model_len: int | None = None
    prefix_cache: bool = True
    schedule_policy: str = "lpm"
    num_threads: int | None = None
    jump_forward: bool = True

    def __post_init__(self) -> None:
        if self.dtype != "auto" and self.dtype not in _DTYPES:
            raise ConfigError(
                f"EngineConfig.dtype must be 'auto' or one of {sorted(_DTYPES)}, got {self.dtype!r}"
            )
        dev = self.device
        if dev not in ("auto", "cpu") and not dev.startswith("cuda"):
            raise ConfigError(f"EngineConfig.device must be 'auto', 'cpu' or 'cuda[:N]', got {dev!r}")
        if self.schedule_policy not in ("lpm", "fcfs"):
            raise ConfigError(
                f"EngineConfig.schedule_policy must be 'lpm' or 'fcfs', got {self.schedule_policy!r}"
            )
        if self.max_model_len is not None and (
            not isinstance(self.max_model_len, int) or self.max_model_len < 2
        ):
            raise ConfigError(f"EngineConfig.max_model_len must be an int >= 2, got {self.max_model_len!r}")
        if not 0.0 < self.kv_memory_fraction <= 0.98:
            raise ConfigError(
                f"EngineConfig.kv_memory_fraction must be in (0, 0.98], got {self.kv_memory_fraction!r}"
            )
        for name in ("page_size", "max_batch_tokens", "chunked_prefill_tokens",
                     "max_running_requests") + (("max_kv_tokens",) if self.max_kv_tokens else ()):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"EngineConfig.{name} must be an int >= 1, got {value!r}")
        if self.max_kv_tokens is not None and self.max_kv_tokens < self.page_size:
            raise ConfigError("EngineConfig.max_kv_tokens must hold at least one page")

    @classmethod
    def from_kwargs(cls, model: str | None = None, **kwargs) -> "EngineConfig":
        """Build a config from ``Engine(...)`` keywords.

        Raises:
            ConfigError: an unknown keyword (named in the message) or an invalid value.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise ConfigError(f"unknown engine setting(s) {unknown}; known: {sorted(names)}")
        return cls(model=model, **kwargs)

    def resolved(self) -> "EngineConfig":
        """Return a copy with ``"auto"`` device and dtype resolved for this machine."""
        device = self.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = self.dtype
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        return dataclasses.replace(self, device=device, dtype=dtype)

    @property
    def torch_dtype(self) -> torch.dtype:
        """The compute dtype as a ``torch.dtype`` (call on a resolved config)."""
        return _DTYPES[self.resolved().dtype]
