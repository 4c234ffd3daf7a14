"""The host ``top_logprobs`` against the whole-row computation it replaces: equal dicts,
equal order, bit for bit (candidates from block maxima, ties at the cut, masked rows)."""

from __future__ import annotations

import numpy as np
import pytest

from structgen.runtime.logits_processing import top_logprobs


def reference(x: np.ndarray, chosen: list[int], k: list[int]) -> list[dict[int, float]]:
    """The whole-row host computation: log-softmax of every entry, ``argpartition`` of the
    negated row for the top ``max(k)``, sorted by value then id."""
    kmax = max(k) if k else 0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = x - x.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    chosen_lp = logp[np.arange(len(chosen)), chosen].tolist() if chosen else []
    if kmax:
        vocab = logp.shape[1]
        kk = min(kmax, vocab)
        part = np.argpartition(-logp, kk - 1, axis=1)[:, :kk] if kk < vocab else None
        if part is None:
            part = np.broadcast_to(np.arange(vocab), logp.shape)
        vals = np.take_along_axis(logp, part, 1)
        order = np.lexsort((part, -vals), axis=1)
        top_i = np.take_along_axis(part, order, 1).tolist()
        top_v = np.take_along_axis(vals, order, 1).tolist()
    out = []
    for r, tok in enumerate(chosen):
        d = {tok: chosen_lp[r]}
        if k[r]:
            for t, v in zip(top_i[r][: k[r]], top_v[r][: k[r]]):
                d.setdefault(t, v)
        out.append(d)
    return out


def same(got: list[dict], ref: list[dict]) -> bool:
    """Equal keys in equal order and bit-equal values (NaN equal to NaN)."""
    return [list(d) for d in got] == [list(d) for d in ref] and all(
        np.array_equal(np.float32(list(a.values())), np.float32(list(b.values())), equal_nan=True)
        for a, b in zip(got, ref)
    )


def rows(rng: np.random.Generator, r: int, vocab: int, kind: str) -> np.ndarray:
    x = (rng.standard_normal((r, vocab)) * 4).astype(np.float32)
    if kind == "ties":  # few distinct values: ties at every cut
        x = np.round(x).astype(np.float32)
    elif kind == "near":  # distinct values whose log-probabilities round together
        x = (30 + rng.random((r, vocab)) * 1e-5).astype(np.float32)
    elif kind == "masked":
        x[:, rng.random(vocab) < 0.97] = -np.inf
        x[0] = -np.inf  # a whole masked row (NaN log-probabilities)
        x[-1, :] = -np.inf
        x[-1, :3] = 1.0  # fewer finite entries than k
    elif kind == "nan":
        x[0, 5 % vocab] = np.nan
    elif kind == "peak":
        x[:, 100 % vocab : 130 % vocab or None] = x.max() + 1  # tied maxima past the cut
    return x


@pytest.mark.parametrize("vocab", [1, 2, 7, 21, 100, 1000, 49_152, 49_153])
@pytest.mark.parametrize("kind", ["plain", "ties", "near", "masked", "nan", "peak"])
def test_host_top_logprobs_equal_whole_row_reference(vocab, kind):
    rng = np.random.default_rng(vocab * 31 + len(kind))
    for r in (1, 3, 8):
        x = rows(rng, r, vocab, kind)
        chosen = rng.integers(0, vocab, r).tolist()
        for k in ([0] * r, [20] * r, [1] * r, [vocab] * r, [vocab + 5] * r,
                  [int(v) for v in rng.integers(0, 25, r)]):  # fmt: skip
            got = top_logprobs(x, chosen, k)
            assert same(got, reference(x, chosen, k)), (vocab, kind, r, k)


def test_host_top_logprobs_leaves_logits_unchanged():
    x = (np.random.default_rng(0).standard_normal((4, 5000)) * 3).astype(np.float32)
    before = x.copy()
    top_logprobs(x, [1, 2, 3, 4], [20, 0, 5, 20])
    assert np.array_equal(x, before)
