"""GGUF quantized blocks (Q8_0, Q4_0, Q4_1) repacked into the C kernels' weight layouts as numpy
arrays, and the kernels' tile tables of those layouts; no torch.

The arrays are the weights' storage: the GGUF loader wraps them in ``QuantLinear`` /
``QuantEmbedding`` buffers with ``torch.from_numpy`` (no copy;
``runtime/quantization/gguf_native.py``), and a torch-free CPU engine hands their addresses to
the C kernels as they are (``benchmarks/startup_floor.py``, ``docs/torch_free_cpu.md``). Nothing
is unpacked or dequantized: within a block, byte ``j`` holds weight ``j`` in its low nibble and
weight ``j + 16`` in its high nibble (ggml ``ggml-common.h``), which is the C kernel's "rows"
order, so a block's fields are copied as they are.

Layouts (``N`` output rows, ``K`` inputs, ``G = K / 32``):

* Q8_0 (``d`` fp16, 32 x int8): ``q`` int8 ``[N, K]`` row-major, ``scales`` fp16 ``[N, G]``.
* Q4_1 (``d``, ``m`` fp16, 32 x 4 bit; ``w = d q + m``) and Q4_0 (``d``; ``m = -8 d``, exact in
  fp16): ``q`` uint8 int4 tiles ``[8 ceil(N/8), K/2]`` (``formats.pack_int4_tiles``: 4-byte runs
  of 8 rows side by side), ``scales`` / ``mins`` fp16 ``[N, G]`` and their tile table
  (:func:`int4_scale_tiles_array`), which is what the kernel reads.
* The int8 tile layout of a Q8_0 table used as a tied output layer and its float32 scale table
  (:func:`int8_tiles_array`, :func:`int8_scale_tiles_array`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "BLOCK_BYTES",
    "BlockGroup",
    "repack_blocks",
    "int4_scale_tiles_array",
    "int8_tiles_array",
    "int8_scale_tiles_array",
]

BLOCK_BYTES = {"Q8_0": 34, "Q4_1": 20, "Q4_0": 18}  # bytes per block of 32 weights


class BlockGroup(NamedTuple):
    """Members' weights written end to end (each member's rows after the previous one's), so a
    fused projection over them (q/k/v, gate/up) is a view, not a copy.

    Attributes:
        q: Q8_0: int8 ``[sum N, K]``; Q4: uint8 int4 tiles ``[sum 8 ceil(N/8), K/2]`` (each
            member's last tile padded with zero codes).
        scales: fp16 ``[sum N, G]``.
        mins: fp16 ``[sum N, G]`` (Q4), or None (Q8_0).
        scale_tiles: fp16 ``[sum ceil(N/8), G, 2, 8]`` (Q4: each member's
            :func:`int4_scale_tiles_array`, end to end), or None (Q8_0).
        spans: per member ``(row start, N, q row start, q rows, tile start, tiles)``.
    """

    q: np.ndarray
    scales: np.ndarray
    mins: np.ndarray | None
    scale_tiles: np.ndarray | None
    spans: list[tuple[int, int, int, int, int, int]]

    def member(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Member ``i``'s ``(q, scales, mins, scale_tiles)``: views of the group's arrays."""
        r, n, qr, nq, t, nt = self.spans[i]
        return (
            self.q[qr : qr + nq],
            self.scales[r : r + n],
            None if self.mins is None else self.mins[r : r + n],
            None if self.scale_tiles is None else self.scale_tiles[t : t + nt],
        )


def _words(blocks: np.ndarray, lo: int, hi: int) -> tuple[np.dtype, np.ndarray]:
    """Bytes ``lo:hi`` of every block of ``blocks`` (``[N, G, bytes]`` uint8, C-contiguous) as
    the widest words (4, 2 or 1 bytes) that tile the field and the block and that the address
    allows: ``(word dtype, [N, G, (hi - lo) / width] view)``. A strided copy of int32 elements
    moves the field about twice as fast as one of bytes, with the same bytes.
    """
    for dtype in (np.dtype(np.int32), np.dtype(np.int16)):
        width = dtype.itemsize
        if lo % width == 0 and hi % width == 0 and blocks.shape[-1] % width == 0:
            if blocks.ctypes.data % width == 0:
                return dtype, blocks.view(dtype)[..., lo // width : hi // width]
    return np.dtype(np.uint8), blocks[..., lo:hi]


def _copy_field(dst: np.ndarray, blocks: np.ndarray, lo: int, hi: int) -> None:
    """Copy bytes ``lo:hi`` of every block of ``blocks`` (``[N, G, bytes]`` uint8) into the
    contiguous ``dst`` (``N * G * (hi - lo)`` bytes), as :func:`_words` (numpy's copy: one
    thread, the GIL released).
    """
    n, g, _ = blocks.shape
    dtype, words = _words(blocks, lo, hi)
    np.copyto(dst.view(np.uint8).reshape(n, g, hi - lo).view(dtype), words)


def _copy_tiles(dst: np.ndarray, blocks: np.ndarray, lo: int, hi: int) -> None:
    """Copy the 16 quant bytes ``lo:hi`` of every block of ``blocks`` (``[8 T, G, bytes]``
    uint8, ``T`` tiles of 8 rows) into ``dst`` (uint8 ``[8 T, K/2]`` contiguous) in the int4 tile
    layout (``[T, G, 4, 8, 4]``), as :func:`_copy_field` does (runs of 4 bytes stay together).
    """
    n, g, _ = blocks.shape
    dtype, words = _words(blocks, lo, hi)  # [8T, G, 16/w]
    per = 4 // dtype.itemsize
    src = words.reshape(n // 8, 8, g, 4, per)  # [T, c, G, j, i/w]
    tiles = dst.view(dtype).reshape(n // 8, g, 4, 8, per)  # [T, G, j, c, i/w]
    np.copyto(tiles.transpose(0, 3, 1, 2, 4), src)


def int4_scale_tiles_array(
    scales: np.ndarray, mins: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """The C kernel's tile table of an int4 weight's mins and scales: 8 weight rows side by side
    per group (csrc/qkernel.c), what ``formats.int4_scale_tiles`` returns on CPU.

    Args:
        scales: ``[N, G]`` float16 or float32.
        mins: ``[N, G]``, the dtype of ``scales``.
        out: optional contiguous ``[ceil(N / 8), G, 2, 8]`` array of that dtype to write.

    Returns:
        ``out`` (or a new array): ``[t, g, 0, r] = mins[8 t + r, g]``,
        ``[t, g, 1, r] = scales[8 t + r, g]``, 0 for rows past ``N``.

    Raises:
        ValueError: ``scales`` and ``mins`` are not 2-D of one shape and dtype, or ``out`` is
            not the table's shape and dtype.
    """
    if scales.ndim != 2 or mins.shape != scales.shape or mins.dtype != scales.dtype:
        raise ValueError(
            "int4_scale_tiles: scales and mins must be [N, G] of one dtype, got "
            f"{scales.dtype} {list(scales.shape)} and {mins.dtype} {list(mins.shape)}"
        )
    n, g = scales.shape
    nt = (n + 7) // 8
    if out is None:
        out = np.empty((nt, g, 2, 8), dtype=scales.dtype)
    elif out.shape != (nt, g, 2, 8) or out.dtype != scales.dtype:
        raise ValueError(
            f"int4_scale_tiles: out must be {scales.dtype} {[nt, g, 2, 8]}, got {out.dtype} "
            f"{list(out.shape)}"
        )
    whole, rest = divmod(n, 8)
    for k, part in ((0, mins), (1, scales)):
        out[:whole, :, k, :] = part[: 8 * whole].reshape(whole, 8, g).transpose(0, 2, 1)
        if rest:
            last = np.zeros((8, g), dtype=out.dtype)
            last[:rest] = part[8 * whole :]
            out[whole, :, k, :] = last.T
    return out


def repack_blocks(parts: list[tuple], type_name: str) -> BlockGroup:
    """One or more GGUF tensors of one block type and ``K`` repacked into the C kernels' layouts
    (module docstring), end to end in one set of arrays.

    Args:
        parts: per member ``(raw, (N, K), rows)``: ``raw`` the tensor's bytes (uint8, its
            ``N * K / 32`` blocks, contiguous: a view of the file's map is only read), ``rows``
            an int array ``[N]`` reordering its output rows (llama.cpp's q/k permutation,
            undone) or None.
        type_name: ``"Q8_0"``, ``"Q4_0"`` or ``"Q4_1"``.

    Returns:
        The :class:`BlockGroup`.

    Raises:
        ValueError: another type, a shape that is not ``[N, K]`` with ``K % 32 == 0``, members
            of different ``K``, or a ``raw`` of the wrong size.
    """
    size = BLOCK_BYTES.get(type_name)
    if size is None:
        raise ValueError(f"repack_blocks: {type_name} is not one of {sorted(BLOCK_BYTES)}")
    k = parts[0][1][1] if len(parts[0][1]) == 2 else 0
    for raw, shape, _rows in parts:
        if len(shape) != 2 or shape[1] != k or k % 32 or k == 0:
            raise ValueError(
                f"repack_blocks: members must be [N, K] of one K with K % 32 == 0, got "
                f"{[list(p[1]) for p in parts]}"
            )
        if raw.nbytes != shape[0] * (k // 32) * size:
            raise ValueError(
                f"repack_blocks: {type_name} {list(shape)} needs "
                f"{shape[0] * (k // 32) * size} bytes, got {raw.nbytes}"
            )
    g = k // 32
    int8 = type_name == "Q8_0"
    ns = [p[1][0] for p in parts]
    qrows = [n if int8 else 8 * ((n + 7) // 8) for n in ns]  # int4: whole tiles
    spans, r, qr, t = [], 0, 0, 0
    for n, nq in zip(ns, qrows):
        spans.append((r, n, qr, nq, t, 0 if int8 else nq // 8))
        r, qr, t = r + n, qr + nq, t + (0 if int8 else nq // 8)
    q = np.empty((qr, k) if int8 else (qr, k // 2), dtype=np.int8 if int8 else np.uint8)
    scales = np.empty((r, g), dtype=np.float16)
    mins = None if int8 else np.empty((r, g), dtype=np.float16)
    table = None if int8 else np.empty((t, g, 2, 8), dtype=np.float16)
    group = BlockGroup(q, scales, mins, table, spans)
    for i, ((raw, (n, _k), rows), nq) in enumerate(zip(parts, qrows)):
        mq, ms, mm, mt = group.member(i)
        b = raw.reshape(n, g, size)  # [N, G, bytes], a view of the file's bytes
        if rows is not None:
            b = b.take(np.asarray(rows), axis=0)  # one copy of this member's blocks, rows in order
        _copy_field(ms, b, 0, 2)
        if int8:
            _copy_field(mq, b, 2, 34)
            continue
        if nq > n:  # zero codes for the rows of the last tile past N
            b = np.concatenate((b, np.zeros((nq - n, *b.shape[1:]), np.uint8)))
        if type_name == "Q4_1":
            _copy_field(mm, b[:n], 2, 4)
            _copy_tiles(mq, b, 4, 20)
        else:
            np.multiply(ms, -8.0, out=mm)  # exact: a power-of-two scaling of an fp16 value
            _copy_tiles(mq, b, 2, 18)
        if any(m % 8 for m in ns):  # a padded tile inside: each member's table its own
            int4_scale_tiles_array(ms, mm, out=mt)
    if not int8 and not any(m % 8 for m in ns):  # whole tiles: the members' tables end to end
        int4_scale_tiles_array(scales, mins, out=table)
    return group


def _qkernel():
    """The C extension (``csrc/qkernel.c``), or None where it is not built."""
    try:
        from structgen.runtime.cpu import _qkernel
    except ImportError:  # pragma: no cover - depends on the build
        return None
    return _qkernel


def int8_tiles_array(q: np.ndarray) -> np.ndarray:
    """A row-major int8 weight in the C kernel's int8 tile layout (what
    ``formats.pack_int8_tiles`` returns on CPU: 16 rows interleaved 4 bytes at a time,
    csrc/qkernel_i8tiles.h).

    Args:
        q: int8 ``[N, K]`` with ``K % 32 == 0``.

    Returns:
        int8 ``[16 ceil(N/16), K]``, read as ``[t, b, j, c, i] = q[16 t + c, 32 b + 4 j + i]``,
        zeros for rows past ``N``. Packed by the C extension where it is built (~10x faster
        than numpy's strided copy, the same bytes).

    Raises:
        ValueError: ``q`` is not int8 ``[N, K]`` with ``K % 32 == 0``.
    """
    if q.dtype != np.int8 or q.ndim != 2 or q.shape[1] % 32:
        raise ValueError(
            f"pack_int8_tiles: expected int8 [N, K] with K % 32 == 0, got {q.dtype} {list(q.shape)}"
        )
    n, k = q.shape
    nt = (n + 15) // 16
    ext = _qkernel()
    if ext is not None:
        q = np.ascontiguousarray(q)
        tiles = np.empty((nt * 16, k), dtype=np.int8)
        ext.int8t_pack(q.ctypes.data, 0, tiles.ctypes.data, 0, n, k, k, 0)
        return tiles
    rows = np.zeros((nt * 16, k), dtype=np.int8)
    rows[:n] = q
    tiles = rows.reshape(nt, 16, k // 32, 8, 4).transpose(0, 2, 3, 1, 4)  # [nt, K/32, 8, 16, 4]
    return np.ascontiguousarray(tiles).reshape(nt * 16, k)


def int8_scale_tiles_array(scales: np.ndarray) -> np.ndarray:
    """The float32 scale table of an int8 tile-layout weight (what ``formats.int8_scale_tiles``
    returns on CPU; fp16 scales convert exactly).

    Args:
        scales: float16 or float32 ``[N, G]``.

    Returns:
        float32 ``[ceil(N/16), G, 16]``: ``[t, g, c] = scales[16 t + c, g]``, 0 for rows past
        ``N``. Packed by the C extension where it is built.

    Raises:
        ValueError: ``scales`` is not 2-D float16 / float32.
    """
    if scales.ndim != 2 or scales.dtype not in (np.float16, np.float32):
        raise ValueError(
            f"int8_scale_tiles: scales must be float16/float32 [N, G], got {scales.dtype} "
            f"{list(scales.shape)}"
        )
    n, g = scales.shape
    nt = (n + 15) // 16
    ext = _qkernel()
    if ext is not None:
        scales = np.ascontiguousarray(scales)
        table = np.empty((nt, g, 16), dtype=np.float32)
        f16 = int(scales.dtype == np.float16)
        ext.int8t_pack(0, scales.ctypes.data, 0, table.ctypes.data, n, 32 * g, 32, f16)
        return table
    padded = np.zeros((nt * 16, g), dtype=np.float32)
    padded[:n] = scales
    return np.ascontiguousarray(padded.reshape(nt, 16, g).transpose(0, 2, 1))
