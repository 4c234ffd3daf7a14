"""The one adapter between structgen's kernels and Triton (optional dependency).

Every kernel file imports ``triton``/``tl``/``jit`` from here, so a missing Triton
only disables the Triton backends (``HAS_TRITON`` is False and ``backend="auto"``
falls back to the torch references) instead of breaking ``import structgen``.

Triton compiles only for a GPU; on a machine without CUDA its kernels can only run in
Triton's interpreter, which must be chosen before ``triton`` is first imported (Triton's
own library functions, ``tl.sum``, ``tl.cdiv``..., are decorated at import). So without
CUDA this module imports Triton only when ``TRITON_INTERPRET`` was set before it was first
imported (tests and ``benchmarks/gpu_bench.py --smoke`` set it) or Triton is already
imported; otherwise ``HAS_TRITON`` is False and the torch references run. It sets
``TRITON_INTERPRET=1`` when CUDA is unavailable and nobody set it, so a Triton imported
later by anyone runs interpreted. Forcing ``backend="triton"`` on CPU tensors runs
interpreted (slowly: tests only).
"""

from __future__ import annotations

import sys

import torch

from structgen.env import is_set, set_default

_HAS_CUDA = torch.cuda.is_available()
# without CUDA, Triton's kernels can only run interpreted: import it only when that was asked
# for (TRITON_INTERPRET set before this first import, as tests do) or someone imported it
_WANTED = _HAS_CUDA or "triton" in sys.modules or is_set("TRITON_INTERPRET")
if "triton" not in sys.modules and not _HAS_CUDA:
    set_default("TRITON_INTERPRET", "1")

triton = tl = None
HAS_TRITON = False
if _WANTED:
    try:  # the only import shim of the package's kernels
        import triton
        import triton.language as tl

        HAS_TRITON = True
    except ImportError:  # pragma: no cover - exercised only without triton
        triton = tl = None

__all__ = [
    "HAS_TRITON",
    "cdiv",
    "check",
    "check_float",
    "check_index",
    "check_paged_attention",
    "check_same_device",
    "dot_in_f32",
    "is_interpreting",
    "jit",
    "launch",
    "next_pow2",
    "resolve_backend",
    "tl",
    "triton",
    "window_or_max",
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
        if not _WANTED:
            raise ValueError(
                "backend='triton' without CUDA runs Triton's interpreter: set TRITON_INTERPRET=1 "
                "before structgen's kernels are first imported"
            )
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


_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def check_float(name: str, t: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``t`` is float16, bfloat16 or float32 (the kernels' dtypes)."""
    check(t.dtype in _FLOATS, f"{name} must be float16/bfloat16/float32, got {t.dtype}")


def check_index(**tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` unless every named tensor holds int32 or int64 indices."""
    for name, t in tensors.items():
        check(t.dtype in (torch.int32, torch.int64), f"{name} must be int32/int64, got {t.dtype}")


def check_same_device(**tensors: torch.Tensor | None) -> None:
    """Raise ``ValueError`` naming each tensor's device unless all (non-None) share one."""
    devs = {name: t.device for name, t in tensors.items() if t is not None}
    check(len(set(devs.values())) <= 1, f"all tensors must be on one device, got {devs}")


def check_paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    q_name: str,
) -> None:
    """Shared checks of the paged attention launchers (decode and extend).

    Args:
        q: ``[rows, heads, d]`` queries.
        k_cache: ``[num_pages, page_size, kv_heads, d]``, ``heads % kv_heads == 0``.
        v_cache: the same shape as ``k_cache``.
        page_table: ``[B, max_pages]`` int32/int64, rows contiguous.
        q_name: the name of ``q``'s first axis in messages (``"B"``, ``"T"``).

    Raises:
        ValueError: the first mismatch found (shape, GQA ratio, dtype, layout).
    """
    check(q.dim() == 3, f"q must be [{q_name}, heads, d], got {tuple(q.shape)}")
    check(
        k_cache.dim() == 4 and k_cache.shape == v_cache.shape,
        f"caches must be [pages, page_size, kv_heads, d] and equal, got {tuple(k_cache.shape)}, "
        f"{tuple(v_cache.shape)}",
    )
    heads, d = q.shape[1], q.shape[2]
    check(k_cache.shape[3] == d, f"head_dim mismatch: q {d}, cache {k_cache.shape[3]}")
    check(
        heads % k_cache.shape[2] == 0,
        f"heads {heads} not a multiple of kv_heads {k_cache.shape[2]}",
    )
    check(
        q.dtype == k_cache.dtype == v_cache.dtype,
        f"dtype mismatch: q {q.dtype}, cache {k_cache.dtype}/{v_cache.dtype}",
    )
    check_float("q", q)
    check(
        page_table.dim() == 2, f"page_table must be [B, max_pages], got {tuple(page_table.shape)}"
    )
    check_index(page_table=page_table)
    check(
        q.stride(2) == 1 and k_cache.stride(3) == 1 and v_cache.stride(3) == 1,
        "head_dim must be contiguous",
    )
    check(page_table.stride(1) == 1, "page_table rows must be contiguous")


_NO_WINDOW = 1 << 30  # "no sliding window": wider than any context


def window_or_max(sliding_window: int | None) -> int:
    """The kernels' window argument: ``sliding_window``, or 2**30 (no window) for None.

    Raises:
        ValueError: a window < 1.
    """
    if sliding_window is None:
        return _NO_WINDOW
    check(int(sliding_window) >= 1, f"sliding_window must be >= 1 or None, got {sliding_window!r}")
    return int(sliding_window)
