"""Paged attention on CPU: the fused C kernel for short extensions, SDPA for the rest.

Decode rows, jump-forward runs and speculative verification (extensions of at most
:data:`SHORT_EXTEND` tokens) attend through ``cpu_ops.paged_attention``, which reads the
cache in place; prefill chunks go through :func:`attention_sdpa.paged_attention_sdpa` on a
sub-batch of just those sequences (SDPA's blocked kernels win there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.models.attention_sdpa import paged_attention_sdpa, row_remap

__all__ = ["CpuAttentionPlan", "SHORT_EXTEND", "paged_attention_cpu", "plan_cpu_attention"]

SHORT_EXTEND = 16  # sequences extending by at most this many tokens attend through the C kernel


@dataclass
class CpuAttentionPlan:
    """How a step splits between the fused C kernel and the SDPA path on CPU.

    Sequences extending by at most :data:`SHORT_EXTEND` tokens (decode rows, jump-forward
    runs, speculative verification) attend through ``cpu_ops.paged_attention``, which reads
    the cache in place; longer prefill chunks go through :func:`paged_attention_sdpa` on a
    sub-batch of just those sequences.

    Attributes:
        short_idx: ``[Ts]`` int64 flat token rows for the kernel, or None when it is every token.
        long_idx: ``[Tl]`` int64 flat token rows for SDPA, or None when there are none.
        long_batch: the sub-batch of the long sequences (its own ``plans`` cache), or None.
    """

    short_idx: torch.Tensor | None
    long_idx: torch.Tensor | None
    long_batch: ForwardBatch | None


def _sub_batch(batch: ForwardBatch, rows: torch.Tensor, token_idx: torch.Tensor) -> ForwardBatch:
    """The sequences ``rows`` ``[Bs]`` of ``batch`` (owning ``token_idx`` ``[Ts]``) as a
    ForwardBatch.
    """
    remap = row_remap(batch, rows)
    return ForwardBatch(
        input_ids=batch.input_ids[token_idx],
        positions=batch.positions[token_idx],
        out_slots=batch.out_slots[token_idx],
        seq_ids=remap[batch.seq_ids[token_idx]],
        prefix_lens=batch.prefix_lens[rows],
        extend_lens=batch.extend_lens[rows],
        page_table=batch.page_table[rows],
        logits_indices=torch.zeros(0, dtype=torch.int64),
        page_size=batch.page_size,
    )


def plan_cpu_attention(batch: ForwardBatch) -> CpuAttentionPlan:
    """Split the step's tokens into short and long extensions (once per step; cached in
    ``batch.plans``).
    """
    plan = batch.plans.get("cpu")
    if plan is not None:
        return plan
    long_seq = batch.extend_lens > SHORT_EXTEND  # [B]
    if not bool(long_seq.any()):
        plan = CpuAttentionPlan(None, None, None)
    else:
        is_long = long_seq[batch.seq_ids]  # [T]
        long_idx = torch.nonzero(is_long).flatten()
        short_idx = torch.nonzero(~is_long).flatten()
        rows = torch.nonzero(long_seq).flatten()
        plan = CpuAttentionPlan(short_idx, long_idx, _sub_batch(batch, rows, long_idx))
    batch.plans["cpu"] = plan
    return plan


def paged_attention_cpu(
    q, k_slots, v_slots, batch: ForwardBatch, scale: float, sliding_window
) -> torch.Tensor:
    """CPU :func:`paged_attention`: the C kernel for short extensions, SDPA for the rest."""
    plan = plan_cpu_attention(batch)
    if plan.long_idx is None:
        return cpu_ops.paged_attention(
            q,
            k_slots,
            v_slots,
            batch.page_table,
            batch.seq_ids,
            batch.positions,
            batch.page_size,
            scale,
            sliding_window,
        )
    long_out = paged_attention_sdpa(
        q[plan.long_idx], k_slots, v_slots, plan.long_batch, scale, sliding_window
    )
    if plan.short_idx.numel() == 0:
        return long_out
    out = long_out.new_empty(q.shape[0], *long_out.shape[1:])  # [T, heads, dv]
    out[plan.long_idx] = long_out
    idx = plan.short_idx
    out[idx] = cpu_ops.paged_attention(
        q[idx],
        k_slots,
        v_slots,
        batch.page_table,
        batch.seq_ids[idx],
        batch.positions[idx],
        batch.page_size,
        scale,
        sliding_window,
    )
    return out
