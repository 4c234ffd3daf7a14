"""Kernels: each Triton kernel beside its plain-torch reference of the same signature.

``backend="auto"`` picks Triton on CUDA and the torch reference elsewhere. Modules are
imported on use (importing Triton costs ~0.6 s): ``from structgen.kernels.rms_norm import
rms_norm``.
"""

__all__ = [
    "apply_token_bitmask",
    "extend_attention",
    "fused_moe",
    "paged_decode_attention",
    "quant_matmul",
    "rms_norm",
    "rotary",
    "store_kv",
]
