"""Batched logits processing before sampling: logit bias, penalties, log-probabilities.

Penalties follow OpenAI's presence/frequency definitions and CTRL's repetition penalty
(Keskar et al. 2019, as in Hugging Face's ``RepetitionPenaltyLogitsProcessor``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from structgen.runtime.device_boundary import is_tensor, numpy_float
from structgen.runtime.request import Request
from structgen.runtime.sampler import host_array

if TYPE_CHECKING:
    import torch

__all__ = ["apply_penalties_and_bias", "top_logprobs"]


def apply_penalties_and_bias(logits: Any, reqs: list[Request]) -> None:
    """Apply each row's logit bias and penalties to ``logits`` ``[R, V]`` in place.

    ``logits`` is a numpy array or a CPU tensor (processed with numpy, in the same memory), or
    a device tensor (torch). Rows whose params need nothing are skipped; the rest are
    processed together, in ``logits``' float dtype: ``l - freq * count - pres * (count > 0)``,
    then the repetition penalty on every token seen in the prompt or the output
    (``l / rep`` where ``l > 0``, else ``l * rep``), then ``logit_bias`` added.

    Raises: never (ids out of the vocabulary in ``logit_bias`` are ignored).
    """
    rows = [r for r, req in enumerate(reqs) if req.params.needs_logits_processing]
    if not rows:
        return
    if is_tensor(logits) and logits.device.type != "cpu":
        _apply_torch(logits, reqs, rows)
        return
    if is_tensor(logits) and not numpy_float(logits):
        view = logits.float()  # a float32 copy of a half-precision tensor, written back below
        apply_penalties_and_bias(view, reqs)
        logits.copy_(view)
        return
    x = host_array(logits)
    vocab = x.shape[1]
    sub = x[rows]  # [S, V] copy
    dt = sub.dtype.type
    params = [reqs[r].params for r in rows]
    outs = [reqs[r].output_token_ids for r in rows]
    counts = np.zeros(sub.shape, dtype=sub.dtype)
    which = np.repeat(np.arange(len(rows)), [len(o) for o in outs])
    if which.size:
        np.add.at(counts, (which, np.concatenate(outs).astype(np.int64)), dt(1))
    pres = np.array([p.presence_penalty for p in params], dtype=sub.dtype)
    freq = np.array([p.frequency_penalty for p in params], dtype=sub.dtype)
    sub -= freq[:, None] * counts + pres[:, None] * (counts > 0).astype(sub.dtype)
    rep = np.array([p.repetition_penalty for p in params], dtype=sub.dtype)
    if (rep != 1.0).any():
        seen = counts > 0
        prompts = [reqs[r].prompt_token_ids for r in rows]
        which = np.repeat(np.arange(len(rows)), [len(s) for s in prompts])
        if which.size:
            seen[which, np.concatenate(prompts).astype(np.int64)] = True
        scaled = np.where(sub > 0, sub / rep[:, None], sub * rep[:, None])
        sub = np.where(seen, scaled, sub)
    for i, p in enumerate(params):
        if p.logit_bias:
            ids = [t for t in p.logit_bias if 0 <= t < vocab]
            if ids:
                sub[i, ids] += np.array([p.logit_bias[t] for t in ids], dtype=sub.dtype)
    x[rows] = sub


def _padded(seqs: list[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``[R, L]`` int64 ids (padded with 0) and ``[R, L]`` bool validity."""
    import torch

    width = max(1, max(len(s) for s in seqs))
    ids = torch.zeros((len(seqs), width), dtype=torch.int64)
    valid = torch.zeros((len(seqs), width), dtype=torch.bool)
    for r, s in enumerate(seqs):
        if s:
            ids[r, : len(s)] = torch.tensor(s, dtype=torch.int64)
            valid[r, : len(s)] = True
    return ids.to(device), valid.to(device)


def _apply_torch(logits: torch.Tensor, reqs: list[Request], rows: list[int]) -> None:
    """:func:`apply_penalties_and_bias` for a device tensor (the same steps in torch)."""
    import torch

    dev, vocab = logits.device, logits.shape[1]
    sub = logits[rows]  # [S, V]
    params = [reqs[r].params for r in rows]
    out_ids, out_valid = _padded([reqs[r].output_token_ids for r in rows], dev)
    counts = torch.zeros_like(sub).scatter_add_(1, out_ids, out_valid.to(sub.dtype))  # [S, V]
    pres = torch.tensor([p.presence_penalty for p in params], dtype=sub.dtype, device=dev)
    freq = torch.tensor([p.frequency_penalty for p in params], dtype=sub.dtype, device=dev)
    sub -= freq[:, None] * counts + pres[:, None] * (counts > 0).to(sub.dtype)
    rep = torch.tensor([p.repetition_penalty for p in params], dtype=sub.dtype, device=dev)
    if bool((rep != 1.0).any()):
        seen = counts > 0
        all_ids, all_valid = _padded([reqs[r].prompt_token_ids for r in rows], dev)
        seen |= torch.zeros_like(seen).scatter_(1, all_ids, all_valid)
        scaled = torch.where(sub > 0, sub / rep[:, None], sub * rep[:, None])
        sub = torch.where(seen, scaled, sub)
    for i, p in enumerate(params):
        if p.logit_bias:
            ids = [t for t in p.logit_bias if 0 <= t < vocab]
            if ids:
                idx = torch.tensor(ids, device=dev)
                vals = torch.tensor([p.logit_bias[t] for t in ids], dtype=sub.dtype, device=dev)
                sub[i].index_add_(0, idx, vals)
    logits[rows] = sub


def top_logprobs(logits: Any, chosen: Any, k: list[int]) -> list[dict[int, float]]:
    """Log-probabilities of the chosen token and the top ``k[r]`` tokens of each row.

    Args:
        logits: ``[R, V]`` float (processed and masked): a numpy array or a CPU tensor (numpy,
            float32 log-softmax), or a device tensor (torch).
        chosen: ``[R]`` int64, the token of each row to report (an array, a tensor or a list).
        k: per row, how many top alternatives to add (0 = only the chosen token).

    Returns:
        Per row, ``{token_id: logprob}`` (chosen token first, then the top ``k[r]`` by
        decreasing log-probability; on the host equal values in increasing token id, and
        which of several equal values at the ``k``-th place are kept is unspecified, as with
        ``torch.topk``).
    """
    chosen_ids = chosen.tolist() if hasattr(chosen, "tolist") else list(chosen)
    kmax = max(k) if k else 0
    if is_tensor(logits) and logits.device.type != "cpu":
        import torch

        logp_t = torch.log_softmax(logits.float(), dim=-1)  # [R, V]
        top_v, top_i = logp_t.topk(kmax, dim=-1) if kmax else (None, None)
        idx = torch.tensor(chosen_ids, device=logits.device).view(-1, 1)
        chosen_lp = logp_t.gather(1, idx).squeeze(1).tolist()
        top_v = top_v.tolist() if kmax else None
        top_i = top_i.tolist() if kmax else None
    else:
        x = host_array(logits).astype(np.float32, copy=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            z = x - x.max(axis=1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))  # [R, V] float32
        chosen_lp = logp[np.arange(len(chosen_ids)), chosen_ids].tolist() if chosen_ids else []
        if kmax:
            vocab = logp.shape[1]
            kk = min(kmax, vocab)
            part = np.argpartition(-logp, kk - 1, axis=1)[:, :kk] if kk < vocab else None
            if part is None:
                part = np.broadcast_to(np.arange(vocab), logp.shape)
            vals = np.take_along_axis(logp, part, 1)
            order = np.lexsort((part, -vals), axis=1)  # by value, descending; then by id
            top_i = np.take_along_axis(part, order, 1).tolist()
            top_v = np.take_along_axis(vals, order, 1).tolist()
    out = []
    for r, tok in enumerate(chosen_ids):
        d = {tok: chosen_lp[r]}
        if k[r]:
            for t, v in zip(top_i[r][: k[r]], top_v[r][: k[r]]):
                d.setdefault(t, v)
        out.append(d)
    return out
