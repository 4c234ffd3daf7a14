"""Device helper shared by the paged attention kernels: one K/V tile read through a page table."""

from __future__ import annotations

from structgen.kernels._triton import jit, tl

__all__ = ["load_paged_kv"]


@jit
def load_paged_kv(
    k_ptr,  # [P, S, KVH, D]
    v_ptr,
    table_row_ptr,  # this sequence's page-table row [max_pages]
    pos,  # [BLOCK_N] token positions
    n_mask,  # [BLOCK_N] valid positions
    offs_d,  # [BLOCK_D]
    d_mask,  # [BLOCK_D]
    kvh,  # KV head
    stride_kp,
    stride_kt,
    stride_kh,
    stride_vp,
    stride_vt,
    stride_vh,
    PAGE_SIZE: tl.constexpr,
    DOT_F32: tl.constexpr,  # upcast for tl.dot (the interpreter's bf16 dot is wrong)
):
    """K and V tiles ``[BLOCK_N, BLOCK_D]`` of positions ``pos`` (0 where masked).

    Position ``p`` lives at page ``table_row[p // PAGE_SIZE]``, offset ``p % PAGE_SIZE``.
    """
    page = tl.load(table_row_ptr + pos // PAGE_SIZE, mask=n_mask, other=0).to(tl.int64)
    off = pos % PAGE_SIZE
    kd_mask = n_mask[:, None] & d_mask[None, :]
    k_row = page * stride_kp + off * stride_kt + kvh * stride_kh  # [BLOCK_N]
    k = tl.load(k_ptr + k_row[:, None] + offs_d[None, :], mask=kd_mask, other=0.0)
    v_row = page * stride_vp + off * stride_vt + kvh * stride_vh
    v = tl.load(v_ptr + v_row[:, None] + offs_d[None, :], mask=kd_mask, other=0.0)
    if DOT_F32:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    return k, v
