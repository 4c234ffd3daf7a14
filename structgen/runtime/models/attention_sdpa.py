"""The torch path of paged attention: SDPA over pages gathered per step.

:func:`paged_attention_sdpa` runs where the kernels do not (MLA's value dimension, CPU without
the fused C ops, the ``"torch"`` backend); like them it is tested against the op's one reference,
``structgen.kernels.paged_attention.paged_attention_ref``. The step's gathers and masks are
planned once (:func:`plan_sdpa_attention`) and shared by all layers.

Layout: ``k_slots``/``v_slots`` are a layer's cache viewed as
``[num_slots, num_kv_heads, head_dim]``; slot ``page * page_size + offset`` holds the token
at position ``page_index * page_size + offset`` of the sequence that owns ``page``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from structgen.runtime.forward_batch import ForwardBatch

__all__ = [
    "SdpaAttentionGroup",
    "SdpaAttentionPlan",
    "paged_attention_sdpa",
    "plan_sdpa_attention",
    "row_remap",
]


@dataclass
class SdpaAttentionGroup:
    """Sequences of one step attended together by one SDPA call (a padded sub-batch).

    Attributes:
        token_idx: ``[Tg]`` int64 rows of the step's flat token axis in this group, or
            None when the group is the whole step (no gather/scatter of queries).
        gather_pages: ``[Bg * P]`` int64, the first ``P = ceil(L / page_size)`` pages of
            each sequence, row-major (``L`` = the group's longest prefix + extension; a
            sequence with fewer pages pads with page 0, whose keys are masked). Whole pages
            are gathered (``index_select`` over page rows, not per-slot indexing), then cut
            to ``L`` positions.
        max_len: ``L``.
        page_size: tokens per page.
        q_rows: ``[Tg]`` int64, group row of each of the group's tokens.
        q_cols: ``[Tg]`` int64, index of each token within its sequence's extension.
        mask: ``[Bg, 1, E, L]`` bool, True where query ``e`` may attend key position ``l``
            (causal within its sequence; ``E`` = the group's longest extension), or None
            when every query sees all ``L`` keys (one decoding sequence, no window).
        max_ext: ``E``.
        trivial_queries: True when every sequence of the group extends by exactly one
            token in order (decode), so queries need no scatter.
    """

    token_idx: torch.Tensor | None
    gather_pages: torch.Tensor
    max_len: int
    page_size: int
    q_rows: torch.Tensor
    q_cols: torch.Tensor
    mask: torch.Tensor | None
    max_ext: int
    trivial_queries: bool


@dataclass
class SdpaAttentionPlan:
    """Metadata of one step for :func:`paged_attention_sdpa`, computed once, shared by all layers.

    A mixed step (prefill chunks beside decode tokens) is split into a decode group and
    an extend group: padding every sequence to the longest extension would make each
    decoding sequence compute (and each layer gather) as many query rows as the longest
    prefill chunk, e.g. 512 instead of 1.

    Attributes:
        groups: one or two :class:`SdpaAttentionGroup` s.
    """

    groups: list[SdpaAttentionGroup]


def row_remap(batch: ForwardBatch, rows: torch.Tensor) -> torch.Tensor:
    """``[B]`` int64: the index of each batch row within ``rows`` ``[Bs]`` (-1: not in ``rows``)."""
    remap = torch.full((batch.batch_size,), -1, dtype=torch.int64, device=rows.device)
    remap[rows] = torch.arange(rows.numel(), device=rows.device)
    return remap


def _plan_group(
    batch: ForwardBatch,
    rows: torch.Tensor | None,
    token_idx: torch.Tensor | None,
    max_len: int,
    max_ext: int,
    decode: bool,
    sliding_window: int | None,
) -> SdpaAttentionGroup:
    """Plan one group: ``rows`` ``[Bg]`` of the batch (None = all) owning ``token_idx`` ``[Tg]``."""
    dev = batch.input_ids.device
    page_size = batch.page_size
    prefix_lens = batch.prefix_lens if rows is None else batch.prefix_lens[rows]  # [Bg]
    kv_lens = prefix_lens + (batch.extend_lens if rows is None else batch.extend_lens[rows])  # [Bg]
    page_table = batch.page_table if rows is None else batch.page_table[rows]  # [Bg, P]
    pos = torch.arange(max_len, device=dev)  # [L]
    gather_pages = page_table[:, : -(-max_len // page_size)].reshape(-1)  # [Bg * P]
    seq_ids = batch.seq_ids if token_idx is None else batch.seq_ids[token_idx]  # [Tg]
    if rows is None:
        q_rows = seq_ids
    else:
        q_rows = row_remap(batch, rows)[seq_ids]
    positions = batch.positions if token_idx is None else batch.positions[token_idx]
    q_cols = positions - prefix_lens[q_rows]  # [Tg]
    mask = None
    num_seqs = batch.batch_size if rows is None else rows.numel()
    if not (decode and sliding_window is None and num_seqs == 1):  # else every key is visible
        ext_idx = torch.arange(max_ext, device=dev)  # [E]
        # query e of sequence b sits at position prefix_lens[b] + e and sees keys 0 .. that position
        q_pos = prefix_lens[:, None] + ext_idx[None, :]  # [Bg, E]
        mask = pos[None, None, :] <= q_pos[:, :, None]  # [Bg, E, L]
        mask = mask & (pos[None, None, :] < kv_lens[:, None, None])
        if sliding_window is not None:
            mask = mask & (pos[None, None, :] > q_pos[:, :, None] - sliding_window)
        mask = mask.unsqueeze(1)
    return SdpaAttentionGroup(
        token_idx, gather_pages, max_len, page_size, q_rows, q_cols, mask, max_ext, decode
    )


def plan_sdpa_attention(
    batch: ForwardBatch, sliding_window: int | None = None
) -> SdpaAttentionPlan:
    """Plan (once per step; cached in ``batch.plans``) the gathers and masks of the torch path.

    One host sync per step (the sequences' lengths), none per layer.

    Args:
        batch: the step's metadata.
        sliding_window: None for full causal attention; else ``W``: the query at position
            ``p`` sees keys ``p - W + 1 .. p`` (transformers' ``kv_idx > q_idx - W``).
            Each window size is planned once per step and cached separately.
    """
    assert batch.page_size > 0, "ForwardBatch.page_size must be set (ForwardBatch.build sets it)"
    key = ("sdpa", sliding_window)
    plan = batch.plans.get(key)
    if plan is not None:
        return plan
    ext = batch.extend_lens.tolist()
    kv = (batch.prefix_lens + batch.extend_lens).tolist()
    in_order = batch.num_tokens == batch.batch_size  # decode tokens are one per sequence, in order
    decode_rows = [b for b, e in enumerate(ext) if e == 1]
    if len(decode_rows) in (0, len(ext)):  # one kind only: one group, no query gather
        decode = len(decode_rows) == len(ext) and in_order
        groups = [_plan_group(batch, None, None, max(kv), max(ext), decode, sliding_window)]
    else:
        dev = batch.input_ids.device
        is_decode = batch.extend_lens[batch.seq_ids] == 1  # [T]
        groups = []
        for sel, decode in ((is_decode, True), (~is_decode, False)):
            token_idx = torch.nonzero(sel).flatten()  # [Tg]
            rows = torch.unique_consecutive(batch.seq_ids[token_idx])  # [Bg], ascending
            members = rows.tolist()
            groups.append(
                _plan_group(
                    batch,
                    rows.to(dev),
                    token_idx,
                    max(kv[b] for b in members),
                    max(ext[b] for b in members),
                    decode,
                    sliding_window,
                )
            )
    plan = SdpaAttentionPlan(groups)
    batch.plans[key] = plan
    return plan


def paged_attention_sdpa(
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
    plan = plan_sdpa_attention(batch, sliding_window)
    if len(plan.groups) == 1:
        return _attend_group(q, k_slots, v_slots, plan.groups[0], scale)
    out = None
    for group in plan.groups:
        part = _attend_group(q[group.token_idx], k_slots, v_slots, group, scale)  # [Tg, heads, dv]
        if out is None:
            out = part.new_empty(
                q.shape[0], *part.shape[1:]
            )  # [T, heads, dv] (dv may differ from d: MLA)
        out[group.token_idx] = part
    return out


def _attend_group(
    q: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    group: SdpaAttentionGroup,
    scale: float,
):
    """``[Tg, heads, d]`` attention of a group's queries ``q`` ``[Tg, heads, d]``, one SDPA call."""
    num_tokens, heads, d = q.shape
    kv_heads = k_slots.shape[1]
    bsz = group.gather_pages.numel() // -(-group.max_len // group.page_size)

    def gather(slots: torch.Tensor) -> torch.Tensor:  # [num_slots, kvh, dk] -> [Bg, kvh, L, dk]
        pages = slots.unflatten(0, (-1, group.page_size)).index_select(
            0, group.gather_pages
        )  # [Bg*P, ps, kvh, dk]
        return pages.view(bsz, -1, *slots.shape[1:])[:, : group.max_len].transpose(1, 2)

    k, v = gather(k_slots), gather(v_slots)  # [Bg, kv_heads, L, dk], [Bg, kv_heads, L, dv]
    if group.trivial_queries:
        qp = q.unsqueeze(2)  # [Bg, heads, 1, d]
    else:
        qp = q.new_zeros(bsz, group.max_ext, heads, d)
        qp[group.q_rows, group.q_cols] = q
        qp = qp.transpose(1, 2)  # [Bg, heads, E, d]
    # GQA/MQA: SDPA maps query head h to KV head h // (heads // kv_heads) itself (no K/V copies)
    out = F.scaled_dot_product_attention(
        qp,
        k.to(q.dtype),
        v.to(q.dtype),
        attn_mask=group.mask,
        scale=scale,
        enable_gqa=kv_heads != heads,
    )
    if group.trivial_queries:
        return out.squeeze(2)  # [Tg, heads, d]
    return out.transpose(1, 2)[group.q_rows, group.q_cols]  # [Tg, heads, d]
