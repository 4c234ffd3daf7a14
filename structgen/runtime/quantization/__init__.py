"""Weight-only quantization: int8 per channel, int4 group-wise, native GGUF Q8_0/Q4_0/Q4_1;
MoE experts quantized per expert (:class:`QuantFusedExperts`).

``quantize_model(model, "int8" | "int4")`` quantizes a loaded float model in place;
the GGUF loader builds :class:`QuantLinear`/:class:`QuantEmbedding` straight from a
file's blocks (``load_model(path, quantization="gguf")``).

The method names and their check (``methods.py``) are torch-free and imported here; the
modules (torch) are imported on first use of their names, so ``EngineConfig`` can check
its ``quantization`` without importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from structgen.runtime.quantization.methods import QUANTIZATION_METHODS, check_quantization

__all__ = [
    "QUANTIZATION_METHODS",
    "check_quantization",
    "quantize_model",
    "QuantLinear",
    "QuantEmbedding",
    "QuantFusedExperts",
    "int8_matmul",
    "int4_matmul",
    "apply_activation_dtype",
]

_LAZY = {
    "quantize_model": "apply",
    "QuantFusedExperts": "experts",
    "QuantLinear": "linear",
    "QuantEmbedding": "linear",
    "apply_activation_dtype": "linear",
    "int4_matmul": "linear",
    "int8_matmul": "linear",
}


def __getattr__(name: str) -> Any:
    """The torch modules' names, imported on first use."""
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
