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
        chosen_lp, top_i, top_v = _top_logprobs_host(
            host_array(logits).astype(np.float32, copy=False), chosen_ids, kmax
        )
    out = []
    for r, tok in enumerate(chosen_ids):
        d = {tok: chosen_lp[r]}
        if k[r]:
            for t, v in zip(top_i[r][: k[r]], top_v[r][: k[r]]):
                d.setdefault(t, v)
        out.append(d)
    return out


def _top_logprobs_host(
    x: np.ndarray, chosen_ids: list[int], kmax: int
) -> tuple[list[float], list[list[int]] | None, list[list[float]] | None]:
    """:func:`top_logprobs` on the host: the chosen tokens' log-probabilities and, with
    ``kmax``, each row's top ``min(kmax, V)`` ids and log-probabilities (by decreasing value,
    equal values by increasing id).

    ``x`` is ``[R, V]`` float32. Every log-probability is ``(x - max) - log(sum(exp(x - max)))``
    in float32 (the row's log-softmax); only the entries reported are formed. A row's top ids
    are sorted out of its candidates (:func:`_top_candidates`), which hold them all unless a
    value equal to the ``kmax``-th lies beyond them: where the ``kmax + 1``-th candidate's
    value is not below the ``kmax``-th (a tie at the cut) or the row's maximum is not finite,
    the row is selected whole with ``argpartition``. Raises: never.
    """
    rows, vocab = x.shape
    kk = min(kmax, vocab)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = x.max(axis=1, keepdims=True)  # [R, 1]
        cands = _top_candidates(x, kk) if 0 < kk < vocab else None
        z = x - m  # [R, V], a fresh array: exponentiated in place below
        zc = [z[r, c] for r, c in enumerate(cands)] if cands is not None else None
        chosen_z = z[np.arange(len(chosen_ids)), chosen_ids] if chosen_ids else None
        lse = np.log(np.exp(z, out=z).sum(axis=1, keepdims=True))  # [R, 1]
        chosen_lp = (chosen_z - lse[:, 0]).tolist() if chosen_ids else []
        if not kk:
            return chosen_lp, None, None
        top_i: list[list[int]] = []
        top_v: list[list[float]] = []
        for r in range(rows):
            ids = vals = None
            if cands is not None and np.isfinite(m[r, 0]):
                v = zc[r] - lse[r]  # the candidates' log-probabilities, [C], C > kk
                order = np.lexsort((cands[r], -v))  # by value, descending; then by id
                if v[order[kk]] < v[order[kk - 1]]:  # no tie at the cut
                    ids, vals = cands[r][order[:kk]], v[order[:kk]]
            if ids is None:  # the whole row
                logp = (x[r] - m[r]) - lse[r]
                part = np.argpartition(-logp, kk - 1)[:kk] if kk < vocab else np.arange(vocab)
                vals = logp[part]
                order = np.lexsort((part, -vals))
                ids, vals = part[order], vals[order]
            top_i.append(ids.tolist())
            top_v.append(vals.tolist())
    return chosen_lp, top_i, top_v


def _top_candidates(x: np.ndarray, k: int) -> list[np.ndarray]:
    """Per row of ``x`` ``[R, V]`` float32 (``0 < k < V``), in increasing order, the ids of
    the entries at least as large as the ``k + 1``-th largest maximum of the row's blocks
    (about ``4k`` blocks of equal width, the last one the rest).

    So a row has more than ``k`` candidates, and every entry left out is smaller than all of
    them: with ``f`` monotone, an entry beyond them has ``f`` at most the smallest
    candidate's. Raises: never.
    """
    rows, vocab = x.shape
    width = max(1, vocab // (4 * k))
    whole = vocab // width * width
    maxima = x[:, :whole].reshape(rows, -1, width).max(axis=2)  # [R, blocks >= 4k]
    if whole < vocab:
        maxima = np.concatenate([maxima, x[:, whole:].max(axis=1, keepdims=True)], axis=1)
    n = maxima.shape[1]
    cut = np.partition(maxima, n - k - 1, axis=1)[:, n - k - 1]  # [R]
    return [np.flatnonzero(x[r] >= cut[r]) for r in range(rows)]
