"""Exact integer ranges as regexes over decimal digits (JSON integer grammar, no leading zeros).

``integer_range_regex(lo, hi)`` matches exactly the decimal spellings of the integers in
``[lo, hi]`` (either bound may be None = unbounded), with arbitrary precision: bounds are
Python ints, so ranges beyond 2**53 stay exact. Built digit by digit: for numbers with the
same count of digits, ``a <= x <= b`` splits at the first digit where ``a`` and ``b``
differ into "starts like a, rest >= a's rest", "a middle digit, any rest" and "starts like
b, rest <= b's rest"; different lengths are separate alternatives. The regex has
O(digits^2) size.
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["integer_range_regex", "integer_bounds"]


def _digit_class(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    return f"[{lo}-{hi}]"


def _any_digits(n: int) -> str:
    return "" if n == 0 else ("[0-9]" if n == 1 else "[0-9]{%d}" % n)


def _alt(parts: list[str]) -> str:
    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _at_least(s: str) -> str:
    """Digit strings of length ``len(s)`` that are >= ``s``."""
    if not s:
        return ""
    d, rest = int(s[0]), s[1:]
    parts = [f"{d}{_at_least(rest)}"]
    if d < 9:
        parts.append(_digit_class(d + 1, 9) + _any_digits(len(rest)))
    return _alt(parts)


def _at_most(s: str) -> str:
    """Digit strings of length ``len(s)`` that are <= ``s``."""
    if not s:
        return ""
    d, rest = int(s[0]), s[1:]
    parts = [f"{d}{_at_most(rest)}"]
    if d > 0:
        parts.append(_digit_class(0, d - 1) + _any_digits(len(rest)))
    return _alt(parts)


def _same_length(a: str, b: str) -> str:
    """Digit strings x with ``a <= x <= b`` (all three of one length)."""
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if i == len(a):
        return a
    prefix, da, db = a[:i], int(a[i]), int(b[i])
    ra, rb = a[i + 1 :], b[i + 1 :]
    parts = [f"{da}{_at_least(ra)}"]
    if db - da > 1:
        parts.append(_digit_class(da + 1, db - 1) + _any_digits(len(ra)))
    parts.append(f"{db}{_at_most(rb)}")
    return prefix + _alt(parts)


def _non_negative(lo: int, hi: int | None) -> str:
    """Spellings of the integers in ``[lo, hi]``, ``0 <= lo``, ``hi`` None = unbounded."""
    parts = []
    top_len = len(str(hi)) if hi is not None else len(str(lo))
    for length in range(len(str(lo)), top_len + 1):
        a = max(lo, 10 ** (length - 1) if length > 1 else 0)
        b = 10**length - 1 if hi is None else min(hi, 10**length - 1)
        if a <= b:
            parts.append(_same_length(str(a), str(b)))
    if hi is None:
        parts.append("[1-9][0-9]{%d,}" % len(str(lo)))
    return _alt(parts)


def integer_range_regex(lo: int | None, hi: int | None) -> str | None:
    """Regex for the integers in ``[lo, hi]``; None if the range is empty.

    ``-0`` is not produced (``json.dumps`` never writes it for an int).
    """
    if lo is not None and hi is not None and lo > hi:
        return None
    parts = []
    if lo is None or lo < 0:  # negative part: -x with x in [max(1, -hi), -lo]
        mag_lo = 1 if hi is None or hi >= 0 else -hi
        mag_hi = None if lo is None else -lo
        parts.append("-" + _non_negative(mag_lo, mag_hi))
    if hi is None or hi >= 0:
        parts.append(_non_negative(max(lo, 0) if lo is not None else 0, hi))
    return _alt(parts)


def integer_bounds(schema: dict) -> tuple[int | None, int | None]:
    """Inclusive integer bounds of ``minimum``/``maximum``/``exclusive*`` (drafts 4 and 6+).

    Bounds may be floats (``exclusiveMinimum: 1.5`` -> 2); draft-04's boolean
    ``exclusiveMinimum: true`` modifies ``minimum``.
    """
    lo = hi = None
    ex_min, ex_max = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if "minimum" in schema:
        m = Fraction(str(schema["minimum"]))
        lo = math.floor(m) + 1 if ex_min is True and m == math.floor(m) else math.ceil(m)
    if "maximum" in schema:
        m = Fraction(str(schema["maximum"]))
        hi = math.ceil(m) - 1 if ex_max is True and m == math.ceil(m) else math.floor(m)
    if ex_min is not None and not isinstance(ex_min, bool):
        v = math.floor(Fraction(str(ex_min))) + 1
        lo = v if lo is None else max(lo, v)
    if ex_max is not None and not isinstance(ex_max, bool):
        v = math.ceil(Fraction(str(ex_max))) - 1
        hi = v if hi is None else min(hi, v)
    return lo, hi
