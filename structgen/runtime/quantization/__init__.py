"""Weight-only quantization: int8 per channel, int4 group-wise, native GGUF Q8_0/Q4_0/Q4_1;
MoE experts quantized per expert (:class:`QuantFusedExperts`).

``quantize_model(model, "int8" | "int4")`` quantizes a loaded float model in place;
the GGUF loader builds :class:`QuantLinear`/:class:`QuantEmbedding` straight from a
file's blocks (``load_model(path, quantization="gguf")``).
"""

from __future__ import annotations

from structgen.runtime.quantization.apply import (
    QUANTIZATION_METHODS,
    check_quantization,
    quantize_model,
)
from structgen.runtime.quantization.experts import QuantFusedExperts
from structgen.runtime.quantization.linear import (
    QuantEmbedding,
    QuantLinear,
    apply_activation_dtype,
    int4_matmul,
    int8_matmul,
)

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
