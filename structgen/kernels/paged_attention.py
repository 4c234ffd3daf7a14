"""paged_attention: the one reference of attention over the paged KV cache.

Every path is tested against :func:`paged_attention_ref`: the Triton kernels
(``paged_decode_attention`` for one new token per sequence, ``extend_attention`` for
ragged extensions), the fused C kernel (``structgen.runtime.cpu.ops.paged_attention``)
and the model's SDPA path (``structgen.runtime.models.attention_sdpa``).

Cache layout: ``[num_pages, page_size, num_kv_heads, head_dim]``; position ``p`` of the
sequence in page-table row ``b`` lives at page ``page_table[b, p // page_size]``, offset
``p % page_size``. The query of a token at position ``p`` sees keys ``0 .. p`` (with a
sliding window ``W``, Mistral, transformers' ``kv_idx > q_idx - W``: ``p - W + 1 .. p``).
"""

from __future__ import annotations

import torch

__all__ = ["paged_attention_ref"]


def paged_attention_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_ids: torch.Tensor,
    positions: torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Causal attention of each query token over its sequence's paged K/V (float32 math; slow).

    Args:
        q: ``[T, heads, d]`` queries (RoPE applied).
        k_cache: ``[num_pages, page_size, kv_heads, d]`` (``heads % kv_heads == 0``), holding
            every key a query sees (its own included).
        v_cache: ``[num_pages, page_size, kv_heads, d]``.
        page_table: ``[B, max_pages]`` int32/int64 page ids (padding: any valid page).
        seq_ids: ``[T]`` int page-table row of each token.
        positions: ``[T]`` int position of each token (it sees keys ``0 .. position``).
        scale: softmax scale, usually ``d ** -0.5``.
        sliding_window: None, or ``W >= 1``: keys ``position - W + 1 .. position``.

    Returns:
        ``[T, heads, d]`` in ``q.dtype``.

    Raises:
        never (shapes are the caller's contract).
    """
    heads = q.shape[1]
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    max_len = page_table.shape[1] * page_size
    pos = torch.arange(max_len, device=q.device)  # [L]
    pages = page_table.long()[:, pos // page_size]  # [B, L]
    seq_ids, q_pos = seq_ids.long(), positions.long()
    k = k_cache[pages, pos % page_size].float()[seq_ids]  # [T, L, kv_heads, d]
    v = v_cache[pages, pos % page_size].float()[seq_ids]
    rep = heads // kv_heads
    k = k.repeat_interleave(rep, dim=2)  # [T, L, heads, d]
    v = v.repeat_interleave(rep, dim=2)
    scores = torch.einsum("thd,tlhd->thl", q.float(), k) * scale  # [T, heads, L]
    visible = pos[None, :] <= q_pos[:, None]  # [T, L] causal
    if sliding_window is not None:
        visible = visible & (pos[None, :] > q_pos[:, None] - sliding_window)
    scores = scores.masked_fill(~visible[:, None, :], float("-inf"))
    return torch.einsum("thl,tlhd->thd", scores.softmax(-1), v).to(q.dtype)
