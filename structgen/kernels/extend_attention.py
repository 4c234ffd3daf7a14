"""extend_attention: new tokens attending causally to themselves and their cached prefix.

Covers prefill chunks, jump-forward text and speculative draft tokens. The batch is
ragged: sequence ``b`` has ``prefix_lens[b]`` cached tokens and ``extend_lens[b]`` new
ones, whose queries are rows ``q_starts[b] .. q_starts[b] + extend_lens[b] - 1`` of the
flat ``q``. The new tokens' K/V must already be in the pages (``store_kv`` first), so
every key, old or new, is read through the page table: the new token at position ``p``
sees keys ``0 .. p``.

Kernel: flash attention (online softmax, exp2), grid ``(batch, heads, query blocks)``;
a program covers ``BLOCK_M`` queries of one head and stops at the last key its
last query can see (causal block skipping). With a sliding window ``W`` (Mistral;
transformers' ``kv_idx > q_idx - W``) the query at ``p`` sees keys ``p - W + 1 .. p``, and a
program starts at the first key its first query can see.
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

__all__ = ["extend_attention"]

_LOG2E = 1.4426950408889634


def _q_starts(extend_lens: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(extend_lens, 0) - extend_lens  # [B] first flat row of each sequence


def _extend_attention_torch(
    q, k_cache, v_cache, page_table, prefix_lens, extend_lens, scale, sliding_window
):
    """The ragged batch as per-token rows and positions, through :func:`paged_attention_ref`."""
    num_tokens = q.shape[0]
    prefix_lens, extend_lens = prefix_lens.long(), extend_lens.long()
    seq_ids = torch.repeat_interleave(
        torch.arange(len(extend_lens), device=q.device), extend_lens
    )  # [T]
    q_pos = (
        prefix_lens[seq_ids]
        + torch.arange(num_tokens, device=q.device)
        - _q_starts(extend_lens)[seq_ids]
    )
    return paged_attention_ref(
        q, k_cache, v_cache, page_table, seq_ids, q_pos, scale, sliding_window
    )


@jit
def _extend_kernel(
    q_ptr,  # [T, H, D]
    k_ptr,  # [P, S, KVH, D]
    v_ptr,
    out_ptr,  # [T, H, D]
    page_table_ptr,  # [B, max_pages]
    prefix_lens_ptr,  # [B]
    extend_lens_ptr,  # [B]
    q_starts_ptr,  # [B]
    qk_scale,  # scale * log2(e)
    window,  # sliding window W (2**30: none)
    stride_qt,
    stride_qh,
    stride_kp,
    stride_kt,
    stride_kh,
    stride_vp,
    stride_vt,
    stride_vh,
    stride_ot,
    stride_oh,
    stride_pt,
    PAGE_SIZE: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    mb = tl.program_id(2)
    kvh = h // GROUP
    bb = b.to(tl.int64)
    ext = tl.load(extend_lens_ptr + b).to(tl.int32)
    prefix = tl.load(prefix_lens_ptr + b).to(tl.int32)
    q_start = tl.load(q_starts_ptr + b).to(tl.int64)

    offs_m = mb * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M] index within the extension
    offs_d = tl.arange(0, BLOCK_D)
    m_mask = offs_m < ext
    d_mask = offs_d < HEAD_DIM
    q_rows = q_start + offs_m
    q = tl.load(
        q_ptr + q_rows[:, None] * stride_qt + h * stride_qh + offs_d[None, :],
        mask=m_mask[:, None] & d_mask[None, :],
        other=0.0,
    )  # [BLOCK_M, BLOCK_D]
    if DOT_F32:
        q = q.to(tl.float32)
    q_pos = prefix + offs_m  # [BLOCK_M] absolute positions
    # the block's last query sees keys < end; an empty block (past ext) loops zero times
    end = tl.where(mb * BLOCK_M < ext, prefix + tl.minimum(ext, (mb + 1) * BLOCK_M), 0)
    # the block's first query sees keys > its position - W: skip whole blocks before that
    lo = tl.maximum(prefix + mb * BLOCK_M - window + 1, 0) // BLOCK_N * BLOCK_N

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    for n0 in range(lo, end, BLOCK_N):
        pos = n0 + tl.arange(0, BLOCK_N)  # [BLOCK_N] key positions
        n_mask = pos < end
        k, v = load_paged_kv(
            k_ptr, v_ptr, page_table_ptr + bb * stride_pt, pos, n_mask, offs_d, d_mask, kvh,
            stride_kp, stride_kt, stride_kh, stride_vp, stride_vt, stride_vh, PAGE_SIZE, DOT_F32,
        )  # fmt: skip
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BLOCK_M, BLOCK_N]
        visible = (pos[None, :] <= q_pos[:, None]) & (pos[None, :] > q_pos[:, None] - window)
        visible = visible & n_mask[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing seen yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    o_ptrs = out_ptr + q_rows[:, None] * stride_ot + h * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & d_mask[None, :])


def _check_extend_args(q, k_cache, v_cache, page_table, prefix_lens, extend_lens) -> None:
    check_paged_attention(q, k_cache, v_cache, page_table, "T")
    bsz = page_table.shape[0]
    check(
        prefix_lens.shape == (bsz,) and extend_lens.shape == (bsz,),
        f"prefix_lens/extend_lens must be [B={bsz}], got {tuple(prefix_lens.shape)}, "
        f"{tuple(extend_lens.shape)}",
    )
    check_index(prefix_lens=prefix_lens, extend_lens=extend_lens)
    check_same_device(
        q=q,
        k_cache=k_cache,
        v_cache=v_cache,
        page_table=page_table,
        prefix_lens=prefix_lens,
        extend_lens=extend_lens,
    )


def _extend_triton(
    q, k_cache, v_cache, page_table, prefix_lens, extend_lens, scale, max_extend_len, sliding_window
):
    _check_extend_args(q, k_cache, v_cache, page_table, prefix_lens, extend_lens)
    window = window_or_max(sliding_window)
    num_tokens, heads, d = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty_like(q)
    bsz = page_table.shape[0]
    if num_tokens == 0 or bsz == 0:
        return out
    if max_extend_len is None:
        max_extend_len = int(extend_lens.max())  # host sync; pass it to avoid
    block_m = 64 if q.is_cuda else 16
    launch(
        _extend_kernel,
        (bsz, heads, cdiv(max_extend_len, block_m)),
        q.device,
        q, k_cache, v_cache, out, page_table,
        prefix_lens.contiguous(), extend_lens.contiguous(), _q_starts(extend_lens).contiguous(),
        float(scale) * _LOG2E, window,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        out.stride(0), out.stride(1),
        page_table.stride(0),
        PAGE_SIZE=page_size, GROUP=heads // kv_heads,
        HEAD_DIM=d, BLOCK_D=max(16, next_pow2(d)),
        BLOCK_M=block_m, BLOCK_N=64 if q.is_cuda else 16,
        DOT_F32=dot_in_f32(q.dtype, q.device),
    )  # fmt: skip
    return out


def extend_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    prefix_lens: torch.Tensor,
    extend_lens: torch.Tensor,
    scale: float,
    max_extend_len: int | None = None,
    sliding_window: int | None = None,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """Causal attention of ragged new tokens over paged K/V.

    The torch backend is :func:`~structgen.kernels.paged_attention.paged_attention_ref`
    (float32 math) over the tokens' rows and positions.

    Args:
        q: ``[T, heads, d]`` queries of the new tokens, sequences concatenated in batch order
            (``T == extend_lens.sum()``).
        k_cache: ``[num_pages, page_size, kv_heads, d]`` holding prefix and new tokens.
        v_cache: ``[num_pages, page_size, kv_heads, d]``.
        page_table: ``[B, max_pages]`` int32/int64 page ids covering ``prefix + extend``.
        prefix_lens: ``[B]`` cached tokens per sequence.
        extend_lens: ``[B]`` new tokens per sequence (>= 1).
        scale: softmax scale.
        max_extend_len: ``max(extend_lens)`` if known (saves a host sync in Triton).
        sliding_window: None (full causal) or ``W >= 1``: the query at position ``p`` sees
            keys ``p - W + 1 .. p`` (Mistral).
        backend: ``"auto"``, ``"triton"``, ``"torch"``.

    Returns:
        ``[T, heads, d]`` in ``q.dtype``.

    Raises:
        ValueError: (Triton backend) shape, dtype, device or layout mismatch.
    """
    if resolve_backend(backend, q.device) == "triton":
        return _extend_triton(
            q,
            k_cache,
            v_cache,
            page_table,
            prefix_lens,
            extend_lens,
            scale,
            max_extend_len,
            sliding_window,
        )
    return _extend_attention_torch(
        q, k_cache, v_cache, page_table, prefix_lens, extend_lens, scale, sliding_window
    )
