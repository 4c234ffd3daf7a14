"""Kernels: each op's one plain-torch reference, beside its Triton kernel where it has one.

The references are what every implementation of the op is tested against, the model's C
kernels (``structgen.runtime.cpu``) included; paged attention's is
``paged_attention.paged_attention_ref`` (its Triton kernels: ``paged_decode_attention`` and
``extend_attention``). ``backend="auto"`` picks Triton on CUDA and the torch reference
elsewhere; the model reaches these kernels through its own dispatch
(``structgen.runtime.models.attention.use_triton``). Modules are
imported on use (so that importing the package does not import Triton):
``from structgen.kernels.rms_norm import rms_norm``.
"""

__all__ = [
    "apply_token_bitmask",
    "extend_attention",
    "fused_moe",
    "paged_attention",
    "paged_decode_attention",
    "quant_matmul",
    "rms_norm",
    "rotary",
    "store_kv",
]
