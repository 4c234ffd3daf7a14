"""Sampler: turns a batch of logits into next tokens (greedy, temperature, top-k/p, min-p, seeds).

All rows are processed with batched tensor ops; only seeded rows draw their random
numbers from their own ``torch.Generator`` (one small draw per seeded row).
Sampling uses the Gumbel/exponential race (``argmax(p / E)`` with ``E ~ Exp(1)``),
which samples exactly from ``p`` and needs one uniform draw per token per row.

On CPU the per-step row gather and the greedy argmax go through numpy, and a step of a few rows
runs its torch ops on the calling thread (``few_rows_serial``): torch splits an op over a
vocabulary-sized tensor (over 32,768 elements) across its intra-op OpenMP pool, and waking that
pool costs far more than the work (hundreds of microseconds on an idle 2-core machine, tens of
milliseconds when the cores are busy).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from structgen.runtime.sampling_params import SamplingParams

__all__ = ["sample", "filter_probs", "take_rows", "few_rows_serial", "SERIAL_MAX_ROWS"]

SERIAL_MAX_ROWS = 8
"""Rows up to which ``few_rows_serial`` keeps a CPU step's sampling on one thread (a top-p sort
of more rows is long enough for the pool to pay)."""

_NUMPY_DTYPES = (torch.float32, torch.float64)


def _numpy_ok(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and t.dtype in _NUMPY_DTYPES


def take_rows(logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``logits[rows]``: a new ``[len(rows), V]`` tensor (a copy, never a view).

    Raises:
        IndexError: a row out of range.
    """
    if rows and _numpy_ok(logits):
        return torch.from_numpy(logits.detach().numpy()[rows])
    return logits[rows]


@contextmanager
def few_rows_serial(logits: torch.Tensor, max_rows: int = SERIAL_MAX_ROWS) -> Iterator[None]:
    """Run the block's torch ops on the calling thread when ``logits`` ``[R, V]`` is on CPU
    and ``R <= max_rows`` (``torch.set_num_threads(1)``, restored on exit, also on error);
    otherwise a no-op. Greedy picks are the same either way; a reduction over a row (a top-p
    cumulative sum, a normalising sum) may round differently with another split, as it may
    already with another batch shape.
    """
    n = torch.get_num_threads()
    if logits.device.type != "cpu" or logits.shape[0] > max_rows or n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _argmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """``logits.argmax(dim=-1)`` (first maximum; NaN counts as the maximum; int64)."""
    if logits.shape[0] and logits.shape[1] and _numpy_ok(logits):
        return torch.from_numpy(logits.detach().numpy().argmax(axis=-1).astype("int64"))
    return logits.argmax(dim=-1)


TOP_CANDIDATES = 1024
"""Probabilities ``filter_probs`` ranks first (``topk``) before sorting a whole row."""


def filter_probs(probs: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """Apply top-k, top-p and min-p filtering to ``probs`` ``[R, V]`` (renormalised).

    Top-k / top-p rank the ``TOP_CANDIDATES`` largest probabilities of each row first and
    sort the whole row only when a row's top-k is larger or their mass is under its top-p:
    the tokens past them are dropped either way (the mass before each already reaches
    top-p, as a cumulative sum of non-negative terms never decreases), so the kept set and
    its values are those of the whole-row sort (bit for bit on CPU, whose cumulative sum is
    sequential; equal values may swap places, as in any unstable sort).
    """
    rows, vocab = probs.shape
    dev = probs.device
    top_k = torch.tensor([p.top_k if p.top_k > 0 else vocab for p in params], device=dev)
    top_p = torch.tensor([p.top_p for p in params], dtype=probs.dtype, device=dev)
    min_p = torch.tensor([p.min_p for p in params], dtype=probs.dtype, device=dev)
    need = (top_k < vocab) | (top_p < 1.0)  # rows whose top-k / top-p drops something
    if bool(need.any()):
        idx = need.nonzero().flatten()
        sub, top_k, top_p = probs[idx], top_k[idx], top_p[idx]
        width = vocab
        widest_k = max((p.top_k for p in params if 0 < p.top_k < vocab), default=0)
        if TOP_CANDIDATES < vocab and widest_k <= TOP_CANDIDATES:
            sorted_p, order = sub.topk(TOP_CANDIDATES, dim=-1)  # [S, C], descending
            reached = (top_k <= TOP_CANDIDATES) | (sorted_p.cumsum(dim=-1)[:, -1] >= top_p)
            width = TOP_CANDIDATES if bool(reached.all()) else vocab
        if width == vocab:
            sorted_p, order = sub.sort(dim=-1, descending=True)  # [S, V]
        ranks = torch.arange(width, device=dev).expand(idx.shape[0], -1)
        drop = ranks >= top_k.unsqueeze(1)
        cum = sorted_p.cumsum(dim=-1)
        drop |= (cum - sorted_p) >= top_p.unsqueeze(1)  # keep the smallest set reaching top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = probs.clone()
        probs[idx] = torch.zeros_like(sub).scatter_(1, order, sorted_p)
    if bool((min_p > 0).any()):
        cutoff = probs.max(dim=-1, keepdim=True).values * min_p.unsqueeze(1)
        probs = probs.masked_fill(probs < cutoff, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True).clamp_min(1e-30)


def sample(
    logits: torch.Tensor,
    params: list[SamplingParams],
    generators: list[torch.Generator | None],
) -> torch.Tensor:
    """Pick one token per row.

    Args:
        logits: ``[R, V]`` float32, already masked (``-inf`` = forbidden). Not modified.
        params: one SamplingParams per row.
        generators: per row, a seeded ``torch.Generator`` (on ``logits.device``) or None
            for the default generator.

    Returns:
        ``[R]`` int64 token ids (on ``logits.device``).

    Raises:
        never (a row with every logit ``-inf`` returns token 0; the caller's grammar check
        rejects it).
    """
    rows = logits.shape[0]
    greedy_tok = _argmax_rows(logits)
    if all(p.is_greedy for p in params):
        return greedy_tok
    temps = torch.tensor(
        [p.temperature if not p.is_greedy else 1.0 for p in params],
        dtype=torch.float32,
        device=logits.device,
    )
    probs = torch.softmax(logits.float() / temps.unsqueeze(1), dim=-1)
    probs = filter_probs(probs, params)
    noise = torch.empty_like(probs)
    noise.exponential_()
    for r, gen in enumerate(generators):
        if gen is not None:
            noise[r].exponential_(generator=gen)
    sampled = (probs / noise).argmax(dim=-1)
    is_greedy = torch.tensor([p.is_greedy for p in params], device=logits.device)
    return torch.where(is_greedy, greedy_tok, sampled) if rows else sampled
