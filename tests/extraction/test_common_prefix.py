"""``choices.common_prefix`` (slices compared, the differing range halved) against the
element-by-element count it replaced, on random token-id lists with shared heads."""

from __future__ import annotations

import random

import numpy as np

from structgen.extraction.choices import common_prefix


def _ref(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def test_common_prefix_equals_the_count():
    rng = random.Random(0)
    seen = set()
    for _ in range(3000):
        head = [rng.randrange(5) for _ in range(rng.randrange(0, 40))]
        a = head + [rng.randrange(5) for _ in range(rng.randrange(0, 6))]
        b = head + [rng.randrange(5) for _ in range(rng.randrange(0, 6))]
        want = _ref(a, b)
        assert common_prefix(a, b) == want == common_prefix(b, a), (a, b)
        seen.add((want == len(a), want == len(b), want == 0))
    assert len(seen) >= 5  # equal, one inside the other, differing, empty heads


def test_common_prefix_other_sequences():
    assert common_prefix([1, 2, 3], (1, 2, 4)) == 2
    assert common_prefix(np.array([1, 2, 3]), [1, 2, 3, 4]) == 3
    assert common_prefix([], [1]) == 0
    assert common_prefix([7] * 300 + [1], [7] * 300 + [2]) == 300
