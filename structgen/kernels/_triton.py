"""The one adapter between structgen's kernels and Triton (optional dependency).

Every kernel file imports ``triton``/``tl``/``jit`` from here, so a missing Triton
only disables the Triton backends (``HAS_TRITON`` is False and ``backend="auto"``
falls back to the torch references) instead of breaking ``import structgen``.

Triton compiles only for a GPU; on a machine without CUDA its kernels can only run in
Triton's interpreter, which must be chosen before ``triton`` is first imported (Triton's
own library functions, ``tl.sum``, ``tl.cdiv``..., are decorated at import). So this
module sets ``TRITON_INTERPRET=1`` when CUDA is unavailable and nobody set it, before
importing Triton. Forcing ``backend="triton"`` on CPU tensors then runs interpreted
(slowly: tests and ``benchmarks/gpu_bench.py --smoke`` only).
"""

from __future__ import annotations

import os
import sys

import torch

if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

try:  # the only import shim of the package's kernels
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised only without triton
    triton = None
    tl = None
    HAS_TRITON = False

__all__ = [
    "HAS_TRITON",
    "triton",
    "tl",
    "jit",
    "launch",
    "is_interpreting",
    "resolve_backend",
    "next_pow2",
    "cdiv",
    "check",
    "dot_in_f32",
]

_BACKENDS = ("auto", "triton", "torch")


def jit(fn):
    """``triton.jit`` when Triton is importable; otherwise the plain function (never launched)."""
    return triton.jit(fn) if HAS_TRITON else fn


def resolve_backend(backend: str, device: torch.device) -> str:
    """Resolve ``"auto"`` to ``"triton"`` on CUDA (when importable) and ``"torch"`` elsewhere.

    Raises:
        ValueError: unknown backend name, or ``"triton"`` forced without Triton installed.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "triton" if HAS_TRITON and device.type == "cuda" else "torch"
    if backend == "triton" and not HAS_TRITON:
        raise ValueError("backend='triton' requested but triton is not importable")
    return backend


def launch(kernel, grid: tuple[int, ...], device: torch.device, *args, **kwargs) -> None:
    """Launch ``kernel[grid](*args, **kwargs)``.

    Raises:
        RuntimeError: CPU tensors while Triton is not in interpreter mode.
    """
    if device.type != "cuda" and not is_interpreting():
        raise RuntimeError(
            "Triton kernels on CPU tensors need TRITON_INTERPRET=1 set before triton is imported"
        )
    kernel[grid](*args, **kwargs)


def is_interpreting() -> bool:
    """Whether Triton was imported in interpreter mode (its library functions are interpreted)."""
    if not HAS_TRITON:
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.cdiv, InterpretedFunction)


def dot_in_f32(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether ``tl.dot`` operands must be upcast: the interpreter mis-computes bf16 dots."""
    return device.type != "cuda" and dtype == torch.bfloat16


def next_pow2(n: int) -> int:
    """Smallest power of two >= ``max(n, 1)``."""
    return 1 << max(int(n) - 1, 0).bit_length()


def cdiv(a: int, b: int) -> int:
    """Ceiling division of host ints."""
    return -(-int(a) // int(b))


def check(cond: bool, msg: str) -> None:
    """Raise ``ValueError(msg)`` unless ``cond`` (launcher input validation)."""
    if not cond:
        raise ValueError(msg)
