"""GGUF K-quant blocks kept quantized under ``quantization="gguf"``, where a structgen layout
holds them exactly.

* Q6_K (``ql[128]``, ``qh[64]``, ``scales[16]`` int8, ``d`` fp16 per 256 weights; ggml
  ``block_q6_K``): weight ``i`` of a block is ``(d * scales[i // 16]) * (q6_i - 32)``, so it
  becomes our int8 layout with group 16, ``q = q6 - 32`` in -32..31 and float32 scales
  ``d * scales[g]`` (the product ggml's ``dequantize_row_q6_K`` forms, in float32): the
  dequantized weight is ggml's to the bit, and the C int8 kernel takes float32 ``[N, K/16]``
  scales.
* Q4_K (``d``, ``dmin`` fp16, ``scales[12]`` packed 6-bit ``sc``/``m``, ``qs[128]`` per 256
  weights; ggml ``block_q4_K``): weight ``l`` of sub-block ``j`` (32 weights) is
  ``(d * sc_j) * q - dmin * m_j``, so it becomes our int4 "rows" layout with group 32 and
  float32 scales ``d * sc_j`` and mins ``-(dmin * m_j)`` (the products ggml's
  ``dequantize_row_q4_K`` forms, in float32; they need up to 17 mantissa bits, so fp16 would
  not hold them): ``scale * q + min`` is ggml's ``d1 * q - m1`` to the bit, and the C int4
  kernel takes float32 ``[N, K/32]`` scales and mins. A Q4_K embedding is dequantized at load
  (:class:`QuantEmbedding` is int8 only).

The Q4_K bit layout (ggml ``dequantize_row_q4_K``, ``get_scale_min_k4``): the 64 weights
``64 i .. 64 i + 63`` read ``qs[32 i : 32 i + 32]``, sub-block ``2 i`` the low nibbles, ``2 i + 1``
the high ones (weight ``l`` of a sub-block in byte ``l``: unlike the rows layout's ``l`` /
``l + 16`` pairing, hence a repack through :func:`~.formats.pack_int4_rows`); ``sc_j``, ``m_j``
are ``scales[j] & 63``, ``scales[j + 4] & 63`` for ``j < 4``, else ``(scales[j + 4] & 15) |
(scales[j - 4] >> 6) << 4`` and ``(scales[j + 4] >> 4) | (scales[j] >> 6) << 4``.

The Q6_K bit layout (ggml ``dequantize_row_q6_K``): each half-block of 128 weights reads
``ql[64 n:]``, ``qh[32 n:]``; for ``l < 32`` weights ``l``, ``l+32``, ``l+64``, ``l+96`` take
the low nibble of ``ql[l]``, of ``ql[l+32]``, the high nibble of ``ql[l]``, of ``ql[l+32]``,
with bits 0-1, 2-3, 4-5, 6-7 of ``qh[l]`` above them.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from structgen.runtime.quantization.formats import pack_int4_rows
from structgen.runtime.quantization.linear import QuantEmbedding, QuantLinear

__all__ = ["KQUANT_NATIVE_TYPES", "repack_q4_k", "repack_q6_k", "kquant_module"]

# K-quant types kept quantized (the others are dequantized at load)
KQUANT_NATIVE_TYPES = ("Q4_K", "Q6_K")
_Q6_K_BYTES = 210
_Q4_K_BYTES = 144


def _superblocks(raw: np.ndarray, shape: tuple[int, int], size: int, name: str) -> torch.Tensor:
    """``raw`` as uint8 ``[N, K/256, size]`` (one row of 256-weight super-blocks per output
    row) without a copy (a read-only map is only read).

    Raises:
        ValueError: ``K`` is not a multiple of 256 or ``raw`` has the wrong size.
    """
    n, k = shape
    if k % 256 or raw.size != n * (k // 256) * size:
        raise ValueError(f"{name} tensor of shape {tuple(shape)} does not match {raw.size} bytes")
    with warnings.catch_warnings():  # read-only memory map: only read, copied by the callers
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(raw).view(n, k // 256, size)


def repack_q4_k(
    raw: np.ndarray, shape: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(packed uint8 [N, K/2], scales float32 [N, K/32], mins float32 [N, K/32])`` of a Q4_K
    tensor, ``packed`` in :func:`~.formats.pack_int4_rows` layout.

    Args:
        raw: the tensor's bytes (uint8; may be a read-only memory map, only read).
        shape: its numpy shape ``[N, K]``, ``K`` a multiple of 256.

    Returns:
        New tensors; ``scales[:, g, None] * q[:, 32 g : 32 g + 32] + mins[:, g, None]`` (``q``
        the unpacked codes) is ggml's dequantized weight, bit for bit.

    Raises:
        ValueError: ``K`` is not a multiple of 256 or ``raw`` has the wrong size.
    """
    n, k = shape
    b = _superblocks(raw, shape, _Q4_K_BYTES, "Q4_K")  # [N, nb, 144]
    d = b[..., 0:2].contiguous().view(torch.float16).float()  # [N, nb, 1]
    dmin = b[..., 2:4].contiguous().view(torch.float16).float()
    s = b[..., 4:16]  # [N, nb, 12]
    lo, mid, hi = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = torch.cat((lo & 63, (hi & 0x0F) | ((lo >> 6) << 4)), dim=-1)  # [N, nb, 8]
    mn = torch.cat((mid & 63, (hi >> 4) | ((mid >> 6) << 4)), dim=-1)
    qs = b[..., 16:].reshape(n, -1, 4, 1, 32)  # [N, nb, chunk, 1, byte]
    q = torch.cat((qs & 0x0F, qs >> 4), dim=-2)  # [N, nb, chunk, lo/hi, 32]: sub-block 2c + h
    scales = (d * sc.float()).reshape(n, k // 32)
    mins = (dmin * mn.float()).neg_().reshape(n, k // 32)
    return pack_int4_rows(q.reshape(n, k)), scales, mins


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
    b = _superblocks(raw, shape, _Q6_K_BYTES, "Q6_K")  # [N, nb, 210]
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
        For Q6_K a :class:`QuantLinear` (int8, group 16, float32 scales) or
        :class:`QuantEmbedding`; for Q4_K a :class:`QuantLinear` (int4 "rows", group 32,
        float32 scales and mins) when the C kernel is available; None for any other type or
        shape, a Q4_K embedding, or Q4_K without the kernel.
    """
    if type_name not in KQUANT_NATIVE_TYPES or len(shape) != 2 or shape[1] % 256:
        return None
    if type_name == "Q4_K":
        from structgen.runtime.cpu import quant as cpu_quant

        if embedding or not cpu_quant.available():
            return None
        packed, s, mn = repack_q4_k(raw, shape)
        if rows is not None:
            packed, s, mn = packed[rows], s[rows], mn[rows]
        return QuantLinear.from_int4_rows(packed, s, mn, bias)
    q, s = repack_q6_k(raw, shape)
    if rows is not None:
        q, s = q[rows], s[rows]
    return QuantEmbedding(q, s, dtype) if embedding else QuantLinear.from_int8(q, s, bias)
