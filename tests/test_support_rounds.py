"""``benchmarks.support.alternating`` / ``interleaved_rounds`` / ``medians``: the steps of an
interleaved A/B in the order the benchmarks' own loops ran them (``for r in range(rounds [+
1]): for arm in arms if r % 2 == 0 else arms[::-1]``, round 0 skipped with a warm-up),
written out as those loops."""

from __future__ import annotations

import pytest

from benchmarks.support import alternating, interleaved_rounds, medians


def _old_loop(arms, rounds, warm_up):
    steps = []
    for r in range(rounds + 1 if warm_up else rounds):
        for arm in arms if r % 2 == 0 else arms[::-1]:
            steps.append((r, arm))
    return steps


@pytest.mark.parametrize("arms", ["AB", ("base", "this"), (64, 128, 256), ("old", "old2", "new")])
@pytest.mark.parametrize("rounds", [0, 1, 2, 5])
@pytest.mark.parametrize("warm_up", [False, True])
def test_alternating_is_the_old_loop(arms, rounds, warm_up):
    assert list(alternating(arms, rounds, warm_up)) == _old_loop(arms, rounds, warm_up)


def test_alternating_by_hand():
    assert list(alternating("AB", 3)) == [
        (0, "A"),
        (0, "B"),
        (1, "B"),
        (1, "A"),
        (2, "A"),
        (2, "B"),
    ]
    assert [a for _, a in alternating("AB", 2, warm_up=True)] == list("ABBAAB")


def test_interleaved_rounds_measures_each_arm_once_a_round_and_drops_the_warm_up():
    calls = []

    def measure(arm):
        calls.append(arm)
        return len(calls)

    got = interleaved_rounds("AB", 3, measure, warm_up=True)
    assert calls == list("ABBAABBA")
    assert got == {"A": [4, 5, 8], "B": [3, 6, 7]}
    assert interleaved_rounds("AB", 2, lambda arm: arm * 2) == {"A": ["AA", "AA"], "B": ["BB"] * 2}
    assert medians({"A": [3.0, 1.0, 2.0], "B": [4.0, 6.0]}) == {"A": 2.0, "B": 5.0}


def test_negative_rounds_are_refused():
    with pytest.raises(ValueError, match="rounds must be >= 0, got -1"):
        list(alternating("AB", -1))
