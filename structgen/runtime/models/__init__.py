"""Model architectures over the paged KV pool, and the registry that names them.

Add an architecture by registering its class under the names transformers
(``config.architectures``) and GGUF (``general.architecture``) use.
"""

from __future__ import annotations

import importlib

from structgen.errors import ModelLoadError

__all__ = ["MODEL_REGISTRY", "get_model_class", "supported_architectures"]

# architecture name -> "module:Class", imported lazily
MODEL_REGISTRY: dict[str, str] = {
    "LlamaForCausalLM": "structgen.runtime.models.llama:LlamaForCausalLM",
    "llama": "structgen.runtime.models.llama:LlamaForCausalLM",
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
            f"unsupported model architecture {arch!r}; supported: {', '.join(supported_architectures())}"
        )
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
