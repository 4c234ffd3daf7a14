"""Vectorised dequantization of ggml tensor types to float32 (torch, multi-threaded).

Block layouts follow ggml (``ggml-common.h``): a block holds 32 weights along the
row (the input dimension of a linear). Types without a fast path here go through
``gguf.quants.dequantize`` (numpy, slower but complete).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

__all__ = ["dequantize"]


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
    raw: np.ndarray, type_name: str, type_id: int, shape: tuple[int, ...]
) -> torch.Tensor:
    """Float32 tensor of ``shape`` (numpy order) from the tensor's raw bytes ``raw`` (uint8).

    ``raw`` may be a read-only view of a memory map: it is only read, and the result never aliases
    it.
    """
    with warnings.catch_warnings():
        # torch warns about wrapping read-only arrays; we never write them
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return _dequantize(raw, type_name, type_id, shape)


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
