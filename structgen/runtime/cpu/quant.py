"""Python side of structgen's C quantized-matmul kernel (``csrc/qkernel.c``, module ``_qkernel``).

At small batch (``M <= MAX_M`` rows of activations, i.e. decode) ``y = x @ dequant(W).T`` runs
in our AVX2/FMA kernel (scalar fallback on other CPUs) over the layouts of
:mod:`structgen.runtime.quantization.formats`: int4 "rows" (:func:`~.formats.pack_int4_rows`,
fp16 ``scales``/``mins`` ``[N, G]``, read by the kernel as their tile table
:func:`~.formats.int4_scale_tiles`) and row-major int8 (per channel or grouped, fp16 or fp32
``scales`` ``[N, G]``); int8 tiles of 16 rows (:func:`~.formats.pack_int8_tiles`, the tied
Q8_0 lm_head's copy) with int8 activations only (:func:`int8t_mm`, AMX from 5 rows).
With int8 activations (``q8``) the kernel serves every ``M`` (prefill
chunks and decode batches above ``MAX_M`` included: it re-streams the weight per 8 rows and
measured as fast as the tiles on prefill), so the Q8 arithmetic of a row never depends on the
batch; with float32 activations larger ``M`` dequantizes tiles of rows in C and calls
``F.linear`` (BLAS). Activations are computed in
float32 (bf16 / fp16 inputs are converted once), accumulation in float32, so exact results
match the dequantized-weight reference up to summation order.

The extension is built by ``pip install`` (``setup.py``); where it is missing (no compiler),
:func:`available` is False, a one-time warning is issued, and the quantized modules keep torch's
packed kernels. :func:`set_enabled` turns it off (an ``Engine`` applies ``structgen.env``'s
``qkernel`` setting; benchmarks compare both paths).
Threads: OpenMP over output rows (when built with it), ``torch.get_num_threads()`` of them unless
:func:`set_threads` says otherwise (an ``Engine`` applies ``qkernel_threads``); a calling
thread's ``threads.kernel_thread_limit`` overrides both. The extension's
libgomp.so.1 is the one torch already loaded (same soname), so there is one OpenMP pool.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from structgen.errors import KernelArgumentError
from structgen.runtime.cpu.threads import kernel_threads
from structgen.runtime.quantization.formats import int4_scale_tiles

try:  # built by setup.py; optional
    from structgen.runtime.cpu import _qkernel as _lib
except ImportError:  # pragma: no cover - depends on the build
    _lib = None

__all__ = [
    "MAX_M",
    "available",
    "int4_dequant_rows",
    "int4_linear",
    "int4_mm",
    "int4t_dequant_rows",
    "int4t_linear",
    "int4t_mm",
    "int8_linear",
    "int8_mm",
    "int8t_mm",
    "isa",
    "set_enabled",
    "set_threads",
]

# activation rows up to which the GEMV kernel is used (measured: benchmarks/bench_models.py)
MAX_M = 8
_TILE_ELEMS = 1 << 20  # fp32 weight elements dequantized at a time on the prefill path (4 MiB)
_warned = False
_ENABLED = True  # set_enabled; an Engine applies structgen.env's qkernel
_THREADS: int | None = None  # set_threads; None: torch.get_num_threads()


def _threads() -> int:
    return kernel_threads(_THREADS)


def set_threads(n: int | None) -> None:
    """Set the kernel's OpenMP thread count (>= 1), or None to follow
    ``torch.get_num_threads()`` (process-wide; a thread's ``threads.kernel_thread_limit``
    takes precedence on that thread).
    """
    global _THREADS
    _THREADS = None if n is None else max(1, int(n))


def set_enabled(enabled: bool) -> None:
    """Turn the kernel on (the default) or off for the process; quantized modules built while
    it is off keep torch's layouts and kernels.
    """
    global _ENABLED
    _ENABLED = bool(enabled)


def available() -> bool:
    """Whether the compiled kernel is importable and enabled; warns once when it is missing."""
    global _warned
    if _lib is not None and _ENABLED:
        return True
    if _lib is None and not _warned:
        _warned = True
        warnings.warn(
            "structgen's C quantized-matmul extension (_qkernel) is not built; int4/int8 CPU "
            "matmuls use torch's slower packed kernels (reinstall with a C compiler to build it)",
            RuntimeWarning,
            stacklevel=2,
        )
    return False


def isa() -> str:
    """``"avx2"``, ``"scalar"``, or ``"none"`` (extension not built)."""
    return "none" if _lib is None else _lib.isa()


def _x32(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype == torch.float32 and x.is_contiguous() else x.to(torch.float32).contiguous()


def _desc(t) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    layout = "contiguous" if t.is_contiguous() else "strided"
    return f"{t.dtype} {tuple(t.shape)} {layout} on {t.device}"


def _bad(fn: str, want: str, **args) -> KernelArgumentError:
    got = ", ".join(f"{name} {_desc(t)}" for name, t in args.items())
    return KernelArgumentError(f"{fn}: expected {want}; got {got}")


def _table(t: torch.Tensor, n: int, g: int, dtypes: tuple) -> bool:
    """``t`` is a contiguous CPU ``[n, g]`` tensor of one of ``dtypes``."""
    return (
        t.dtype in dtypes
        and t.dim() == 2
        and t.shape[0] == n
        and t.shape[1] == g
        and t.is_contiguous()
        and t.is_cpu
    )


_SCALES8 = (torch.float16, torch.float32)


def _check_int4(
    fn: str, x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group: int
) -> None:
    """Raise :class:`KernelArgumentError` unless the int4 "rows" arguments are what ``_qkernel``
    reads.
    """
    k = x.shape[-1]
    if not (
        x.dim() == 2
        and x.is_cpu
        and q.dtype is torch.uint8
        and q.dim() == 2
        and q.is_contiguous()
        and q.is_cpu
        and q.shape[1] * 2 == k
        and group > 0
        and group % 32 == 0
        and k % group == 0
        and _table(scales, q.shape[0], k // group, _SCALES8)
        and _table(mins, q.shape[0], k // group, (scales.dtype,))
    ):
        raise _bad(
            fn,
            "x [M, K] on CPU, q uint8 [N, K/2] contiguous, scales and mins both float16 or both "
            "float32 [N, K/group] contiguous, group a multiple of 32 dividing K",
            x=x,
            q=q,
            scales=scales,
            mins=mins,
            group=group,
        )


def _int4_tiles(
    fn: str, scales: torch.Tensor, mins: torch.Tensor, tiles: torch.Tensor | None
) -> torch.Tensor:
    """``tiles`` checked against ``scales`` (what ``_qkernel`` reads), or built from ``scales``
    and ``mins`` when None.
    """
    if tiles is None:
        return int4_scale_tiles(scales, mins)
    n, g = scales.shape
    if not (
        tiles.dtype is scales.dtype
        and tuple(tiles.shape) == ((n + 7) // 8, g, 2, 8)
        and tiles.is_contiguous()
        and tiles.is_cpu
    ):
        raise _bad(
            fn,
            f"tiles [ceil(N/8), K/group, 2, 8] = [{(n + 7) // 8}, {g}, 2, 8] contiguous on CPU "
            "in the dtype of scales (formats.int4_scale_tiles)",
            tiles=tiles,
            scales=scales,
        )
    return tiles


def _check_int8(fn: str, x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    """Raise :class:`KernelArgumentError` unless the row-major int8 arguments are what ``_qkernel``
    reads.
    """
    k = x.shape[-1]
    g = scales.shape[1] if scales.dim() == 2 else 0
    if not (
        x.dim() == 2
        and x.is_cpu
        and q.dtype is torch.int8
        and q.dim() == 2
        and q.is_contiguous()
        and q.is_cpu
        and q.shape[1] == k
        and g > 0
        and k % g == 0
        and (k // g) % 8 == 0
        and _table(scales, q.shape[0], g, _SCALES8)
    ):
        raise _bad(
            fn,
            "x [M, K] on CPU, q int8 [N, K] contiguous, scales float16/float32 [N, G] contiguous "
            "with K / G a multiple of 8",
            x=x,
            q=q,
            scales=scales,
        )


def int4_mm(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    mins: torch.Tensor,
    group: int,
    q8: bool = False,
    tiles: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[M, N]`` float32 ``x @ dequant(W).T`` in the C kernel, any ``M`` (re-streams W per 8 rows).

    Args:
        x: ``[M, K]`` float activations on CPU (converted to float32).
        q: uint8 ``[N, K/2]`` in :func:`~structgen.runtime.quantization.formats.pack_int4_rows`
            layout, contiguous.
        scales: fp16 or fp32 ``[N, K/group]`` contiguous (fp32: GGUF Q4_K's exact products).
        mins: ``[N, K/group]`` contiguous, the dtype of ``scales``.
        group: the inputs per scale, a multiple of 32 dividing ``K``.
        q8: quantize ``x`` to int8 per block of 32 (llama.cpp's Q8_0 activations) and use
            integer dot products (faster, relative error ~1e-3); False: exact float32.
        tiles: ``scales`` and ``mins`` as the kernel reads them,
            :func:`~structgen.runtime.quantization.formats.int4_scale_tiles` ``[ceil(N/8),
            K/group, 2, 8]`` (a module keeps its own); None: built here for this call.

    Returns:
        ``[M, N]`` float32.

    Raises:
        KernelArgumentError: an argument of the wrong shape, dtype, layout or device.
    """
    _check_int4("int4_mm", x, q, scales, mins, group)
    tiles = _int4_tiles("int4_mm", scales, mins, tiles)
    return _int4_call(_lib.int4_mm, x, q, tiles, q.shape[0], group, scales.dtype, q8)


def int4t_mm(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    mins: torch.Tensor,
    group: int,
    q8: bool = False,
    tiles: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[M, N]`` float32 ``x @ dequant(W).T`` over the int4 tile layout: 8 output columns per
    vector (csrc/qkernel_tiles.h), any ``M``; each row's result is the same float for every
    ``M``, thread count and instruction set (scalar or AVX2).

    Args:
        x: ``[M, K]`` float activations on CPU (converted to float32).
        q: uint8 ``[8 * ceil(N / 8), K / 2]`` from
            :func:`~structgen.runtime.quantization.formats.pack_int4_tiles`, contiguous.
        scales: fp16 or fp32 ``[N, K/group]`` contiguous.
        mins: ``[N, K/group]`` contiguous, the dtype of ``scales``.
        group: the inputs per scale, a multiple of 32 dividing ``K``.
        q8: int8 activations per block of 32 (as :func:`int4_mm`; integer block dots, 8 columns
            per instruction); False: exact float32.
        tiles: ``scales`` and ``mins`` as the kernel reads them (``int4_scale_tiles``); None:
            built here for this call.

    Returns:
        ``[M, N]`` float32.

    Raises:
        KernelArgumentError: an argument of the wrong shape, dtype, layout or device.
    """
    _check_int4t("int4t_mm", x, q, scales, mins, group)
    tiles = _int4_tiles("int4t_mm", scales, mins, tiles)
    return _int4_call(_lib.int4t_mm, x, q, tiles, scales.shape[0], group, scales.dtype, q8)


def _int4_call(
    fn, x: torch.Tensor, q: torch.Tensor, tiles: torch.Tensor, n: int, group: int, dtype, q8: bool
) -> torch.Tensor:
    """``[M, n]`` float32 from the checked int4 kernel ``fn`` (rows or tiles layout)."""
    x = _x32(x)
    m, k = x.shape
    y = torch.empty(m, n, dtype=torch.float32)
    fn(x.data_ptr(), q.data_ptr(), tiles.data_ptr(), y.data_ptr(), m, n, k, group,
       int(dtype == torch.float16), int(q8), _threads())  # fmt: skip
    return y


def _check_int4t(
    fn: str, x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group: int
) -> None:
    """Raise :class:`KernelArgumentError` unless the int4 tile-layout arguments are what
    ``_qkernel`` reads (``q`` ``[8 ceil(N/8), K/2]``, the rest as :func:`_check_int4`).
    """
    n = scales.shape[0] if scales.dim() == 2 else 0
    if q.dim() != 2 or q.shape[0] != 8 * ((n + 7) // 8):
        raise _bad(fn, "q [8 * ceil(N/8), K/2] (pack_int4_tiles)", q=q, scales=scales)
    _check_int4(fn, x, q[:n], scales, mins, group)  # its first N rows: [N, K/2]


def int4t_dequant_rows(
    q: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group: int, n0: int, n1: int
) -> torch.Tensor:
    """Rows ``n0:n1`` of an int4 tile-layout weight (:func:`int4t_mm`'s ``q``) as float32
    ``[n1 - n0, K]`` (C).

    Raises:
        KernelArgumentError: arguments as :func:`int4t_mm` rejects them, or not
            ``0 <= n0 <= n1 <= N``.
    """
    k = q.shape[1] * 2 if q.dim() == 2 else 0
    x = q.new_empty(0, k, dtype=torch.float32)
    _check_int4t("int4t_dequant_rows", x, q, scales, mins, group)
    if not 0 <= n0 <= n1 <= scales.shape[0]:
        raise KernelArgumentError(
            f"int4t_dequant_rows: rows {n0}:{n1} outside the weight's {scales.shape[0]} rows"
        )
    return _int4_dequant_rows(q, scales, mins, group, n0, n1, tiled=True)


def int8_mm(
    x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, q8: bool = False
) -> torch.Tensor:
    """``[M, N]`` float32 ``x @ (scales * q).T`` in the C kernel.

    Args:
        x: ``[M, K]`` float activations on CPU (converted to float32).
        q: int8 ``[N, K]`` contiguous.
        scales: fp16 or fp32 ``[N, G]`` contiguous, ``K / G`` a multiple of 8.
        q8: int8 activations (see :func:`int4_mm`); applies only where ``K / G`` is a multiple
            of 32, otherwise float32.

    Returns:
        ``[M, N]`` float32.

    Raises:
        KernelArgumentError: an argument of the wrong shape, dtype, layout or device.
    """
    _check_int8("int8_mm", x, q, scales)
    x = _x32(x)
    m, k = x.shape
    n, g = scales.shape
    y = torch.empty(m, n, dtype=torch.float32)
    _lib.int8_mm(
        x.data_ptr(),
        q.data_ptr(),
        scales.data_ptr(),
        y.data_ptr(),
        m,
        n,
        k,
        k // g,
        int(scales.dtype == torch.float16),
        int(q8 and (k // g) % 32 == 0),
        _threads(),
    )
    return y


def int8t_mm(
    x: torch.Tensor, q: torch.Tensor, scale_tiles: torch.Tensor, group: int, n: int
) -> torch.Tensor:
    """``[M, N]`` float32 ``x @ dequant(W).T`` with int8 activations over the int8 tile layout
    (csrc/qkernel_i8tiles.h): per activation row and output column, the exact int32 dot of each
    block of 32 inputs, then one fused multiply-add per block in order; the same float for every
    ``M``, thread count and path (scalar, AVX2, AVX-VNNI, AMX from 5 rows).

    Args:
        x: ``[M, K]`` float activations on CPU (converted to float32, then int8 per block of 32
            as :func:`int4_mm`'s ``q8``).
        q: int8 ``[16 * ceil(N / 16), K]`` from
            :func:`~structgen.runtime.quantization.formats.pack_int8_tiles`, contiguous.
        scale_tiles: float32 ``[ceil(N / 16), K / group, 16]``
            (:func:`~structgen.runtime.quantization.formats.int8_scale_tiles`), contiguous.
        group: the inputs per scale, a multiple of 32 dividing ``K``.
        n: ``N``, the weight's rows (``q``'s rows less the padding to a multiple of 16).

    Returns:
        ``[M, N]`` float32.

    Raises:
        KernelArgumentError: an argument of the wrong shape, dtype, layout or device.
    """
    k = x.shape[-1]
    rows = q.shape[0] if q.dim() == 2 else 0
    if not (
        x.dim() == 2
        and x.is_cpu
        and q.dtype is torch.int8
        and q.dim() == 2
        and q.is_contiguous()
        and q.is_cpu
        and q.shape[1] == k
        and rows % 16 == 0
        and rows - 16 < n <= rows
        and group > 0
        and group % 32 == 0
        and k % group == 0
        and scale_tiles.dtype is torch.float32
        and scale_tiles.shape == (rows // 16, k // group, 16)
        and scale_tiles.is_contiguous()
        and scale_tiles.is_cpu
    ):
        raise _bad(
            "int8t_mm",
            f"x [M, K] on CPU, q int8 [16 ceil(N / 16), K] contiguous (pack_int8_tiles) for N = "
            f"{n}, scale_tiles float32 [ceil(N / 16), K / group, 16] contiguous, group "
            f"(= {group}) a multiple of 32 dividing K",
            x=x,
            q=q,
            scale_tiles=scale_tiles,
        )
    x = _x32(x)
    m = x.shape[0]
    y = torch.empty(m, n, dtype=torch.float32)
    _lib.int8t_mm(
        x.data_ptr(), q.data_ptr(), scale_tiles.data_ptr(), y.data_ptr(), m, n, k, group,
        _threads(),
    )  # fmt: skip
    return y


def int4_dequant_rows(
    q: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group: int, n0: int, n1: int
) -> torch.Tensor:
    """Rows ``n0:n1`` of an int4 "rows" weight as float32 ``[n1 - n0, K]`` (C).

    Raises:
        KernelArgumentError: arguments as :func:`int4_mm` rejects them, or not
            ``0 <= n0 <= n1 <= N``.
    """
    k = q.shape[1] * 2 if q.dim() == 2 else 0
    _check_int4("int4_dequant_rows", q.new_empty(0, k, dtype=torch.float32), q, scales, mins, group)
    if not 0 <= n0 <= n1 <= q.shape[0]:
        raise KernelArgumentError(
            f"int4_dequant_rows: rows {n0}:{n1} outside the weight's {q.shape[0]} rows"
        )
    return _int4_dequant_rows(q, scales, mins, group, n0, n1)


def _int4_dequant_rows(
    q: torch.Tensor,
    scales: torch.Tensor,
    mins: torch.Tensor,
    group: int,
    n0: int,
    n1: int,
    tiled: bool = False,
) -> torch.Tensor:
    """Rows ``n0:n1`` as float32 of an int4 weight in the "rows" layout, or (``tiled``) the
    tile layout; arguments checked by the caller.
    """
    k = q.shape[1] * 2
    out = torch.empty(n1 - n0, k, dtype=torch.float32)
    (_lib.int4t_dequant if tiled else _lib.int4_dequant)(
        q.data_ptr(),
        scales.data_ptr(),
        mins.data_ptr(),
        out.data_ptr(),
        n0,
        n1,
        k,
        group,
        int(scales.dtype == torch.float16),
    )
    return out


def _int8_dequant_rows(q: torch.Tensor, scales: torch.Tensor, n0: int, n1: int) -> torch.Tensor:
    k, g = q.shape[1], scales.shape[1]
    out = torch.empty(n1 - n0, k, dtype=torch.float32)
    _lib.int8_dequant(
        q.data_ptr(),
        scales.data_ptr(),
        out.data_ptr(),
        n0,
        n1,
        k,
        k // g,
        int(scales.dtype == torch.float16),
    )
    return out


def _tiled(x: torch.Tensor, n: int, dequant) -> torch.Tensor:
    """Prefill: ``x @ W.T`` dequantizing ``W`` a tile of rows at a time (float32 BLAS)."""
    x = _x32(x)
    rows = max(16, _TILE_ELEMS // x.shape[1])
    out = torch.empty(x.shape[0], n, dtype=torch.float32)
    for r in range(0, n, rows):
        out[:, r : r + rows] = F.linear(x, dequant(r, min(n, r + rows)))
    return out


def int4_linear(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    mins: torch.Tensor,
    group: int,
    q8: bool = False,
    tiles: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x`` ``[M, K]`` -> float32 ``[M, N]``: with ``q8`` the kernel for every ``M`` (each row
    quantized and summed the same way whatever ``M``, so a row's result does not depend on the
    batch it is in); in float32 the kernel for ``M <= MAX_M``, dequantized tiles + float32 BLAS
    above. ``tiles``: as :func:`int4_mm` takes them.

    Raises:
        KernelArgumentError: arguments as :func:`int4_mm` rejects them.
    """
    if q8 or x.shape[0] <= MAX_M:
        return int4_mm(x, q, scales, mins, group, q8, tiles)
    _check_int4("int4_linear", x, q, scales, mins, group)
    return _tiled(x, q.shape[0], lambda a, b: _int4_dequant_rows(q, scales, mins, group, a, b))


def int4t_linear(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    mins: torch.Tensor,
    group: int,
    q8: bool = False,
    tiles: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`int4_linear` for the int4 tile layout (:func:`int4t_mm`'s ``q``): with ``q8`` the
    tile kernel for every ``M``; in float32 the kernel for ``M <= MAX_M``, dequantized tiles +
    float32 BLAS above.

    Raises:
        KernelArgumentError: arguments as :func:`int4t_mm` rejects them.
    """
    if q8 or x.shape[0] <= MAX_M:
        return int4t_mm(x, q, scales, mins, group, q8, tiles)
    _check_int4t("int4t_linear", x, q, scales, mins, group)
    n = scales.shape[0]
    return _tiled(x, n, lambda a, b: _int4_dequant_rows(q, scales, mins, group, a, b, tiled=True))


def int8_linear(
    x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, q8: bool = False
) -> torch.Tensor:
    """``x`` ``[M, K]`` -> float32 ``[M, N]`` for row-major int8: as :func:`int4_linear` (with
    ``q8`` the kernel for every ``M``, rows independent of the batch; in float32 the kernel for
    ``M <= MAX_M``, tiles above).

    Raises:
        KernelArgumentError: arguments as :func:`int8_mm` rejects them.
    """
    if q8 or x.shape[0] <= MAX_M:
        return int8_mm(x, q, scales, q8)
    _check_int8("int8_linear", x, q, scales)
    return _tiled(x, q.shape[0], lambda a, b: _int8_dequant_rows(q, scales, a, b))
