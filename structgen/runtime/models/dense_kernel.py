"""``linear``: ``F.linear`` with small batches on CPU routed to structgen's C kernel.

A batch-1 decode step is a chain of matrix-vector products over weights far larger than
the cache, so it runs at memory bandwidth. torch's CPU ``F.linear`` computes one row
(``M = 1``) with a single-threaded GEMV and 2-8 rows (speculative verification,
jump-forward runs) with a GEMM that packs the weight first; ``csrc/densekernel.c`` streams
the weight once for all rows and splits its rows over the cores, with a register-blocked
loop per row count so that 2-8 rows cost little more than one. Where the extension is
missing (a build without a C compiler), or for other shapes, dtypes and devices, this is
``F.linear`` exactly.

The extension's OpenMP calls resolve to the OpenMP runtime torch already loaded (one
thread pool, sized by ``torch.get_num_threads()``), not a second one.

Set ``STRUCTGEN_DENSE_KERNEL=0`` to turn the kernel off (``1``, the default, uses it).
"""

from __future__ import annotations

import os
import warnings

import torch
import torch.nn.functional as F

__all__ = ["linear", "kernel_available", "MAX_ROWS"]

MAX_ROWS = 8  # rows of x the kernel takes (csrc/densekernel.c MAX_M)

try:  # built by setup.py; optional
    from structgen.runtime.models import _densekernel as _ext
except ImportError:  # pragma: no cover - depends on the build
    _ext = None
    if os.environ.get("STRUCTGEN_DENSE_KERNEL", "1") != "0":
        warnings.warn("structgen's dense CPU kernel is not built (no C compiler at install?): "
                      "small-batch matmuls use torch's F.linear", RuntimeWarning, stacklevel=2)

_ENABLED = os.environ.get("STRUCTGEN_DENSE_KERNEL", "1") != "0"


def kernel_available() -> bool:
    """True when the C kernel is built and not turned off by ``STRUCTGEN_DENSE_KERNEL=0``."""
    return _ext is not None and _ENABLED


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias``, as ``F.linear``.

    Args:
        x: ``[M, K]`` activations.
        weight: ``[N, K]``.
        bias: ``[N]`` or None.

    Returns:
        ``[M, N]`` in ``x``'s dtype. On CPU with ``1 <= M <= 8``, fp32 or bf16 ``x`` and
        ``weight`` of the same dtype, contiguous ``weight``: the C kernel (fp32
        accumulation, equal to ``F.linear`` up to summation order); otherwise ``F.linear``.

    Raises:
        what ``F.linear`` raises for mismatched shapes.
    """
    dt = x.dtype
    if (
        _ext is None
        or not _ENABLED
        or x.dim() != 2
        or not 1 <= x.shape[0] <= MAX_ROWS
        or not x.is_cpu
        or (dt is not torch.float32 and dt is not torch.bfloat16)
        or weight.dtype is not dt
        or weight.dim() != 2
        or x.shape[1] != weight.shape[1]
        or not weight.is_contiguous()
        or (bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]))
    ):
        return F.linear(x, weight, bias)
    m, k = x.shape
    n = weight.shape[0]
    xf = x if dt is torch.float32 and x.is_contiguous() else x.float().contiguous()  # [M, K] fp32
    bf = None if bias is None else bias.float().contiguous()
    y = torch.empty(m, n, dtype=torch.float32)
    _ext.dense_mm(xf.data_ptr(), weight.data_ptr(), 0 if dt is torch.float32 else 1,
                  0 if bf is None else bf.data_ptr(), y.data_ptr(), m, n, k, torch.get_num_threads())
    return y if dt is torch.float32 else y.to(dt)
