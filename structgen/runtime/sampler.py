"""Sampler: turns a batch of logits into next tokens (greedy, temperature, top-k/p, min-p, seeds).

Host logits (a numpy array, or a CPU tensor: viewed as one, no copy) are sampled with numpy;
torch runs only for device (CUDA) tensors, as an adapter at the device boundary. Results come
back in the caller's kind: a tensor for a tensor (``torch.from_numpy``), an array for an array.

Host sampling draws by inversion: one uniform per row, ``u * sum(w)``, found in the row's
float64 cumulative sum (first per block of ``BLOCK`` tokens, then inside the one block), so
a row costs its ``exp`` and one summing pass over the vocabulary, and tokens of zero weight
are never drawn. Unseeded rows draw from one process-wide ``numpy.random.Generator``; a
seeded row draws from its request's generator (:func:`make_generator`: numpy on the host,
``torch.Generator`` on a device). Device tensors keep the Gumbel/exponential race
(``argmax(p / E)``, ``E ~ Exp(1)``). Greedy rows are the first maximum of the row either way.

On CPU a step of a few rows can run the caller's torch ops on the calling thread
(``few_rows_serial``): torch splits an op over a vocabulary-sized tensor (over 32,768
elements) across its intra-op OpenMP pool, and waking that pool costs far more than the work
(hundreds of microseconds on an idle 2-core machine, tens of milliseconds when the cores are
busy).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from structgen.runtime.device_boundary import device_type, is_tensor, numpy_float
from structgen.runtime.sampling_params import SamplingParams

if TYPE_CHECKING:
    import torch

__all__ = [
    "sample",
    "filter_probs",
    "draw",
    "uniforms",
    "make_generator",
    "host_array",
    "take_rows",
    "few_rows_serial",
    "SERIAL_MAX_ROWS",
    "BLOCK",
]

SERIAL_MAX_ROWS = 8
"""Rows up to which ``few_rows_serial`` keeps a CPU step's sampling on one thread (a top-p sort
of more rows is long enough for the pool to pay)."""

BLOCK = 1024
"""Tokens per block of host sampling's two-level search (block sums, then one block's
cumulative sum)."""

_RNG = np.random.default_rng()  # unseeded host rows (one process-wide generator)


def _numpy_ok(t: torch.Tensor) -> bool:
    return is_tensor(t) and t.device.type == "cpu" and numpy_float(t)


def _on_device(x: Any) -> bool:
    """True for a torch tensor outside host memory (CUDA): the torch paths' inputs."""
    return is_tensor(x) and x.device.type != "cpu"


def host_array(x: Any) -> np.ndarray:
    """``x`` (a numpy array or a CPU tensor) as a numpy array: a view sharing the tensor's
    memory for float32/float64 (writes reach the tensor), a float32 copy for other float dtypes
    (float16, bfloat16), integer arrays as they are.

    Raises:
        TypeError: ``x`` is a device (CUDA) tensor: it has no host memory to view.
    """
    if isinstance(x, np.ndarray):
        return x
    if not is_tensor(x):
        return np.asarray(x)
    if x.device.type != "cpu":
        raise TypeError(f"host_array: a {x.device.type} tensor is not in host memory")
    x = x.detach()
    if x.is_floating_point() and not numpy_float(x):
        x = x.float()
    return x.numpy()


def _like(result: np.ndarray, like: Any) -> Any:
    """``result`` in the caller's kind: a tensor (sharing memory) when ``like`` is a tensor."""
    if not is_tensor(like):
        return result
    import torch

    return torch.from_numpy(result)


def make_generator(seed: int, device: Any = "cpu") -> np.random.Generator | torch.Generator:
    """A request's seeded generator for sampling on ``device``: a ``numpy.random.Generator``
    (PCG64) on the host (CPU logits are sampled with numpy), a ``torch.Generator`` on that
    device otherwise.

    Args:
        seed: ``SamplingParams.seed`` (an int >= 0).
        device: where the request's logits live (``"cpu"``, ``"cuda:0"``, a ``torch.device``).
    """
    if device_type(device) == "cpu":
        return np.random.default_rng(seed)
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def uniforms(m: int, gen: Any, device: Any = "cpu") -> list[float]:
    """``m`` uniform draws in ``[0, 1)`` from ``gen`` (a numpy or torch generator; None: the
    default one of ``device``: numpy's process-wide generator on the host, torch's otherwise).
    """
    if isinstance(gen, np.random.Generator):
        return gen.random(m).tolist()
    if gen is None and device_type(device) == "cpu":
        return _RNG.random(m).tolist()
    import torch

    dev = gen.device if gen is not None else device
    return torch.rand(m, generator=gen, device=dev).tolist()


def _uniform_rows(generators: list) -> np.ndarray:
    """One uniform per row: from the row's generator, or numpy's process-wide one (float64)."""
    u = _RNG.random(len(generators))
    for r, gen in enumerate(generators):
        if gen is not None:
            u[r] = uniforms(1, gen)[0]
    return u


def _inverse_cdf(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Token ``i`` of each row with ``P(i) = w_i / sum(w)``: the first ``i`` whose cumulative
    weight exceeds ``u * sum(w)``.

    Args:
        weights: ``[R, V]`` non-negative, float32 or float64 (zeros are never drawn).
        u: ``[R]`` uniforms in ``[0, 1)``.

    Returns:
        ``[R]`` int64; token 0 for a row whose total weight is zero or not finite.
    """
    rows, vocab = weights.shape
    width = min(BLOCK, vocab)
    starts = np.arange(0, vocab, width)
    blocks = np.add.reduceat(weights, starts, axis=1, dtype=np.float64)  # [R, nb]
    cb = np.cumsum(blocks, axis=1)
    total = cb[:, -1]
    ok = np.isfinite(total) & (total > 0)
    target = u * np.where(ok, total, 0.0)
    # the block holding the target: the first whose running sum exceeds it (rounding may put
    # the target at the very end: then the last block with weight)
    j = (cb <= target[:, None]).sum(axis=1)
    last = blocks.shape[1] - 1 - np.argmax(blocks[:, ::-1] > 0, axis=1)
    j = np.minimum(j, last)
    before = np.where(j > 0, np.take_along_axis(cb, np.maximum(j - 1, 0)[:, None], 1)[:, 0], 0.0)
    cols = j[:, None] * width + np.arange(width)  # [R, width]
    inside = cols < vocab
    w = np.where(inside, np.take_along_axis(weights, np.minimum(cols, vocab - 1), 1), 0)
    c = np.cumsum(w, axis=1, dtype=np.float64)
    k = (c <= (target - before)[:, None]).sum(axis=1)
    # past the block's end by rounding: its last token with weight
    k = np.minimum(k, width - 1 - np.argmax(w[:, ::-1] > 0, axis=1))
    return np.where(ok, j * width + k, 0).astype(np.int64)


def take_rows(logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``logits[rows]``: a new ``[len(rows), V]`` tensor (a copy, never a view).

    Raises:
        IndexError: a row out of range.
    """
    if rows and _numpy_ok(logits):
        return _like(logits.detach().numpy()[rows], logits)
    return logits[rows]


@contextmanager
def few_rows_serial(logits: Any, max_rows: int = SERIAL_MAX_ROWS) -> Iterator[None]:
    """Run the block's torch ops on the calling thread when ``logits`` ``[R, V]`` is a CPU
    tensor and ``R <= max_rows`` (``torch.set_num_threads(1)``, restored on exit, also on
    error); otherwise (a device tensor, more rows, a numpy array) a no-op. Greedy picks are
    the same either way; a torch reduction over a row (a normalising sum) may round
    differently with another split, as it may already with another batch shape.
    """
    if not is_tensor(logits) or logits.device.type != "cpu" or logits.shape[0] > max_rows:
        yield
        return
    import torch

    n = torch.get_num_threads()
    if n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _argmax_rows(logits: Any, skip: Collection[int] = ()) -> Any:
    """``logits.argmax(dim=-1)`` (first maximum; NaN counts as the maximum; int64), in the
    input's kind; on the host, 0 for the rows in ``skip`` (their rows are not read).
    """
    if _on_device(logits) or not (logits.shape[0] and logits.shape[1]):
        if isinstance(logits, np.ndarray):
            return np.zeros(logits.shape[0], np.int64)
        import torch

        return logits.argmax(dim=-1) if logits.shape[1] else logits.new_zeros(0, dtype=torch.int64)
    x = host_array(logits)
    if not skip:
        return _like(x.argmax(axis=-1).astype(np.int64), logits)
    out = np.zeros(x.shape[0], np.int64)
    for r in range(x.shape[0]):
        if r not in skip:
            out[r] = x[r].argmax()
    return _like(out, logits)


TOP_CANDIDATES = 1024
"""Probabilities ``filter_probs`` ranks first (``topk`` / ``argpartition``) before sorting a
whole row."""


def filter_probs(probs: Any, params: list[SamplingParams]) -> Any:
    """Apply top-k, top-p and min-p filtering to ``probs`` ``[R, V]`` (renormalised).

    Top-k / top-p rank the ``TOP_CANDIDATES`` largest probabilities of each row first and
    sort the whole row only when a row's top-k is larger or their mass is under its top-p:
    the tokens past them are dropped either way (the mass before each already reaches
    top-p, as a cumulative sum of non-negative terms never decreases), so the kept set and
    its values are those of the whole-row sort (bit for bit on the host, whose cumulative
    sum is sequential; equal values may swap places at the candidates' edge).

    Args:
        probs: ``[R, V]`` float probabilities: a numpy array or a CPU tensor (numpy), or a
            device tensor (torch). Not modified.
        params: one SamplingParams per row.

    Returns:
        ``[R, V]`` in the input's kind (a new array / tensor), each row summing to 1 (a row
        of zeros stays zeros).
    """
    if _on_device(probs):
        return _filter_probs_torch(probs, params)
    p = host_array(probs)
    rows, vocab = p.shape
    top_k = np.array([q.top_k if q.top_k > 0 else vocab for q in params], dtype=np.int64)
    top_p = np.array([q.top_p for q in params], dtype=p.dtype)
    min_p = np.array([q.min_p for q in params], dtype=p.dtype)
    out = p
    need = (top_k < vocab) | (top_p < 1.0)  # rows whose top-k / top-p drops something
    if need.any():
        idx = np.flatnonzero(need)
        sub, top_k, top_p = p[idx], top_k[idx], top_p[idx]
        width = vocab
        widest_k = max((q.top_k for q in params if 0 < q.top_k < vocab), default=0)
        if TOP_CANDIDATES < vocab and widest_k <= TOP_CANDIDATES:
            part = np.argpartition(sub, vocab - TOP_CANDIDATES, axis=1)[:, vocab - TOP_CANDIDATES :]
            vals = np.take_along_axis(sub, part, 1)
            o = np.argsort(-vals, axis=1)  # descending
            order, sorted_p = np.take_along_axis(part, o, 1), np.take_along_axis(vals, o, 1)
            reached = (top_k <= TOP_CANDIDATES) | (np.cumsum(sorted_p, axis=1)[:, -1] >= top_p)
            width = TOP_CANDIDATES if reached.all() else vocab
        if width == vocab:
            order = np.argsort(-sub, axis=1)  # (numpy's SIMD sort; stable is 6x slower)
            sorted_p = np.take_along_axis(sub, order, 1)
        drop = np.arange(width)[None, :] >= top_k[:, None]
        cum = np.cumsum(sorted_p, axis=1)
        drop |= (cum - sorted_p) >= top_p[:, None]  # keep the smallest set reaching top_p
        kept = np.zeros_like(sub)
        np.put_along_axis(kept, order, np.where(drop, 0, sorted_p), 1)
        out = p.copy()
        out[idx] = kept
    if (min_p > 0).any():
        cutoff = out.max(axis=1, keepdims=True) * min_p[:, None]
        out = np.where(out < cutoff, 0, out)
    total = np.maximum(out.sum(axis=1, keepdims=True), p.dtype.type(1e-30))
    return _like((out / total).astype(p.dtype, copy=False), probs)


def _filter_probs_torch(probs: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """:func:`filter_probs` for a device tensor (the same steps in torch)."""
    import torch

    rows, vocab = probs.shape
    dev = probs.device
    top_k = torch.tensor([p.top_k if p.top_k > 0 else vocab for p in params], device=dev)
    top_p = torch.tensor([p.top_p for p in params], dtype=probs.dtype, device=dev)
    min_p = torch.tensor([p.min_p for p in params], dtype=probs.dtype, device=dev)
    need = (top_k < vocab) | (top_p < 1.0)
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
        drop |= (cum - sorted_p) >= top_p.unsqueeze(1)
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = probs.clone()
        probs[idx] = torch.zeros_like(sub).scatter_(1, order, sorted_p)
    if bool((min_p > 0).any()):
        cutoff = probs.max(dim=-1, keepdim=True).values * min_p.unsqueeze(1)
        probs = probs.masked_fill(probs < cutoff, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True).clamp_min(1e-30)


def draw(weights: Any, gen: Any = None) -> int:
    """One token from the distribution ``weights / sum(weights)`` (``[V]``, non-negative).

    Host weights (an array or a CPU tensor) are drawn by inversion with one uniform of
    ``gen`` (a numpy or torch generator; None: numpy's process-wide one), as :func:`sample`
    draws a row; device tensors by the exponential race with ``gen`` (a torch generator on
    that device, or None). A token of zero weight is never drawn.
    """
    if _on_device(weights):
        import torch

        if isinstance(gen, np.random.Generator):
            e = torch.from_numpy(gen.standard_exponential(weights.shape[0], dtype=np.float32))
            noise = e.to(weights.device)
        else:
            noise = torch.empty_like(weights).exponential_(generator=gen)
        return int((weights / noise).argmax())
    w = host_array(weights)
    return int(_inverse_cdf(w[None, :], _uniform_rows([gen]))[0])


def sample(
    logits: Any, params: list[SamplingParams], generators: list, skip: Collection[int] = ()
) -> Any:
    """Pick one token per row.

    Args:
        logits: ``[R, V]`` float, already masked (``-inf`` = forbidden): a numpy array or a
            CPU tensor (sampled with numpy), or a device tensor (torch). Not modified.
        params: one SamplingParams per row.
        generators: per row, the request's seeded generator (:func:`make_generator`: a
            ``numpy.random.Generator``, or a ``torch.Generator``, which host rows also
            accept) or None for the process-wide one.
        skip: greedy rows whose token the caller has picked already: on the host their
            entry is 0 and their row is not read (a device tensor's rows are all read).

    Returns:
        ``[R]`` int64 token ids in the input's kind (a tensor on ``logits.device`` for a
        tensor, else an array). Greedy rows are the row's first maximum (0 for a row in
        ``skip`` on the host).

    Raises:
        never (a row with every logit ``-inf`` returns token 0; the caller's grammar check
        rejects it).
    """
    greedy_tok = _argmax_rows(logits, skip)
    if all(p.is_greedy for p in params):
        return greedy_tok
    if _on_device(logits):
        return _sample_torch(logits, params, generators, greedy_tok)
    x = host_array(logits)
    rows = [r for r, p in enumerate(params) if not p.is_greedy]
    temps = np.array([params[r].temperature for r in rows], dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):  # an all -inf row: NaN, token 0
        z = x[rows].astype(np.float32, copy=False) / temps[:, None]  # a new [S, V] array
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)  # unnormalised probabilities
        sub = [params[r] for r in rows]
        if any(p.top_k > 0 or p.top_p < 1.0 or p.min_p > 0 for p in sub):
            z /= z.sum(axis=1, keepdims=True)
            z = filter_probs(z, sub)
    out = host_array(greedy_tok).copy()
    out[rows] = _inverse_cdf(z, _uniform_rows([generators[r] for r in rows]))
    return _like(out, logits)


def _sample_torch(logits, params, generators, greedy_tok):
    """:func:`sample`'s non-greedy rows for a device tensor: the exponential race in torch."""
    import torch

    rows = logits.shape[0]
    temps = torch.tensor(
        [p.temperature if not p.is_greedy else 1.0 for p in params],
        dtype=torch.float32,
        device=logits.device,
    )
    probs = torch.softmax(logits.float() / temps.unsqueeze(1), dim=-1)
    probs = _filter_probs_torch(probs, params)
    noise = torch.empty_like(probs)
    noise.exponential_()
    for r, gen in enumerate(generators):
        if isinstance(gen, np.random.Generator):
            e = gen.standard_exponential(probs.shape[1], dtype=np.float32)
            noise[r] = torch.from_numpy(e).to(probs.device)
        elif gen is not None:
            noise[r].exponential_(generator=gen)
    sampled = (probs / noise).argmax(dim=-1)
    is_greedy = torch.tensor([p.is_greedy for p in params], device=logits.device)
    return torch.where(is_greedy, greedy_tok, sampled) if rows else sampled
