"""Paged attention over the KV pool: backend dispatch and the torch reference path.

:func:`paged_attention` and :func:`store_kv` run the Triton kernels of
``structgen.kernels`` on CUDA and the torch reference (:func:`paged_attention_ref`,
``index_copy_``) elsewhere; :func:`attention_backend` forces one for a scope (the
model runner's ``attention_backend``; tests force ``"triton"`` on CPU, interpreted).

Layout: ``k_slots``/``v_slots`` are a layer's cache viewed as
``[num_slots, num_kv_heads, head_dim]`` (``KVPool.k_slots(layer)``); slot
``page * page_size + offset`` holds the token at position
``page_index * page_size + offset`` of the sequence that owns ``page``.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from structgen.runtime.forward_batch import ForwardBatch

__all__ = [
    "RefAttentionPlan",
    "attention_backend",
    "paged_attention",
    "paged_attention_ref",
    "plan_ref_attention",
    "plan_triton_attention",
    "store_kv",
]

_BACKENDS = ("auto", "triton", "torch")
_BACKEND: contextvars.ContextVar[str] = contextvars.ContextVar("structgen_attention_backend", default="auto")


@contextlib.contextmanager
def attention_backend(name: str):
    """Within the ``with`` block, :func:`paged_attention` and :func:`store_kv` use ``name``.

    Args:
        name: ``"auto"`` (Triton on CUDA, torch elsewhere), ``"triton"`` (the kernels; on CPU
            only under Triton's interpreter, for tests) or ``"torch"`` (the references).

    Raises:
        ValueError: an unknown name.
    """
    if name not in _BACKENDS:
        raise ValueError(f"attention backend must be one of {_BACKENDS}, got {name!r}")
    token = _BACKEND.set(name)
    try:
        yield
    finally:
        _BACKEND.reset(token)


def _use_triton(t: torch.Tensor) -> bool:
    backend = _BACKEND.get()
    return backend == "triton" or (backend == "auto" and t.is_cuda)


@dataclass
class RefAttentionPlan:
    """Metadata of one step for :func:`paged_attention_ref`, computed once, shared by all layers.

    Attributes:
        gather_slots: ``[B, L]`` int64, KV slot of position ``0..L-1`` of each sequence
            (``L`` = longest prefix + extension; padding points into the scratch page).
        q_rows: ``[T]`` int64, batch row of each new token (``batch.seq_ids``).
        q_cols: ``[T]`` int64, index of each new token within its sequence's extension.
        mask: ``[B, 1, E, L]`` bool, True where query ``e`` may attend key position ``l``
            (causal within its sequence; ``E`` = longest extension).
        max_ext: ``E``.
        trivial_queries: True when every sequence extends by exactly one token in
            batch order (pure decode), so queries need no scatter.
    """

    gather_slots: torch.Tensor
    q_rows: torch.Tensor
    q_cols: torch.Tensor
    mask: torch.Tensor
    max_ext: int
    trivial_queries: bool


def plan_ref_attention(batch: ForwardBatch, sliding_window: int | None = None) -> RefAttentionPlan:
    """Plan (once per step; cached in ``batch.plans``) the gathers and mask of the torch path.

    One host sync per step (the longest sequence and extension), none per layer.

    Args:
        batch: the step's metadata.
        sliding_window: None for full causal attention; else ``W``: the query at position
            ``p`` sees keys ``p - W + 1 .. p`` (transformers' ``kv_idx > q_idx - W``).
            Each window size is planned once per step and cached separately.
    """
    page_size = batch.page_size
    assert page_size > 0, "ForwardBatch.page_size must be set (ForwardBatch.build sets it)"
    key = ("ref", sliding_window)
    plan = batch.plans.get(key)
    if plan is not None:
        return plan
    dev = batch.input_ids.device
    kv_lens = batch.prefix_lens + batch.extend_lens  # [B]
    max_len, max_ext = (int(v) for v in torch.stack([kv_lens.max(), batch.extend_lens.max()]).tolist())
    pos = torch.arange(max_len, device=dev)  # [L]
    gather_slots = batch.page_table[:, pos // page_size] * page_size + pos % page_size  # [B, L]
    q_rows = batch.seq_ids
    q_cols = batch.positions - batch.prefix_lens[q_rows]  # [T]
    ext_idx = torch.arange(max_ext, device=dev)  # [E]
    # query e of sequence b sits at position prefix_lens[b] + e and sees keys 0 .. that position
    q_pos = batch.prefix_lens[:, None] + ext_idx[None, :]  # [B, E]
    mask = pos[None, None, :] <= q_pos[:, :, None]  # [B, E, L]
    mask = mask & (pos[None, None, :] < kv_lens[:, None, None])
    if sliding_window is not None:
        mask = mask & (pos[None, None, :] > q_pos[:, :, None] - sliding_window)
    trivial = max_ext == 1 and batch.num_tokens == batch.batch_size
    plan = RefAttentionPlan(gather_slots, q_rows, q_cols, mask.unsqueeze(1), max_ext, trivial)
    batch.plans[key] = plan
    return plan


def store_kv(k: torch.Tensor, v: torch.Tensor, k_slots: torch.Tensor, v_slots: torch.Tensor, out_slots: torch.Tensor) -> None:
    """Write new tokens' K/V ``[T, kv_heads, d]`` into the cache rows ``out_slots`` ``[T]`` (in place).

    On CUDA (or under ``attention_backend("triton")``) this is the Triton ``store_kv``
    kernel (same signature); elsewhere ``index_copy_``.
    """
    if _use_triton(k):
        from structgen.kernels.store_kv import store_kv as store_kv_kernel

        store_kv_kernel(k, v, k_slots, v_slots, out_slots, backend="triton")
        return
    k_slots.index_copy_(0, out_slots, k.to(k_slots.dtype))
    v_slots.index_copy_(0, out_slots, v.to(v_slots.dtype))


def paged_attention_ref(
    q: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    batch: ForwardBatch,
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Causal attention of each new token to its sequence's cached and new tokens (vectorised).

    The new tokens' K/V must already be stored at ``batch.out_slots``.

    Args:
        q: ``[T, heads, d]`` queries of the new tokens (RoPE applied).
        k_slots: ``[num_slots, kv_heads, d]`` a layer's K cache (``heads % kv_heads == 0``).
        v_slots: ``[num_slots, kv_heads, d]`` a layer's V cache.
        batch: the step's metadata.
        scale: softmax scale, usually ``d ** -0.5``.
        sliding_window: None, or the window ``W`` (keys ``p - W + 1 .. p``; Mistral).

    Returns:
        ``[T, heads, d]`` attention output, dtype of ``q``.

    Raises:
        never (shapes are internal invariants).
    """
    plan = plan_ref_attention(batch, sliding_window)
    num_tokens, heads, d = q.shape
    bsz = batch.page_table.shape[0]
    kv_heads = k_slots.shape[1]
    k = k_slots[plan.gather_slots].transpose(1, 2)  # [B, kv_heads, L, d]
    v = v_slots[plan.gather_slots].transpose(1, 2)  # [B, kv_heads, L, d]
    if plan.trivial_queries:
        qp = q.unsqueeze(2)  # [B, heads, 1, d]
    else:
        qp = q.new_zeros(bsz, plan.max_ext, heads, d)
        qp[plan.q_rows, plan.q_cols] = q
        qp = qp.transpose(1, 2)  # [B, heads, E, d]
    # GQA/MQA: SDPA maps query head h to KV head h // (heads // kv_heads) itself (no K/V copies)
    out = F.scaled_dot_product_attention(
        qp, k.to(q.dtype), v.to(q.dtype), attn_mask=plan.mask, scale=scale, enable_gqa=kv_heads != heads
    )
    if plan.trivial_queries:
        return out.squeeze(2)  # [T, heads, d]
    return out.transpose(1, 2)[plan.q_rows, plan.q_cols]  # [T, heads, d]


def plan_triton_attention(batch: ForwardBatch, max_extend_len: int | None = None) -> tuple[int, bool]:
    """``(max_extend_len, is_decode)`` of the step for the kernels, planned once, cached in ``batch.plans``.

    Args:
        batch: the step's metadata.
        max_extend_len: the longest extension if the caller knows it (no host sync; the
            CUDA-graph runner passes 1 for its padded decode batches); None reads it from
            ``batch.extend_lens`` (one host sync per step).

    Returns:
        The longest extension, and whether the step is pure decode (one new token per
        sequence, in batch order), which runs ``paged_decode_attention``.
    """
    plan = batch.plans.get("triton")
    if plan is None:
        max_ext = int(batch.extend_lens.max()) if max_extend_len is None else int(max_extend_len)
        plan = batch.plans["triton"] = (max_ext, max_ext == 1 and batch.num_tokens == batch.batch_size)
    return plan


def paged_attention(
    q: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    batch: ForwardBatch,
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Backend dispatch; same contract as :func:`paged_attention_ref`.

    On CUDA (or under ``attention_backend("triton")``) it runs the Triton kernels of
    ``structgen.kernels``: ``paged_decode_attention`` for a pure decode step,
    ``extend_attention`` otherwise, both with the layer's sliding window; elsewhere the
    torch reference. The kernels read the cache as pages,
    ``[num_pages, page_size, kv_heads, d]``; the step's plan (one host sync, the longest
    extension) is made once and shared by all layers (:func:`plan_triton_attention`).
    """
    if not _use_triton(q):
        return paged_attention_ref(q, k_slots, v_slots, batch, scale, sliding_window)
    from structgen.kernels.extend_attention import extend_attention
    from structgen.kernels.paged_decode_attention import paged_decode_attention

    max_ext, is_decode = plan_triton_attention(batch)
    kv_heads, d = k_slots.shape[1:]
    k_cache = k_slots.view(-1, batch.page_size, kv_heads, d)  # [pages, page_size, kvh, d]
    v_cache = v_slots.view(-1, batch.page_size, kv_heads, d)
    if is_decode:
        seq_lens = batch.prefix_lens + batch.extend_lens  # [B]
        return paged_decode_attention(q, k_cache, v_cache, batch.page_table, seq_lens, scale, None,
                                      sliding_window, backend="triton")
    return extend_attention(q, k_cache, v_cache, batch.page_table, batch.prefix_lens,
                            batch.extend_lens, scale, max_ext, sliding_window, backend="triton")
