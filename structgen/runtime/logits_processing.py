"""Batched logits processing before sampling: logit bias, penalties, log-probabilities.

Penalties follow OpenAI's presence/frequency definitions and CTRL's repetition penalty
(Keskar et al. 2019, as in Hugging Face's ``RepetitionPenaltyLogitsProcessor``).
"""

from __future__ import annotations

import torch

from structgen.runtime.request import Request

__all__ = ["apply_penalties_and_bias", "top_logprobs"]


def _padded(seqs: list[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``[R, L]`` int64 ids (padded with 0) and ``[R, L]`` bool validity."""
    width = max(1, max(len(s) for s in seqs))
    ids = torch.zeros((len(seqs), width), dtype=torch.int64)
    valid = torch.zeros((len(seqs), width), dtype=torch.bool)
    for r, s in enumerate(seqs):
        if s:
            ids[r, : len(s)] = torch.tensor(s, dtype=torch.int64)
            valid[r, : len(s)] = True
    return ids.to(device), valid.to(device)


def apply_penalties_and_bias(logits: torch.Tensor, reqs: list[Request]) -> None:
    """Apply each row's logit bias and penalties to ``logits`` ``[R, V]`` in place.

    Rows whose params need nothing are skipped; the rest are processed together.
    Raises: never (ids out of the vocabulary in ``logit_bias`` are ignored).
    """
    rows = [r for r, req in enumerate(reqs) if req.params.needs_logits_processing]
    if not rows:
        return
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


def top_logprobs(
    logits: torch.Tensor, chosen: torch.Tensor, k: list[int]
) -> list[dict[int, float]]:
    """Log-probabilities of the chosen token and the top ``k[r]`` tokens of each row.

    Args:
        logits: ``[R, V]`` float32 (processed and masked).
        chosen: ``[R]`` int64, the token of each row to report.
        k: per row, how many top alternatives to add (0 = only the chosen token).

    Returns:
        Per row, ``{token_id: logprob}`` (chosen token first).
    """
    logp = torch.log_softmax(logits.float(), dim=-1)  # [R, V]
    kmax = max(k) if k else 0
    top_v, top_i = logp.topk(kmax, dim=-1) if kmax else (None, None)
    chosen_lp = logp.gather(1, chosen.view(-1, 1)).squeeze(1).tolist()
    out = []
    for r, tok in enumerate(chosen.tolist()):
        d = {tok: chosen_lp[r]}
        if k[r]:
            for t, v in zip(top_i[r, : k[r]].tolist(), top_v[r, : k[r]].tolist()):
                d.setdefault(t, v)
        out.append(d)
    return out
