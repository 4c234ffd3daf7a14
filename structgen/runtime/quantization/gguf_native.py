"""Lossless repacking of GGUF quantized blocks into our int8 / int4 layouts (no dequantization).

* Q8_0 (``d`` fp16, 32 x int8): int8 layout, group 32, fp16 scales ``[N, K/32]``.
* Q4_1 (``d``, ``m`` fp16, 32 x 4 bit): int4 layout ``w = d*q + m``, group 32.
* Q4_0 (``d`` fp16, 32 x 4 bit): int4 layout with ``m = -8d`` (exact in fp16).

Within a block, byte ``j`` holds weight ``j`` in its low nibble and weight ``j + 16`` in
its high nibble (ggml ``ggml-common.h``).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.loader.gguf_blocks import (
    BlockGroup,
    int8_scale_tiles_array,
    int8_tiles_array,
    repack_blocks,
)
from structgen.runtime.quantization.formats import can_pack_int4
from structgen.runtime.quantization.linear import QuantEmbedding, QuantLinear

__all__ = [
    "NATIVE_TYPES",
    "repack_q8_0",
    "repack_q4",
    "native_module",
    "native_group",
    "group_modules",
    "native_experts",
]

NATIVE_TYPES = ("Q8_0", "Q4_0", "Q4_1")


def _blocks(raw: np.ndarray, shape: tuple[int, int], block_bytes: int) -> torch.Tensor:
    n, k = shape
    with warnings.catch_warnings():  # a read-only memory map: we only read it (and copy below)
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(raw).view(n, k // 32, block_bytes)  # [N, G, bytes]


def _f16(blocks: torch.Tensor, start: int) -> torch.Tensor:
    return blocks[..., start : start + 2].contiguous().view(torch.float16).squeeze(-1)  # [N, G]


def repack_q8_0(raw: np.ndarray, shape: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q int8 [N, K], scales fp16 [N, K/32])`` of a Q8_0 tensor of numpy shape ``[N, K]``
    (``raw``: its ``N * K / 32`` blocks of 34 bytes, contiguous), over the numpy arrays of
    :func:`~structgen.runtime.loader.gguf_blocks.repack_blocks`.
    """
    group = repack_blocks([(raw, shape, None)], "Q8_0")
    return torch.from_numpy(group.q), torch.from_numpy(group.scales)


def repack_q4(
    raw: np.ndarray, shape: tuple[int, int], type_name: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q uint8 [N, K] in 0..15, scales fp16 [G, N], mins fp16 [G, N])`` of a Q4_0 / Q4_1
    tensor.
    """
    if type_name == "Q4_1":
        b = _blocks(raw, shape, 20)
        d, m, qs = _f16(b, 0), _f16(b, 2), b[..., 4:20]
    else:
        b = _blocks(raw, shape, 18)
        d, qs = _f16(b, 0), b[..., 2:18]
        m = d * -8.0  # exact: a power-of-two scaling of an fp16 value
    q = torch.cat((qs & 0x0F, qs >> 4), dim=-1).reshape(shape)  # [N, K]
    return q, d.t().contiguous(), m.t().contiguous()


def native_module(
    raw: np.ndarray,
    type_name: str,
    shape: tuple[int, ...],
    rows: torch.Tensor | None,
    embedding: bool,
    dtype: torch.dtype,
    bias: torch.Tensor | None = None,
    head: bool = False,
):
    """A quantized module holding a GGUF tensor's blocks, or None if this tensor must be
    dequantized.

    Args:
        raw: the tensor's bytes.
        type_name: its ggml type.
        shape: its numpy shape ``[N, K]``.
        rows: optional output-row permutation (llama.cpp's q/k rotary permutation, undone).
        embedding: build a :class:`QuantEmbedding` (Q8_0 only) instead of a linear.
        dtype: compute dtype.
        bias: the linear's bias, if any.
        head: the embedding is also the tied output layer: its int8 tile layout and scale
            table (:meth:`QuantEmbedding.int8_tiles`, a copy of the table) are built now, in
            numpy, not at the first forward.
    """
    if type_name not in NATIVE_TYPES or len(shape) != 2:
        return None
    if type_name == "Q8_0":
        group = repack_blocks([(raw, shape, None if rows is None else rows.numpy())], "Q8_0")
        q, s = torch.from_numpy(group.q), torch.from_numpy(group.scales)
        if not embedding:
            return QuantLinear.from_int8(q, s, bias)
        emb = QuantEmbedding(q, s, dtype)
        if head and emb.qweight.dim() == 2 and cpu_quant.available():  # the C kernel's layout
            tiles = (int8_tiles_array(group.q), int8_scale_tiles_array(group.scales))
            emb.keep_int8_tiles(*(torch.from_numpy(a) for a in tiles))
        return emb
    if embedding or not can_pack_int4(shape[0], shape[1], 32):
        return None
    if cpu_quant.available():  # the kernel's tile layout is the blocks' bytes regrouped
        return native_group([(raw, shape, rows, bias)], type_name)[0]
    q, s, m = repack_q4(raw, shape, type_name)
    if rows is not None:
        q, s, m = q[rows], s[:, rows], m[:, rows]
    return QuantLinear.from_int4(q, s, m, bias)


def native_group(parts: list[tuple], type_name: str) -> list[QuantLinear] | None:
    """Quantized linears over one set of buffers, each member's rows after the previous one's.

    The members of a fused projection (q/k/v, gate/up: ``models.layers.FUSED_PROJECTIONS``)
    written this way are joined by ``FusedQuantProjection`` without a copy. Each member's
    blocks are copied once from the file's bytes into the C kernel's layout, which for these
    types is the blocks' own: Q8_0 quants to int8 ``[N, K]``, Q4_0/Q4_1 quant bytes to the
    int4 tile layout ``[8 ceil(N/8), K/2]`` (:func:`~.formats.pack_int4_tiles`: the "rows"
    layout's 4-byte runs of 8 rows side by side), the fp16 ``d`` (and ``m``; Q4_0: ``-8 d``)
    to ``[N, K/32]``; nothing is unpacked or dequantized. The copies and the int4 members'
    scale-tile tables are numpy arrays (:func:`~structgen.runtime.loader.gguf_blocks.repack_blocks`)
    that the modules' buffers wrap (``torch.from_numpy``: one tensor per group-wide array, the
    members slices of it); the tables are kept as :meth:`QuantLinear.scale_tiles`' results.

    Args:
        parts: per member ``(raw bytes, numpy shape [N, K], row order or None, bias or None)``;
            the members share ``K``.
        type_name: their ggml type (``Q8_0``, ``Q4_0`` or ``Q4_1``).

    Returns:
        One :class:`QuantLinear` per member, in order; None when the C kernel is not
        available, the type is not one of these, the members' ``K`` differ or an int4 shape
        cannot be packed (then build them one by one with :func:`native_module`).
    """
    k = parts[0][1][1]
    if (
        not cpu_quant.available()
        or type_name not in NATIVE_TYPES
        or any(len(p[1]) != 2 or p[1][1] != k or k % 32 for p in parts)
    ):
        return None
    if type_name != "Q8_0" and not all(can_pack_int4(p[1][0], k, 32) for p in parts):
        return None
    group = repack_blocks(
        [(raw, shape, None if rows is None else rows.numpy()) for raw, shape, rows, _ in parts],
        type_name,
    )
    return group_modules(group, type_name, [bias for *_, bias in parts])


def group_modules(
    group: BlockGroup, type_name: str, biases: list | None = None
) -> list[QuantLinear]:
    """One :class:`QuantLinear` per member of ``group`` over its numpy arrays, no copy.

    Args:
        group: :func:`~structgen.runtime.loader.gguf_blocks.repack_blocks`' arrays.
        type_name: their ggml type (``Q8_0``, ``Q4_0`` or ``Q4_1``).
        biases: per member a float bias tensor ``[N]`` or None (None: no biases).

    Returns:
        The members' modules in order: buffers are slices of one tensor per group-wide array
        (``torch.from_numpy``), so a fused projection over them is a view; int4 members keep
        their scale-tile table (:meth:`QuantLinear.scale_tiles`).

    Raises: never.
    """
    biases = biases or [None] * len(group.spans)
    # one tensor over each group-wide array, members sliced from it: a fused projection over
    # them is then a view (models.layers.rows_view), not a copy
    q_all, s_all = torch.from_numpy(group.q), torch.from_numpy(group.scales)
    out = []
    if type_name == "Q8_0":
        for (r, n, qr, nq, _t, _nt), bias in zip(group.spans, biases):
            out.append(QuantLinear.from_int8(q_all[qr : qr + nq], s_all[r : r + n], bias))
        return out
    m_all, t_all = torch.from_numpy(group.mins), torch.from_numpy(group.scale_tiles)
    for (r, n, qr, nq, t, nt), bias in zip(group.spans, biases):
        out.append(
            QuantLinear.from_int4_tiles(
                q_all[qr : qr + nq], s_all[r : r + n], m_all[r : r + n], bias, t_all[t : t + nt]
            )
        )
    return out


def _expert_matrix(raw: np.ndarray, type_name: str, shape: tuple[int, int]):
    """``("int8", q, scales)`` or ``("int4", q, scales, mins)`` of one expert's 2-D block data."""
    if type_name == "Q8_0":
        return ("int8", *repack_q8_0(raw, shape))
    return ("int4", *repack_q4(raw, shape, type_name))


def native_experts(gate: tuple, up: tuple, down: tuple):
    """A :class:`~structgen.runtime.quantization.experts.QuantFusedExperts` holding llama.cpp's
    stacked expert blocks (repacked losslessly), or None when they must be dequantized.

    Args:
        gate: ``(raw bytes, ggml type name, numpy shape)`` of ``ffn_gate_exps`` ``[E, I, H]``.
        up: the same of ``ffn_up_exps`` ``[E, I, H]``.
        down: the same of ``ffn_down_exps`` ``[E, H, I]``.

    Returns None when a type is not native, gate and up differ in type (they are fused
    into one ``[2I, H]`` matrix per expert), or int4 packing cannot take a shape.
    """
    from structgen.runtime.quantization.experts import QuantFusedExperts

    (rg, tg, sg), (ru, tu, su), (rd, td, sd) = gate, up, down
    if (
        tg != tu
        or any(t not in NATIVE_TYPES for t in (tg, td))
        or len(sg) != 3
        or sg != su
        or len(sd) != 3
    ):
        return None
    e, i, h = sg
    if (
        tg != "Q8_0"
        and not can_pack_int4(2 * i, h, 32)
        or td != "Q8_0"
        and not can_pack_int4(h, i, 32)
    ):
        return None
    gate_up, downs = [], []
    for x in range(e):
        gm = _expert_matrix(rg.reshape(e, -1)[x], tg, (i, h))
        um = _expert_matrix(ru.reshape(e, -1)[x], tu, (i, h))
        if gm[0] == "int8":
            gate_up.append(
                QuantLinear.from_int8(torch.cat((gm[1], um[1])), torch.cat((gm[2], um[2])))
            )
        else:
            gate_up.append(
                QuantLinear.from_int4(
                    torch.cat((gm[1], um[1])),
                    torch.cat((gm[2], um[2]), 1),
                    torch.cat((gm[3], um[3]), 1),
                )
            )
        dm = _expert_matrix(rd.reshape(e, -1)[x], td, (sd[1], sd[2]))
        downs.append(
            QuantLinear.from_int8(dm[1], dm[2])
            if dm[0] == "int8"
            else QuantLinear.from_int4(*dm[1:])
        )
    return QuantFusedExperts(gate_up, downs)
