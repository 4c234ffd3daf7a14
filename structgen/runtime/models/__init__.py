"""Model architectures over the paged KV pool, and the registry that names them.

Add an architecture by registering its class under the names transformers
(``config.architectures``) and GGUF (``general.architecture``) use.
"""

from __future__ import annotations

import importlib

from structgen.errors import ModelLoadError

__all__ = ["MODEL_REGISTRY", "get_model_class", "supported_architectures", "memory_report"]

# architecture name -> "module:Class", imported lazily
_M = "structgen.runtime.models."
MODEL_REGISTRY: dict[str, str] = {
    "LlamaForCausalLM": _M + "llama:LlamaForCausalLM",
    "llama": _M + "llama:LlamaForCausalLM",
    "MistralForCausalLM": _M + "mistral:MistralForCausalLM",
    "mistral": _M + "mistral:MistralForCausalLM",
    "Qwen2ForCausalLM": _M + "qwen2:Qwen2ForCausalLM",
    "qwen2": _M + "qwen2:Qwen2ForCausalLM",
    "Qwen3ForCausalLM": _M + "qwen3:Qwen3ForCausalLM",
    "qwen3": _M + "qwen3:Qwen3ForCausalLM",
    "MixtralForCausalLM": _M + "mixtral:MixtralForCausalLM",
    "mixtral": _M + "mixtral:MixtralForCausalLM",
    "Qwen2MoeForCausalLM": _M + "qwen2_moe:Qwen2MoeForCausalLM",
    "qwen2_moe": _M + "qwen2_moe:Qwen2MoeForCausalLM",
    "qwen2moe": _M + "qwen2_moe:Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM": _M + "qwen3_moe:Qwen3MoeForCausalLM",
    "qwen3_moe": _M + "qwen3_moe:Qwen3MoeForCausalLM",
    "qwen3moe": _M + "qwen3_moe:Qwen3MoeForCausalLM",
    "DeepseekV3ForCausalLM": _M + "deepseek_v3:DeepseekV3ForCausalLM",
    "deepseek_v3": _M + "deepseek_v3:DeepseekV3ForCausalLM",
}


def supported_architectures() -> list[str]:
    """Every registered architecture name."""
    return sorted(MODEL_REGISTRY)


def get_model_class(arch: str):
    """The model class registered for ``arch``.

    Raises:
        ModelLoadError: the architecture is not registered (the message names it).
    """
    target = MODEL_REGISTRY.get(arch)
    if target is None:
        raise ModelLoadError(
            f"unsupported model architecture {arch!r}; supported: "
            f"{', '.join(supported_architectures())}"
        )
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def memory_report(model) -> dict[str, int]:
    """Bytes the model's weights hold in memory (quantized weights counted as stored).

    Counts every parameter and persistent buffer once (tied tensors once), i.e. what
    ``model.state_dict()`` holds; excludes the KV pool and RoPE tables.

    Returns:
        ``{"weight_bytes": int}``.
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in model.state_dict().values():
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return {"weight_bytes": total}
