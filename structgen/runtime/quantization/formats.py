"""Weight-only quantized formats: how weights are quantized, packed, and dequantized (references).

Two layouts, both along the input dimension ``K`` of a ``[N, K]`` linear weight:

* **int8**: ``q`` int8 ``[N, K]``, ``scales`` ``[N, G]`` (``G = K / group``; ``G = 1`` is
  per output channel); ``w = scales * q`` (symmetric). GGUF Q8_0 is this layout with
  group 32 and fp16 scales.
* **int4**: ``q`` in ``0..15``, ``scales`` and ``mins`` fp16 ``[G, N]``; ``w = scales * q + mins``
  (asymmetric). Our quantizer picks an integer zero point ``z`` per group and stores
  ``mins = -z * scales``; GGUF Q4_1 is this layout with group 32 (``d``, ``m``), Q4_0 has
  ``mins = -8 * d``. On CPU ``q`` is kept packed either in the "rows" layout our C kernel streams
  (:func:`pack_int4_rows`: ggml's block order, scales/mins ``[N, G]``) or, when that kernel is not
  built, for ``torch.ops.aten._weight_int4pack_mm_for_cpu`` (:func:`pack_int4`). The C kernel
  reads the rows layout's scales and mins as a tile table (:func:`int4_scale_tiles`: 8 weight
  rows side by side per group), made once per weight.
"""

from __future__ import annotations

import torch

from structgen.runtime.loader.gguf_blocks import (
    int4_scale_tiles_array,
    int8_scale_tiles_array,
    int8_tiles_array,
)

__all__ = [
    "quantize_int8",
    "dequantize_int8",
    "quantize_int4",
    "dequantize_int4",
    "pack_int4",
    "int4_scale_and_zeros",
    "can_pack_int4",
    "int8_to_group_major",
    "int8_from_group_major",
    "pack_int4_rows",
    "unpack_int4_rows",
    "int4_scale_tiles",
    "pack_int4_tiles",
    "unpack_int4_tiles",
    "pack_int8_tiles",
    "unpack_int8_tiles",
    "int8_tile_rows",
    "int8_scale_tiles",
]


def quantize_int8(
    w: torch.Tensor, group_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output channel (``group_size=None``) or per group of ``group_size``
    inputs.

    Args:
        w: ``[N, K]`` float weight.
        group_size: None (one scale per row) or a divisor of ``K``.

    Returns:
        ``(q int8 [N, K], scales float32 [N, G])``; ``scales = max|w| / 127`` per group
        (1 for all-zero groups).
    """
    n, k = w.shape
    g = k if group_size is None else group_size
    wg = w.float().reshape(n, k // g, g)  # [N, G, g]
    scales = wg.abs().amax(dim=-1) / 127.0  # [N, G]
    scales = torch.where(scales == 0, torch.ones_like(scales), scales)
    q = torch.clamp(torch.round(wg / scales[..., None]), -127, 127).to(torch.int8).reshape(n, k)
    return q, scales


def dequantize_int8(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``[N, K]`` float32 weight of an int8 layout (scales ``[N, G]``)."""
    n, k = q.shape
    g = scales.shape[1]
    return (q.float().reshape(n, g, k // g) * scales.float()[..., None]).reshape(n, k)


def int8_to_group_major(q: torch.Tensor, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped int8 ``q`` ``[N, K]``, ``scales`` ``[N, G]`` -> group-major ``q`` ``[G, N, K/G]``,
    ``scales`` ``[G, N]``.

    Lossless re-layout: each group's ``[N, K/G]`` slice is contiguous, so the CPU path can run
    ``torch.ops.aten._weight_int8pack_mm`` once per group (GGUF Q8_0: 18 calls for K = 576)
    instead of dequantizing the weight per call.
    """
    n, k = q.shape
    g = scales.shape[1]
    return q.view(n, g, k // g).transpose(0, 1).contiguous(), scales.t().contiguous()


def int8_from_group_major(
    q: torch.Tensor, scales: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`int8_to_group_major`: ``([N, K], [N, G])``."""
    g, n, gs = q.shape
    return q.transpose(0, 1).reshape(n, g * gs), scales.t()


def quantize_int4(
    w: torch.Tensor, group_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric int4 per group of ``group_size`` inputs, with integer zero points.

    Per group: ``scale = (max - min) / 15``, ``z = round(-min / scale)`` clamped to ``0..15``,
    ``q = clamp(round(w / scale) + z, 0, 15)``; stored as fp16 ``scales`` and ``mins = -z * scale``.

    Args:
        w: ``[N, K]`` float weight.
        group_size: inputs per group; divides ``K`` (32, 64, 128).

    Returns:
        ``(q uint8 [N, K] in 0..15, scales fp16 [G, N], mins fp16 [G, N])``.
    """
    n, k = w.shape
    wg = w.float().reshape(n, k // group_size, group_size)  # [N, G, g]
    lo = wg.amin(dim=-1).clamp(max=0.0)
    hi = wg.amax(dim=-1).clamp(min=0.0)
    scale = ((hi - lo) / 15.0).half().float()  # the stored (fp16) scale is the one we round with
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    zero = torch.clamp(torch.round(-lo / scale), 0, 15)  # [N, G]
    q = (
        torch.clamp(torch.round(wg / scale[..., None]) + zero[..., None], 0, 15)
        .to(torch.uint8)
        .reshape(n, k)
    )
    return q, scale.t().half().contiguous(), (-zero * scale).t().half().contiguous()


def dequantize_int4(q: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
    """``[N, K]`` float32 weight of an (unpacked) int4 layout: ``scales * q + mins`` per group."""
    n, k = q.shape
    g = scales.shape[0]
    qg = q.float().reshape(n, g, k // g)
    return (qg * scales.float().t()[..., None] + mins.float().t()[..., None]).reshape(n, k)


def can_pack_int4(n: int, k: int, group_size: int) -> bool:
    """Whether torch's CPU int4 packing takes a ``[N, K]`` weight (N % 16, K % group, even K)."""
    return n % 16 == 0 and k % group_size == 0 and k % 2 == 0 and group_size % 2 == 0


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack ``q`` uint8 ``[N, K]`` (0..15) for ``_weight_int4pack_mm_for_cpu`` -> uint8
    ``[N, K / 2]``.
    """
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32).contiguous(), 1)


def int4_scale_and_zeros(
    scales: torch.Tensor, mins: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """``[G, N, 2]`` (scale, zero) in torch's int4 convention ``w = (q - 8) * scale + zero``.

    ``zero = mins + 8 * scale``, computed in float32 from the fp16 values.
    """
    s = scales.float()
    return torch.stack((s, mins.float() + 8.0 * s), dim=-1).to(dtype).contiguous()


def pack_int4_rows(q: torch.Tensor) -> torch.Tensor:
    """Pack ``q`` uint8 ``[N, K]`` (0..15, ``K % 32 == 0``) into the C kernel's ``[N, K / 2]``
    layout.

    Per row, each block of 32 weights is 16 bytes; byte ``j`` holds weight ``j`` in its low
    nibble and weight ``j + 16`` in its high nibble (ggml's Q4_0/Q4_1 block order, so a GGUF
    block's quants are copied as they are). Lossless; :func:`unpack_int4_rows` inverts it.
    """
    n, k = q.shape
    qv = q.to(torch.uint8).reshape(n, k // 32, 2, 16)
    return (qv[:, :, 0] | (qv[:, :, 1] << 4)).reshape(n, k // 2).contiguous()


def unpack_int4_rows(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_int4_rows`: ``[N, K / 2]`` -> uint8 ``[N, K]`` in 0..15."""
    n, half = packed.shape
    pv = packed.reshape(n, half // 16, 16)
    return torch.cat((pv & 0x0F, pv >> 4), dim=-1).reshape(n, half * 2)


def int4_scale_tiles(scales: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
    """The C kernel's tile table of an int4 "rows" weight's mins and scales: 8 weight rows side by
    side per group, so the kernel sums ``min * xsum`` (+ ``8 * scale * xdiff``) over the groups
    for 8 rows per vector (csrc/qkernel.c).

    Args:
        scales: ``[N, G]`` float16 or float32.
        mins: ``[N, G]``, the dtype of ``scales``.

    Returns:
        ``[ceil(N / 8), G, 2, 8]`` contiguous, the dtype of ``scales``:
        ``tiles[t, g, 0, r] = mins[8 t + r, g]``, ``tiles[t, g, 1, r] = scales[8 t + r, g]``,
        0 for rows past ``N``.

    Raises:
        ValueError: ``scales`` and ``mins`` are not 2-D of one shape and dtype.
    """
    if scales.dim() != 2 or mins.shape != scales.shape or mins.dtype != scales.dtype:
        raise ValueError(
            "int4_scale_tiles: scales and mins must be [N, G] of one dtype, got "
            f"{scales.dtype} {tuple(scales.shape)} and {mins.dtype} {tuple(mins.shape)}"
        )
    n, g = scales.shape
    nt = (n + 7) // 8
    if scales.device.type == "cpu":
        # numpy's strided copy: torch's permuted half/float copy took 35-90 ms a table here
        return torch.from_numpy(int4_scale_tiles_array(scales.numpy(), mins.numpy()))
    table = torch.zeros(nt * 8, 2, g, dtype=scales.dtype, device=scales.device)  # [8 nt, 2, G]
    table[:n, 0] = mins
    table[:n, 1] = scales
    return table.reshape(nt, 8, 2, g).permute(0, 3, 2, 1).contiguous()  # [nt, G, 2, 8]


def pack_int4_tiles(packed: torch.Tensor) -> torch.Tensor:
    """Regroup an int4 "rows" weight (:func:`pack_int4_rows`) into the C kernel's int4 tiles: 8
    weight rows interleaved 4 packed bytes at a time, so one 32-byte vector holds 4 codes of each
    of 8 output columns (csrc/qkernel_tiles.h).

    Args:
        packed: uint8 ``[N, K / 2]`` in the rows layout (``K % 32 == 0``).

    Returns:
        uint8 ``[8 * ceil(N / 8), K / 2]`` contiguous, read as ``[ceil(N / 8), K / 32, 4, 8, 4]``:
        ``[t, b, j, c, i]`` is byte ``4 j + i`` of block ``b`` of row ``8 t + c`` (zero codes for
        rows past ``N``). Lossless; :func:`unpack_int4_tiles` inverts it.

    Raises:
        ValueError: ``packed`` is not uint8 ``[N, K / 2]`` with ``K % 32 == 0``.
    """
    if packed.dtype != torch.uint8 or packed.dim() != 2 or packed.shape[1] % 16:
        raise ValueError(
            "pack_int4_tiles: expected uint8 [N, K/2] with K % 32 == 0 (pack_int4_rows), got "
            f"{packed.dtype} {tuple(packed.shape)}"
        )
    n, half = packed.shape
    nt = (n + 7) // 8
    rows = packed.new_zeros(nt * 8, half)  # [8 nt, K/2]
    rows[:n] = packed
    tiles = rows.reshape(nt, 8, half // 16, 4, 4).permute(0, 2, 3, 1, 4)  # [nt, K/32, 4, 8, 4]
    return tiles.reshape(nt * 8, half).contiguous()


def unpack_int4_tiles(tiles: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_int4_tiles`: ``[8 * ceil(N / 8), K / 2]`` -> the rows layout
    ``[N, K / 2]`` (the first ``n`` rows).

    Raises:
        ValueError: ``tiles`` is not uint8 ``[8 * ceil(n / 8), K / 2]`` with ``K % 32 == 0``.
    """
    if (
        tiles.dtype != torch.uint8
        or tiles.dim() != 2
        or tiles.shape[0] != 8 * ((n + 7) // 8)
        or tiles.shape[1] % 16
    ):
        raise ValueError(
            f"unpack_int4_tiles: expected uint8 [8 * ceil({n} / 8), K/2] with K % 32 == 0, got "
            f"{tiles.dtype} {tuple(tiles.shape)}"
        )
    rows8, half = tiles.shape
    nt = rows8 // 8
    rows = tiles.reshape(nt, half // 16, 4, 8, 4).permute(0, 3, 1, 2, 4)  # [nt, 8, K/32, 4, 4]
    return rows.reshape(rows8, half)[:n].contiguous()


def pack_int8_tiles(q: torch.Tensor) -> torch.Tensor:
    """Regroup a row-major int8 weight into the C kernel's int8 tiles: 16 weight rows interleaved
    4 bytes at a time, so a block of 32 inputs of a tile is one AMX B tile (512 bytes) and 32
    bytes hold 4 inputs of 8 output columns (csrc/qkernel_i8tiles.h).

    Args:
        q: int8 ``[N, K]`` with ``K % 32 == 0``.

    Returns:
        int8 ``[16 * ceil(N / 16), K]`` contiguous, read as ``[ceil(N / 16), K / 32, 8, 16, 4]``:
        ``[t, b, j, c, i]`` is ``q[16 t + c, 32 b + 4 j + i]`` (zeros for rows past ``N``). The
        values are ``q``'s (lossless); :func:`unpack_int8_tiles` inverts it.

    Raises:
        ValueError: ``q`` is not int8 ``[N, K]`` with ``K % 32 == 0``.
    """
    if q.dtype != torch.int8 or q.dim() != 2 or q.shape[1] % 32:
        raise ValueError(
            f"pack_int8_tiles: expected int8 [N, K] with K % 32 == 0, got {q.dtype} "
            f"{tuple(q.shape)}"
        )
    n, k = q.shape
    nt = (n + 15) // 16
    if q.is_cpu:  # numpy (the C packer where built: the same bytes, ~10x faster)
        return torch.from_numpy(int8_tiles_array(q.numpy()))
    rows = q.new_zeros(nt * 16, k)
    rows[:n] = q
    tiles = rows.reshape(nt, 16, k // 32, 8, 4).permute(0, 2, 3, 1, 4)  # [nt, K/32, 8, 16, 4]
    return tiles.reshape(nt * 16, k).contiguous()


def int8_tile_rows(tiles: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows ``ids`` of the weight in an int8 tile layout (:func:`pack_int8_tiles`), row-major.

    Args:
        tiles: int8 ``[16 * T, K]`` from :func:`pack_int8_tiles`.
        ids: integer indices ``[R]``, each below ``16 * T``.

    Returns:
        int8 ``[R, K]``.

    Raises:
        IndexError: an index out of range (torch's indexing error).
    """
    rows, k = tiles.shape
    view = tiles.view(rows // 16, k // 32, 8, 16, 4)
    picked = view[ids // 16, :, :, ids % 16, :]  # [R, K/32, 8, 4]
    return picked.reshape(ids.shape[0], k)


def unpack_int8_tiles(tiles: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_int8_tiles`: the first ``n`` rows, row-major int8 ``[n, K]``.

    Raises:
        ValueError: ``tiles`` is not int8 ``[16 * ceil(n / 16), K]`` with ``K % 32 == 0``.
    """
    if (
        tiles.dtype != torch.int8
        or tiles.dim() != 2
        or tiles.shape[0] != 16 * ((n + 15) // 16)
        or tiles.shape[1] % 32
    ):
        raise ValueError(
            f"unpack_int8_tiles: expected int8 [16 * ceil({n} / 16), K] with K % 32 == 0, got "
            f"{tiles.dtype} {tuple(tiles.shape)}"
        )
    rows, k = tiles.shape
    view = tiles.reshape(rows // 16, k // 32, 8, 16, 4).permute(0, 3, 1, 2, 4)
    return view.reshape(rows, k)[:n].contiguous()


def int8_scale_tiles(scales: torch.Tensor) -> torch.Tensor:
    """The C kernel's scale table of an int8 tile-layout weight (:func:`pack_int8_tiles`): 16
    weight rows side by side per group, float32 (fp16 scales convert exactly).

    Args:
        scales: ``[N, G]`` float16 or float32.

    Returns:
        float32 ``[ceil(N / 16), G, 16]`` contiguous: ``[t, g, c] = scales[16 t + c, g]``, 0 for
        rows past ``N``.

    Raises:
        ValueError: ``scales`` is not 2-D float16 / float32.
    """
    if scales.dim() != 2 or scales.dtype not in (torch.float16, torch.float32):
        raise ValueError(
            f"int8_scale_tiles: scales must be float16/float32 [N, G], got {scales.dtype} "
            f"{tuple(scales.shape)}"
        )
    n, g = scales.shape
    nt = (n + 15) // 16
    if scales.is_cpu:  # numpy (the C packer where built: the same floats, ~10x faster)
        return torch.from_numpy(int8_scale_tiles_array(scales.numpy()))
    table = torch.zeros(nt * 16, g, dtype=torch.float32, device=scales.device)
    table[:n] = scales
    return table.reshape(nt, 16, g).permute(0, 2, 1).contiguous()
