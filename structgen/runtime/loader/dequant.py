"""Dequantization of ggml tensor types straight into the final float tensor.

Block layouts follow ggml (``ggml-common.h``): a block holds 32 (Q4_0, Q4_1, Q8_0) or 256
(the K-quants Q4_K, Q6_K) weights along the row (the input dimension of a linear). With the
C extension (csrc/kquant.c, ``structgen.runtime.loader._kquant``) those five types are read from
the memory-mapped bytes and written once, in float32 or bfloat16, into the tensor the model
keeps, with an optional row permutation applied on the way (no intermediate copies). Without it,
Q4_0 / Q4_1 / Q8_0 take the vectorised torch path below, and every other type goes through
``gguf.quants.dequantize`` (numpy, slower but complete).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

__all__ = ["dequantize", "C_TYPES"]

try:
    from structgen.runtime.loader import _kquant
except ImportError:  # the optional C extension is not built: torch / gguf paths
    _kquant = None

# ggml types the C dequantizer decodes
C_TYPES = ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K")
_BLOCK_ELEMS = {"Q4_0": 32, "Q4_1": 32, "Q8_0": 32, "Q4_K": 256, "Q6_K": 256}


def _f16(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """Column of fp16 scales at byte ``start`` of each block -> float32 ``[nb, 1]``."""
    return blocks[:, start : start + 2].contiguous().view(torch.float16).float()


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """``[nb, 16]`` uint8 -> float32 ``[nb, 32]``: low nibbles (weights 0-15), then high ones,
    written into one new tensor (no intermediate copies).
    """
    out = torch.empty((qs.shape[0], 32), dtype=torch.float32)
    out[:, :16] = qs & 0x0F
    out[:, 16:] = qs >> 4
    return out


def _q8_0(blocks: torch.Tensor) -> torch.Tensor:
    # block: d (f16) | qs[32] (int8); x = d * q
    d = _f16(blocks, 0)
    qs = blocks[:, 2:34].contiguous().view(torch.int8).float()
    return d * qs


def _q4_1(blocks: torch.Tensor) -> torch.Tensor:
    # block: d (f16) | m (f16) | qs[16]; weight j < 16 is qs[j] & 15, weight j + 16 is qs[j] >> 4;
    # x = d*q + m
    d, m = _f16(blocks, 0), _f16(blocks, 2)
    return _nibbles(blocks[:, 4:20]).mul_(d).add_(m)


def _q4_0(blocks: torch.Tensor) -> torch.Tensor:
    # block: d (f16) | qs[16]; x = d * (q - 8)
    d = _f16(blocks, 0)
    return _nibbles(blocks[:, 2:18]).sub_(8.0).mul_(d)


_FAST = {"Q8_0": (_q8_0, 34), "Q4_1": (_q4_1, 20), "Q4_0": (_q4_0, 18)}


def dequantize(
    raw: np.ndarray,
    type_name: str,
    type_id: int,
    shape: tuple[int, ...],
    rows: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The tensor of ``shape`` (numpy order) from its raw ggml bytes.

    Args:
        raw: the tensor's bytes, uint8; may be a read-only view of a memory map (only read; the
            result never aliases it).
        type_name: its ggml type (``Q4_K``).
        type_id: its ggml type id.
        shape: numpy shape; the last dimension is the row (block) dimension.
        rows: optional int64 ``[shape[0]]`` row order: output row ``r`` is source row
            ``rows[r]`` (``w[rows]`` without a second copy).
        dtype: float dtype of the result; float32 and bfloat16 are written directly by the C
            dequantizer (bfloat16 rounded to nearest even, as ``Tensor.to`` does), other dtypes
            are cast from float32.
        out: optional contiguous tensor of ``shape`` and ``dtype`` to write into (a slice of
            a fused projection's weight: ``models.layers.FUSED_PROJECTIONS``).

    Returns:
        ``out``, or a new contiguous tensor of ``shape`` and ``dtype``, equal to ggml's
        ``dequantize_row_*`` in float32 (then cast).

    Raises:
        ValueError: ``raw`` has the wrong size for ``shape`` and ``type_name``; ``out`` is not
            a contiguous tensor of that shape and dtype.
    """
    if out is not None and (
        tuple(out.shape) != tuple(shape) or out.dtype != dtype or not out.is_contiguous()
    ):
        raise ValueError(
            f"out must be a contiguous {dtype} tensor of shape {tuple(shape)}, got "
            f"{out.dtype} {tuple(out.shape)}"
        )
    if (
        _kquant is not None
        and type_name in C_TYPES
        and dtype in (torch.float32, torch.bfloat16)
        and shape
        and shape[-1] % _BLOCK_ELEMS[type_name] == 0
    ):
        return _dequantize_c(raw, type_name, type_id, shape, rows, dtype, out)
    with warnings.catch_warnings():
        # torch warns about wrapping read-only arrays; we never write them
        warnings.filterwarnings("ignore", message=".*not writable.*")
        w = _dequantize(raw, type_name, type_id, shape)
    if rows is not None:
        w = w[rows]
    if out is not None:
        return out.copy_(w)
    return w if w.dtype == dtype else w.to(dtype)


def _dequantize_c(raw, type_name, type_id, shape, rows, dtype, out=None) -> torch.Tensor:
    from structgen.runtime.loader.gguf_file import GGML_TYPES

    _, block, block_bytes = GGML_TYPES[type_id]
    numel = int(np.prod(shape))
    if raw.dtype != np.uint8 or raw.size != numel // block * block_bytes:
        raise ValueError(
            f"{type_name} tensor of shape {tuple(shape)} needs {numel // block * block_bytes} "
            f"bytes, got {raw.size}"
        )
    raw = np.ascontiguousarray(raw)
    n_rows = numel // shape[-1]
    rows_addr = 0
    if rows is not None:
        rows = rows.to(torch.int64).contiguous()
        if rows.numel() != shape[0] or len(shape) != 2:
            raise ValueError(f"rows must give one source row per row of a 2-D {tuple(shape)}")
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= shape[0]):
            raise ValueError("rows holds an index outside the tensor")
        rows_addr = rows.data_ptr()
    if out is None:
        out = torch.empty(shape, dtype=dtype)
    _kquant.dequantize(
        type_id,
        raw.ctypes.data,
        out.data_ptr(),
        n_rows,
        shape[-1],
        rows_addr,
        dtype == torch.bfloat16,
    )
    return out


def _dequantize(
    raw: np.ndarray, type_name: str, type_id: int, shape: tuple[int, ...]
) -> torch.Tensor:
    if type_name == "F32":
        return torch.from_numpy(raw.view(np.float32).copy()).reshape(shape)
    if type_name == "F16":
        return torch.from_numpy(raw.view(np.float16)).float().reshape(shape)
    if type_name == "BF16":
        return (
            torch.from_numpy(raw.view(np.int16).copy()).view(torch.bfloat16).float().reshape(shape)
        )
    if type_name in _FAST:
        fn, bbytes = _FAST[type_name]
        blocks = torch.from_numpy(raw).view(-1, bbytes)  # [nb, block bytes], zero-copy
        return fn(blocks).reshape(shape)
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    out = gguf_dequantize(raw, GGMLQuantizationType(type_id))
    return torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32)).reshape(shape)
