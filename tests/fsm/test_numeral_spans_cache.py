"""``numerals.numeral_spans`` read from its cache: the same spans as a fresh reading
(cache cleared before each), for texts read again, and a new list every call."""

from __future__ import annotations

from structgen.fsm import numerals

TEXTS = ["forty-one apples at $1,250.50 on 2024-11-30", "minus six, then -12 and 3.500",
         "two hundred and five", "", "no numbers", "1'250 or 1.250,75 at 19:30"]  # fmt: skip


def test_numeral_spans_cached_equal_fresh():
    fresh = []
    for t in TEXTS:
        numerals._spans_cache.clear()
        fresh.append(numerals.numeral_spans(t))
    assert any(fresh)
    for _ in range(2):
        for t, want in zip(TEXTS, fresh):
            got = numerals.numeral_spans(t)
            assert got == want and got is not want
    got = numerals.numeral_spans(TEXTS[0])
    got.clear()  # the caller's list: the cache keeps its own
    assert numerals.numeral_spans(TEXTS[0]) == fresh[0]
    assert TEXTS[0] in numerals._spans_cache
