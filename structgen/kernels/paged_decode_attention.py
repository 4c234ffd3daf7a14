"""paged_decode_attention: one query token per sequence against its paged K/V cache.

Cache layout: ``[num_pages, page_size, num_kv_heads, head_dim]`` (``KVPool.k[layer]``);
position ``p`` of sequence ``b`` lives at page ``page_table[b, p // page_size]``, offset
``p % page_size``. The new token's K/V must already be stored (``store_kv``).

Kernel (flash-decoding, as in FlashInfer / SGLang's decode kernels): grid
``(batch, kv_heads, num_splits)``; each program loads a K/V block once for the
``heads // kv_heads`` query heads of its group (GQA-aware, heads padded to 16 rows for
``tl.dot``), runs an online softmax over its share of the sequence (split-K) and writes
a partial output and log-sum-exp; a second pass merges the splits. With one split the
first pass writes the final output directly. No host synchronisation: the split count
comes from the page-table capacity, so a launch can be captured in a CUDA graph.

Sliding window (Mistral, transformers' ``kv_idx > q_idx - W``): the new token at position
``seq_len - 1`` sees keys ``seq_len - W .. seq_len - 1``; the splits share that range only,
so a windowed decode reads at most ``W`` keys however long the sequence.
"""

from __future__ import annotations

import torch

from structgen.kernels._paged import load_paged_kv
from structgen.kernels._triton import (
    cdiv,
    check,
    check_index,
    check_paged_attention,
    check_same_device,
    dot_in_f32,
    jit,
    launch,
    next_pow2,
    resolve_backend,
    tl,
    window_or_max,
)
from structgen.kernels.paged_attention import paged_attention_ref

__all__ = ["default_num_splits", "paged_decode_attention"]

_LOG2E = 1.4426950408889634


@jit
def _decode_split_kernel(
    q_ptr,  # [B, H, D]
    k_ptr,  # [P, S, KVH, D]
    v_ptr,
    page_table_ptr,  # [B, max_pages]
    seq_lens_ptr,  # [B]
    out_ptr,  # [B, H, D] (DIRECT) or partial outputs [B, H, NUM_SPLITS, D] f32
    lse_ptr,  # [B, H, NUM_SPLITS] f32 log2-sum-exp2 of each split
    qk_scale,  # scale * log2(e)
    window,  # sliding window W (2**30: none)
    stride_qb,
    stride_qh,
    stride_kp,
    stride_kt,
    stride_kh,
    stride_vp,
    stride_vt,
    stride_vh,
    stride_pt,
    stride_ob,
    stride_oh,
    PAGE_SIZE: tl.constexpr,
    GROUP: tl.constexpr,  # query heads per KV head
    BLOCK_H: tl.constexpr,  # max(16, next_pow2(GROUP))
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    DIRECT: tl.constexpr,  # NUM_SPLITS == 1: write the normalised output in out's dtype
    DOT_F32: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + b).to(tl.int32)
    lo = tl.maximum(seq_len - window, 0)  # first visible key
    per_split = tl.cdiv(tl.cdiv(seq_len - lo, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = lo + split * per_split
    end = tl.minimum(start + per_split, seq_len)

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    heads = kvh * GROUP + offs_h  # [BLOCK_H]
    h_mask = offs_h < GROUP
    d_mask = offs_d < HEAD_DIM
    bb = b.to(tl.int64)
    q = tl.load(
        q_ptr + bb * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
        mask=h_mask[:, None] & d_mask[None, :],
        other=0.0,
    )  # [BLOCK_H, BLOCK_D]
    if DOT_F32:
        q = q.to(tl.float32)

    m_i = tl.full((BLOCK_H,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_H,), tl.float32)
    acc = tl.zeros((BLOCK_H, BLOCK_D), tl.float32)
    for n0 in range(start, end, BLOCK_N):
        pos = n0 + tl.arange(0, BLOCK_N)  # [BLOCK_N] token positions
        n_mask = pos < end
        k, v = load_paged_kv(
            k_ptr, v_ptr, page_table_ptr + bb * stride_pt, pos, n_mask, offs_d, d_mask, kvh,
            stride_kp, stride_kt, stride_kh, stride_vp, stride_vt, stride_vh, PAGE_SIZE, DOT_F32,
        )  # fmt: skip
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BLOCK_H, BLOCK_N], log2 domain
        s = tl.where(n_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    safe_l = tl.where(l_i > 0, l_i, 1.0)
    o = acc / safe_l[:, None]
    hd_mask = h_mask[:, None] & d_mask[None, :]
    if DIRECT:
        o_ptrs = out_ptr + bb * stride_ob + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=hd_mask)
    else:
        o_ptrs = (
            out_ptr
            + ((bb * stride_ob + heads[:, None] * stride_oh) * NUM_SPLITS + split) * HEAD_DIM
        )
        tl.store(o_ptrs + offs_d[None, :], o, mask=hd_mask)
        lse = tl.where(l_i > 0, m_i + tl.log2(safe_l), float("-inf"))
        tl.store(
            lse_ptr + (bb * stride_ob + heads * stride_oh) * NUM_SPLITS + split, lse, mask=h_mask
        )


@jit
def _decode_reduce_kernel(
    part_ptr,  # [B, H, NUM_SPLITS, D] f32
    lse_ptr,  # [B, H, NUM_SPLITS] f32
    out_ptr,  # [B, H, D]
    stride_ob,
    stride_oh,
    NUM_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_mask = offs_s < NUM_SPLITS
    base = (b * NUM_HEADS + h) * NUM_SPLITS  # partials are contiguous [B, H, S, D]
    lse = tl.load(lse_ptr + base + offs_s, mask=s_mask, other=float("-inf"))  # [BLOCK_S]
    m = tl.max(lse, 0)
    w = tl.exp2(lse - m)  # empty splits weigh 0
    w = tl.where(s_mask, w, 0.0)
    part = tl.load(
        part_ptr + (base + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
        mask=s_mask[:, None] & (offs_d[None, :] < HEAD_DIM),
        other=0.0,
    )  # [BLOCK_S, BLOCK_D]
    o = tl.sum(part * w[:, None], 0) / tl.sum(w, 0)
    tl.store(
        out_ptr + b * stride_ob + h * stride_oh + offs_d,
        o.to(out_ptr.dtype.element_ty),
        mask=offs_d < HEAD_DIM,
    )


def default_num_splits(batch: int, kv_heads: int, max_kv_len: int, device: torch.device) -> int:
    """Split-K factor: enough programs for ~2 waves of SMs, splits of >= 256 tokens, <= 32."""
    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    else:
        sms = 2
    want = cdiv(2 * sms, max(batch * kv_heads, 1))
    return int(max(1, min(want, cdiv(max_kv_len, 256), 32)))


def _check_decode_args(q, k_cache, v_cache, page_table, seq_lens) -> None:
    check_paged_attention(q, k_cache, v_cache, page_table, "B")
    check(
        page_table.shape[0] == q.shape[0],
        f"page_table rows {page_table.shape[0]} != batch {q.shape[0]}",
    )
    check(
        seq_lens.shape == (q.shape[0],),
        f"seq_lens must be [B={q.shape[0]}], got {tuple(seq_lens.shape)}",
    )
    check_index(seq_lens=seq_lens)
    check_same_device(
        q=q, k_cache=k_cache, v_cache=v_cache, page_table=page_table, seq_lens=seq_lens
    )


def _paged_decode_triton(
    q, k_cache, v_cache, page_table, seq_lens, scale, num_splits, sliding_window
):
    _check_decode_args(q, k_cache, v_cache, page_table, seq_lens)
    window = window_or_max(sliding_window)
    bsz, heads, d = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = heads // kv_heads
    if num_splits is None:
        span = (
            page_table.shape[1] * page_size
            if sliding_window is None
            else min(window, page_table.shape[1] * page_size)
        )
        num_splits = default_num_splits(bsz, kv_heads, span, q.device)
    check(num_splits >= 1, "num_splits must be >= 1")
    out = torch.empty(bsz, heads, d, dtype=q.dtype, device=q.device)
    if bsz == 0:
        return out
    seq_lens = seq_lens.contiguous()
    direct = num_splits == 1
    if direct:
        part, lse = out, out  # lse unused
        stride_ob, stride_oh = out.stride(0), out.stride(1)
    else:
        part = torch.empty(bsz, heads, num_splits, d, dtype=torch.float32, device=q.device)
        lse = torch.empty(bsz, heads, num_splits, dtype=torch.float32, device=q.device)
        stride_ob, stride_oh = heads, 1  # in units of (split, d) rows, see the kernel
    block_d = max(16, next_pow2(d))
    launch(
        _decode_split_kernel,
        (bsz, kv_heads, num_splits),
        q.device,
        q, k_cache, v_cache, page_table, seq_lens, part, lse,
        float(scale) * _LOG2E, window,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        page_table.stride(0),
        stride_ob, stride_oh,
        PAGE_SIZE=page_size, GROUP=group, BLOCK_H=max(16, next_pow2(group)),
        HEAD_DIM=d, BLOCK_D=block_d, BLOCK_N=64 if q.is_cuda else 16,
        NUM_SPLITS=num_splits, DIRECT=direct,
        DOT_F32=dot_in_f32(q.dtype, q.device),
    )  # fmt: skip
    if not direct:
        launch(
            _decode_reduce_kernel,
            (bsz, heads),
            q.device,
            part, lse, out, out.stride(0), out.stride(1),
            NUM_HEADS=heads, HEAD_DIM=d, BLOCK_D=block_d,
            NUM_SPLITS=num_splits, BLOCK_S=next_pow2(num_splits),
        )  # fmt: skip
    return out


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_splits: int | None = None,
    sliding_window: int | None = None,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """Decode attention over paged K/V: the newest token of each sequence.

    The torch backend is :func:`~structgen.kernels.paged_attention.paged_attention_ref`
    (float32 math) with one token per sequence at position ``seq_len - 1``.

    Args:
        q: ``[B, heads, d]`` the query of each sequence's newest token.
        k_cache: ``[num_pages, page_size, kv_heads, d]`` (``heads % kv_heads == 0``).
        v_cache: ``[num_pages, page_size, kv_heads, d]``.
        page_table: ``[B, max_pages]`` int32/int64 page ids (padding: any valid page).
        seq_lens: ``[B]`` tokens to attend per sequence (>= 1, including the new one).
        scale: softmax scale, usually ``d ** -0.5``.
        num_splits: (Triton) split-K factor; None picks :func:`default_num_splits` from the
            page table's capacity (no host sync; with a window, from ``min(W, capacity)``).
        sliding_window: None (full attention) or ``W >= 1``: only the last ``W`` positions
            ``seq_len - W .. seq_len - 1`` are attended (Mistral).
        backend: ``"auto"``, ``"triton"``, ``"torch"``.

    Returns:
        ``[B, heads, d]`` in ``q.dtype``.

    Raises:
        ValueError: (Triton backend) shape, dtype, device or layout mismatch.
    """
    if resolve_backend(backend, q.device) == "triton":
        return _paged_decode_triton(
            q, k_cache, v_cache, page_table, seq_lens, scale, num_splits, sliding_window
        )
    rows = torch.arange(q.shape[0], device=q.device)  # [B] one token per sequence
    return paged_attention_ref(
        q, k_cache, v_cache, page_table, rows, seq_lens.long() - 1, scale, sliding_window
    )
