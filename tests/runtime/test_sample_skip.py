"""``sampler.sample(..., skip=rows)``: the rows not skipped get the tokens of the call
without ``skip`` (greedy first maxima with ties and NaN, seeded temperature rows drawn
alike); a skipped greedy row gets 0 and its row is never read."""

from __future__ import annotations

import numpy as np
import pytest

from structgen import SamplingParams
from structgen.runtime.sampler import make_generator, sample


class Unreadable(np.ndarray):
    """An array whose listed rows raise when read alone (``x[r]``)."""

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) and int(key) in self.forbidden:
            raise AssertionError(f"row {key} read")
        return super().__getitem__(key)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sample_skip_equals_the_whole_call(seed):
    rng = np.random.default_rng(seed)
    n, vocab = 9, 300
    logits = (rng.standard_normal((n, vocab)) * 2).astype(np.float32)
    logits[1] = np.round(logits[1])  # ties
    logits[2, ::5] = np.nan
    logits[3] = -np.inf
    logits[7, 1::4] = np.nan  # a NaN row not skipped
    hot = {4, 6}  # temperature rows
    greedy, warm = SamplingParams(temperature=0.0), SamplingParams(temperature=0.7, seed=5)
    params = [warm if r in hot else greedy for r in range(n)]
    skip = {0, 2, 5, 8}

    def gens():
        return [make_generator(5, "cpu") if r in hot else None for r in range(n)]

    want = sample(logits, params, gens())
    x = logits.view(Unreadable)
    x.forbidden = skip
    got = sample(x, params, gens(), skip)
    assert [int(t) for t in got] == [0 if r in skip else int(want[r]) for r in range(n)]
    assert int(want[2]) == int(np.argmax(logits[2]))  # NaN counts as the maximum
    with pytest.raises(AssertionError, match="row 0 read"):
        sample(x, params, gens(), {2})
