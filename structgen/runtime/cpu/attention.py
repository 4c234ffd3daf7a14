"""Paged attention on CPU: every extension through the fused C kernel.

Decode rows, jump-forward runs, speculative verification and prefill chunks all attend through
``cpu_ops.paged_attention``, which reads the cache in place and computes each query row on its
own (its keys ``0 .. position``, one summation order). A token's attention output therefore does
not depend on how its sequence was chunked nor on what else shares the step: a prompt prefilled
in one chunk or many, a row decoded alone or in a batch of 64, a token verified inside a
``k + 1``-row speculative extension or decoded one at a time all give the same bits. Routing
long chunks through SDPA instead broke that (its blocked kernels sum in another order; under int8
activations the difference reached whole logits), and measured no faster on prefill
(``benchmarks/RESULTS.md``, #21).
"""

from __future__ import annotations

import torch

from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.forward_batch import ForwardBatch

__all__ = ["paged_attention_cpu"]


def paged_attention_cpu(
    q: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    batch: ForwardBatch,
    scale: float,
    sliding_window: int | None,
) -> torch.Tensor:
    """CPU :func:`~structgen.runtime.models.attention.paged_attention`: the C kernel for every
    token of the step.

    Args:
        q: ``[T, H, d]`` (or ``[T, H * d]``) queries of the step's tokens, RoPE applied.
        k_slots: ``[num_slots, KVH, d]`` the layer's key cache (the step's keys already stored).
        v_slots: the layer's value cache, likewise.
        batch: the step's metadata (page table, each token's sequence row and position).
        scale: softmax scale.
        sliding_window: None, or the window ``W`` (keys ``position - W + 1 .. position``).

    Returns:
        ``[T, H, d]`` in ``q``'s dtype (fp32 accumulation), each row independent of the others.

    Raises:
        KernelArgumentError: shapes that disagree (see ``cpu_ops.paged_attention``).
    """
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
