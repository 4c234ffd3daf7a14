"""``linear``: ``F.linear`` with small batches on CPU routed to structgen's C kernel.

A batch-1 decode step is a chain of matrix-vector products over weights far larger than
the cache, so it runs at memory bandwidth. torch's CPU ``F.linear`` computes one row
(``M = 1``) with a single-threaded GEMV and 2-8 rows (speculative verification,
jump-forward runs) with a GEMM that packs the weight first; ``csrc/densekernel.c`` streams
the weight once for all rows and splits its rows over the cores, with a register-blocked
loop per row count so that 2-8 rows cost little more than one. bf16 activations go in and
bf16 results come out of the kernel itself (fp32 accumulation, one rounding to nearest even
per output), so a bf16 linear is one C call with no conversion op around it. Where the extension is
missing (a build without a C compiler), or for other shapes, dtypes and devices, this is
``F.linear`` exactly.

The extension's OpenMP calls resolve to the OpenMP runtime torch already loaded (one
thread pool), not a second one; a call uses ``threads.kernel_threads()`` threads (torch's count
unless the calling thread set a ``kernel_thread_limit``).

:func:`set_enabled` turns the kernel off (an ``Engine`` applies ``structgen.env``'s
``dense_kernel`` setting; on by default).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from structgen.runtime.cpu.threads import kernel_threads

__all__ = ["linear", "kernel_available", "set_enabled", "MAX_ROWS"]

MAX_ROWS = 8  # rows of x the kernel takes (csrc/densekernel.c MAX_M)

try:  # built by setup.py; optional
    from structgen.runtime.cpu import _densekernel as _ext
except ImportError:  # pragma: no cover - depends on the build
    _ext = None

MISSING_WARNING = (
    "structgen's dense CPU kernel is not built (no C compiler at install?): "
    "small-batch matmuls use torch's F.linear"
)
_ENABLED = True  # set_enabled (tests patch it)


def set_enabled(enabled: bool) -> None:
    """Turn the kernel on (the default) or off for the process."""
    global _ENABLED
    _ENABLED = bool(enabled)


def kernel_available() -> bool:
    """True when the C kernel is built and not turned off (:func:`set_enabled`)."""
    return _ext is not None and _ENABLED


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias``, as ``F.linear``.

    Args:
        x: ``[M, K]`` activations.
        weight: ``[N, K]``.
        bias: ``[N]`` or None.

    Returns:
        ``[M, N]`` in ``x``'s dtype. On CPU with ``1 <= M <= 8``, ``x``, ``weight`` and ``bias``
        all fp32 or all bf16, ``x`` with unit stride along K (any row stride), contiguous
        ``weight`` and ``bias``: the C kernel, one call and no torch op around it (fp32
        accumulation; bf16 results are the fp32 sum plus bias rounded once to nearest even,
        i.e. ``F.linear`` of the fp32 values cast to bf16, up to summation order); otherwise
        ``F.linear``.

    Raises:
        what ``F.linear`` raises for mismatched shapes or dtypes.
    """
    dt = x.dtype
    if (  # explicit checks, cheapest first: this runs for every linear of every decode step
        _ext is None
        or not _ENABLED
        or (dt is not torch.float32 and dt is not torch.bfloat16)
        or weight.dtype is not dt
        or x.dim() != 2
        or not 1 <= x.shape[0] <= MAX_ROWS
        or weight.dim() != 2
        or x.shape[1] != weight.shape[1]
        or weight.numel() == 0
        or x.stride(1) != 1
        or (x.shape[0] > 1 and x.stride(0) < x.shape[1])  # overlapping rows (expand)
        or not x.is_cpu
        or not weight.is_cpu
        or not weight.is_contiguous()
        or (
            bias is not None
            and (
                bias.dtype is not dt
                or bias.dim() != 1
                or bias.shape[0] != weight.shape[0]
                or not bias.is_contiguous()
                or not bias.is_cpu
            )
        )
    ):
        return F.linear(x, weight, bias)
    m, k = x.shape
    n = weight.shape[0]
    y = torch.empty(m, n, dtype=dt)
    _ext.dense_mm(
        x.data_ptr(),
        x.stride(0) if m > 1 else k,
        weight.data_ptr(),
        0 if dt is torch.float32 else 1,
        0 if bias is None else bias.data_ptr(),
        y.data_ptr(),
        m,
        n,
        k,
        kernel_threads(),
    )
    return y
