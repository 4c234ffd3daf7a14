"""GGUF K-quant blocks kept quantized under ``quantization="gguf"``, where a structgen layout
holds them exactly.

* Q6_K (``ql[128]``, ``qh[64]``, ``scales[16]`` int8, ``d`` fp16 per 256 weights; ggml
  ``block_q6_K``): weight ``i`` of a block is ``(d * scales[i // 16]) * (q6_i - 32)``, so it
  becomes our int8 layout with group 16, ``q = q6 - 32`` in -32..31 and float32 scales
  ``d * scales[g]`` (the product ggml's ``dequantize_row_q6_K`` forms, in float32): the
  dequantized weight is ggml's to the bit, and the C int8 kernel takes float32 ``[N, K/16]``
  scales.
* Q4_K has no exact form in our int4 layouts: its per-32 scale ``d * sc`` and min
  ``dmin * m`` (fp16 times a 6-bit integer) need up to 17 mantissa bits, while the int4 kernels
  take fp16 scales and mins. :func:`kquant_module` returns None for it and the loader
  dequantizes the tensor into a float weight (exactly, :mod:`structgen.runtime.loader.dequant`).

The Q6_K bit layout (ggml ``dequantize_row_q6_K``): each half-block of 128 weights reads
``ql[64 n:]``, ``qh[32 n:]``; for ``l < 32`` weights ``l``, ``l+32``, ``l+64``, ``l+96`` take
the low nibble of ``ql[l]``, of ``ql[l+32]``, the high nibble of ``ql[l]``, of ``ql[l+32]``,
with bits 0-1, 2-3, 4-5, 6-7 of ``qh[l]`` above them.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from structgen.runtime.quantization.linear import QuantEmbedding, QuantLinear

__all__ = ["KQUANT_NATIVE_TYPES", "repack_q6_k", "kquant_module"]

# K-quant types kept quantized (the others are dequantized at load)
KQUANT_NATIVE_TYPES = ("Q6_K",)
_Q6_K_BYTES = 210


def repack_q6_k(raw: np.ndarray, shape: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q int8 [N, K] in -32..31, scales float32 [N, K/16])`` of a Q6_K tensor.

    Args:
        raw: the tensor's bytes (uint8; may be a read-only memory map, only read).
        shape: its numpy shape ``[N, K]``, ``K`` a multiple of 256.

    Returns:
        New tensors; ``scales[:, g, None] * q[:, 16 g : 16 g + 16]`` is ggml's dequantized
        weight, bit for bit.

    Raises:
        ValueError: ``K`` is not a multiple of 256 or ``raw`` has the wrong size.
    """
    n, k = shape
    if k % 256 or raw.size != n * (k // 256) * _Q6_K_BYTES:
        raise ValueError(f"Q6_K tensor of shape {tuple(shape)} does not match {raw.size} bytes")
    with warnings.catch_warnings():  # read-only memory map: only read, copied below
        warnings.filterwarnings("ignore", message=".*not writable.*")
        b = torch.from_numpy(raw).view(n, k // 256, _Q6_K_BYTES)  # [N, nb, 210]
    ql = b[..., :128].reshape(n, -1, 2, 64)  # [N, nb, half, 64]
    qh = b[..., 128:192].reshape(n, -1, 2, 32)  # [N, nb, half, 32]
    lo, hi = ql[..., :32], ql[..., 32:]
    parts = (
        (lo & 0x0F) | ((qh & 3) << 4),
        (hi & 0x0F) | (((qh >> 2) & 3) << 4),
        (lo >> 4) | (((qh >> 4) & 3) << 4),
        (hi >> 4) | (((qh >> 6) & 3) << 4),
    )
    q6 = torch.stack(parts, dim=-2)  # [N, nb, half, 4, 32]: weight 128 half + 32 part + l
    q = (q6.to(torch.int16) - 32).to(torch.int8).reshape(n, k)
    sc = b[..., 192:208].contiguous().view(torch.int8).float()  # [N, nb, 16]
    d = b[..., 208:210].contiguous().view(torch.float16).float()  # [N, nb, 1]
    return q, (d * sc).reshape(n, k // 16)


def kquant_module(
    raw: np.ndarray,
    type_name: str,
    shape: tuple[int, ...],
    rows: torch.Tensor | None,
    embedding: bool,
    dtype: torch.dtype,
    bias: torch.Tensor | None = None,
):
    """A quantized module holding a K-quant tensor exactly, or None if it must be dequantized.

    Args:
        raw: the tensor's bytes.
        type_name: its ggml type.
        shape: its numpy shape ``[N, K]``.
        rows: optional output-row permutation (llama.cpp's q/k rotary order, undone).
        embedding: build a :class:`QuantEmbedding` (also the tied output layer) instead of a
            linear.
        dtype: compute dtype of an embedding's looked-up rows.
        bias: the linear's bias, if any.

    Returns:
        A :class:`QuantLinear` (int8, group 16, float32 scales) or :class:`QuantEmbedding`
        for Q6_K; None for any other type or shape (Q4_K: see the module docstring).
    """
    if type_name not in KQUANT_NATIVE_TYPES or len(shape) != 2 or shape[1] % 256:
        return None
    q, s = repack_q6_k(raw, shape)
    if rows is not None:
        q, s = q[rows], s[rows]
    return QuantEmbedding(q, s, dtype) if embedding else QuantLinear.from_int8(q, s, bias)
