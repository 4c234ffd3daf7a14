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

__all__ = ["integer_range_regex", "integer_bounds", "decimal_multiple_regex"]


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


# ---- decimal bounds on JSON numbers (no exponent) -----------------------------------------

_FRAC_ANY = "[0-9]*"


def _frac(
    lo: str | None, lo_incl: bool, hi: str | None, hi_incl: bool, max_digits: int | None
) -> tuple[bool, str | None]:
    """Fraction digit strings ``f`` with ``0.lo <= 0.f <= 0.hi`` (each side optional/strict).

    ``lo``/``hi`` are digit strings without trailing zeros (``""`` is 0), None = unbounded.
    With ``max_digits``, digits after that many must be ``0``. Returns
    ``(empty_ok, regex of the non-empty f or None)``.
    """
    if lo == "" and lo_incl:
        lo = None
    if hi == "" and not hi_incl:
        return False, None
    if max_digits == 0:
        if lo is not None:  # f is all zeros: value 0 is below a positive / strict lower bound
            return False, None
        return True, "0+"
    if lo is None and hi is None:
        rep = "[0-9]+" if max_digits is None else "[0-9]{1,%d}0*" % max_digits
        return True, rep
    if lo == "" and hi == "":  # 0 < v <= 0
        return False, None
    if lo == "" and hi is None and max_digits is None:
        return False, "0*[1-9][0-9]*"
    if lo is None and hi == "":
        return True, "0+"
    groups: dict[tuple, list[int]] = {}
    for c in range(10):
        if lo is not None:
            ld = int(lo[0]) if lo else 0
            if c < ld:
                continue
            nlo = (None, True) if c > ld else (lo[1:], lo_incl)
        else:
            nlo = (None, True)
        if hi is not None:
            hd = int(hi[0]) if hi else 0
            if c > hd:
                continue
            nhi = (None, True) if c < hd else (hi[1:], hi_incl)
        else:
            nhi = (None, True)
        groups.setdefault(nlo + nhi, []).append(c)
    parts = []
    for (nlo, nli, nhi, nhi_incl), digits in groups.items():
        nxt = None if max_digits is None else max_digits - 1
        empty, rest = _frac(nlo, nli, nhi, nhi_incl, nxt)
        if rest is None and not empty:
            continue
        tail = "" if rest is None else (rest if not empty else "(?:%s)?" % rest)
        cls = str(digits[0]) if len(digits) == 1 else f"[{digits[0]}-{digits[-1]}]"
        assert digits == list(range(digits[0], digits[-1] + 1))
        parts.append(cls + tail)
    empty_ok = (lo is None) and (hi is None or hi != "" or hi_incl)
    return empty_ok, (_alt(parts) if parts else None)


def _split(value: Fraction) -> tuple[int, str]:
    """A non-negative finite decimal as (integer part, fraction digits without trailing 0s)."""
    whole = math.floor(value)
    rest = value - whole
    digits = ""
    while rest:
        rest *= 10
        d = math.floor(rest)
        digits += str(d)
        rest -= d
        if len(digits) > 400:
            raise ValueError("bound is not a finite decimal")
    return whole, digits


def _suffix(frac: tuple[bool, str | None]) -> str | None:
    empty, rest = frac
    if rest is None:
        return "" if empty else None
    return ("(?:\\.%s)?" if empty else "\\.%s") % rest


def _magnitude(
    lo: Fraction | None, lo_incl: bool, hi: Fraction | None, hi_incl: bool, max_digits: int | None
) -> str | None:
    r"""Spellings ``(0|[1-9][0-9]*)(\.[0-9]+)?`` of magnitudes m >= 0 within the bounds."""
    if lo is None or lo < 0:
        lo, lo_incl = Fraction(0), True
    if hi is not None and (hi < lo or (hi == lo and not (lo_incl and hi_incl))):
        return None
    li, lf = _split(lo)
    parts = []
    if hi is None:
        parts.append((_non_negative(li + 1, None), _frac(None, True, None, True, max_digits)))
        parts.append((str(li), _frac(lf, lo_incl, None, True, max_digits)))
    else:
        hi_i, hf = _split(hi)
        if li == hi_i:
            parts.append((str(li), _frac(lf, lo_incl, hf, hi_incl, max_digits)))
        else:
            if hi_i - 1 >= li + 1:
                parts.append(
                    (_non_negative(li + 1, hi_i - 1), _frac(None, True, None, True, max_digits))
                )
            parts.append((str(li), _frac(lf, lo_incl, None, True, max_digits)))
            parts.append((str(hi_i), _frac(None, True, hf, hi_incl, max_digits)))
    out = []
    for whole, frac in parts:
        suffix = _suffix(frac)
        if suffix is not None:
            out.append(whole + suffix)
    return _alt(out) if out else None


def decimal_range_regex(
    lo: Fraction | None,
    lo_incl: bool,
    hi: Fraction | None,
    hi_incl: bool,
    max_digits: int | None = None,
) -> str | None:
    r"""JSON numbers without exponent whose value lies within the bounds; None if empty.

    Matches ``-?(0|[1-9][0-9]*)(\.[0-9]+)?`` spellings only (``-0`` and trailing zeros
    included): exponent spellings such as ``1e2`` are rejected even when in range, so
    the regex never accepts a value outside the bounds. With ``max_digits`` (for
    ``multipleOf: 10**-k``), fraction digits after the first ``max_digits`` must be 0.
    """
    neg_lo = None if hi is None else -hi
    neg_hi = None if lo is None else -lo
    parts = []
    neg = _magnitude(neg_lo, hi_incl, neg_hi, lo_incl, max_digits)
    if neg is not None:
        parts.append("-" + neg)
    pos = _magnitude(lo, lo_incl, hi, hi_incl, max_digits)
    if pos is not None:
        parts.append(pos)
    return _alt(parts) if parts else None


def number_bounds(schema: dict) -> tuple[Fraction | None, bool, Fraction | None, bool]:
    """``(lo, lo_inclusive, hi, hi_inclusive)`` from the bound keywords (drafts 4 and 6+)."""
    lo = hi = None
    lo_incl = hi_incl = True
    ex_min, ex_max = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")

    def tighter_lo(v: Fraction, incl: bool) -> None:
        nonlocal lo, lo_incl
        if lo is None or v > lo or (v == lo and not incl):
            lo, lo_incl = v, incl

    def tighter_hi(v: Fraction, incl: bool) -> None:
        nonlocal hi, hi_incl
        if hi is None or v < hi or (v == hi and not incl):
            hi, hi_incl = v, incl

    if "minimum" in schema:
        tighter_lo(Fraction(str(schema["minimum"])), ex_min is not True)
    if "maximum" in schema:
        tighter_hi(Fraction(str(schema["maximum"])), ex_max is not True)
    if ex_min is not None and not isinstance(ex_min, bool):
        tighter_lo(Fraction(str(ex_min)), False)
    if ex_max is not None and not isinstance(ex_max, bool):
        tighter_hi(Fraction(str(ex_max)), False)
    return lo, lo_incl, hi, hi_incl


# ---- multipleOf: residues modulo k over the decimal digits ------------------------------------

MAX_MULTIPLE_REGEX = 20_000
MAX_ENUMERATED_MULTIPLES = 1000
MAX_RESIDUE_MODULUS = 64


def _star(r: str) -> str:
    return "" if not r else "(?:%s)*" % r


def _residue_regex(k: int, residues: frozenset[int] = frozenset({0})) -> str | None:
    """Positive decimal integers (no leading zero) whose remainder modulo ``k`` is one of
    ``residues`` (default: divisible by ``k``), by state elimination.

    Returns None when the regex would exceed ``MAX_MULTIPLE_REGEX`` characters.
    """
    # states: 0..k-1 residues, k = start, k+1 = final
    edge: dict[tuple[int, int], str] = {}

    def add(i: int, j: int, r: str) -> None:
        edge[i, j] = r if (i, j) not in edge else "(?:%s|%s)" % (edge[i, j], r)

    for r in range(k):
        targets: dict[int, list[int]] = {}
        for d in range(10):
            targets.setdefault((10 * r + d) % k, []).append(d)
        for t, ds in targets.items():
            add(r, t, "[" + "".join(map(str, ds)) + "]" if len(ds) > 1 else str(ds[0]))
    starts: dict[int, list[int]] = {}
    for d in range(1, 10):
        starts.setdefault(d % k, []).append(d)
    for t, ds in starts.items():
        add(k, t, "[" + "".join(map(str, ds)) + "]" if len(ds) > 1 else str(ds[0]))
    for r in residues:
        add(r, k + 1, "")
    remaining = set(range(k))
    while remaining:  # eliminate the residue state whose removal writes the least text

        def cost(q: int) -> int:
            return sum(len(r) for (i, j), r in edge.items() if q in (i, j))

        s = min(remaining, key=cost)
        remaining.discard(s)
        loop = _star(edge.pop((s, s), ""))
        ins = [(i, r) for (i, j), r in edge.items() if j == s]
        outs = [(j, r) for (i, j), r in edge.items() if i == s]
        for i, _ in ins:
            del edge[i, s]
        for j, _ in outs:
            del edge[s, j]
        for i, ri in ins:
            for j, rj in outs:
                add(i, j, ri + loop + rj)
        if sum(len(r) for r in edge.values()) > MAX_MULTIPLE_REGEX:
            return None
    return edge.get((k, k + 1))


def integer_multiple_regex(k: int) -> str | None:
    """Integers (``-?(0|[1-9][0-9]*)``, no ``-0``) divisible by ``k``; None if too large a regex."""
    k = abs(k)
    if k == 1:
        return "(?:0|-?[1-9][0-9]*)"
    twos = fives = 0
    m = k
    while m % 2 == 0:
        m, twos = m // 2, twos + 1
    while m % 5 == 0:
        m, fives = m // 5, fives + 1
    if m == 1:  # k divides 10**n: only the last n digits matter
        width = max(twos, fives)
        tails = [str(v).zfill(width) for v in range(0, 10**width, k)]
        short = [str(v) for v in range(k, 10**width, k)]  # fewer than `width`+1 digits
        positive = _alt(["[1-9][0-9]*(?:%s)" % "|".join(tails)] + short)
    elif k > MAX_RESIDUE_MODULUS:
        return None
    else:
        positive = _residue_regex(k)
        if positive is None:
            return None
    return "(?:0|-?%s)" % positive


def enumerate_multiples(k: int, lo: int | None, hi: int | None) -> list[int] | None:
    """The multiples of ``k`` in ``[lo, hi]`` if finite and ``<= MAX_ENUMERATED_MULTIPLES``."""
    if lo is None or hi is None:
        return None
    first = -((-lo) // k) * k
    if hi < first:
        return []
    if (hi - first) // k + 1 > MAX_ENUMERATED_MULTIPLES:
        return None
    return list(range(first, hi + 1, k))


MAX_FRACTION_DIGITS = 3  # decimal_multiple_regex lists the 10**c fraction prefixes


def decimal_multiple_regex(step: Fraction) -> str | None:
    r"""JSON numbers without exponent (``-?(0|[1-9][0-9]*)(\.[0-9]+)?``, ``-0`` and trailing
    zeros included) whose value is a multiple of ``step`` (> 0), e.g. ``0.5``, ``0.25``,
    ``0.75``, ``2.5``, ``1/3``; None when the regex would be too large.

    Exact: a finite decimal is a multiple of ``p/q`` (lowest terms) exactly when it is a
    multiple of ``P/10**c``, ``q = q' * 2**a * 5**b`` with ``q'`` prime to 10 and
    ``c = max(a, b)`` (``q'`` must divide the multiplier: ``1/3``'s decimal multiples are
    the integers). With ``I`` the integer part and ``f`` the first ``c`` fraction digits
    (padded with zeros), ``x`` is such a multiple when the digits after those ``c`` are
    zeros and ``I * 10**c + f`` is divisible by ``P``, a condition on ``I mod m`` for
    ``m = P / gcd(P, 10**c)``: per set of residues, the integer parts with those
    residues (``_residue_regex``) and the fractions ``f`` that need them.
    None past ``MAX_FRACTION_DIGITS`` fraction digits, past ``MAX_RESIDUE_MODULUS`` for
    ``m``, or past ``MAX_MULTIPLE_REGEX`` characters.
    """
    if step <= 0:
        raise ValueError(f"multipleOf must be positive, got {step}")
    q = step.denominator
    twos = fives = 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    reduced = step * q  # the decimal multiples of step: those of reduced (q is prime to 10)
    c = max(twos, fives)
    big = int(reduced * 10**c)  # reduced = big / 10**c
    if c > MAX_FRACTION_DIGITS:
        return None
    m = big // math.gcd(big, 10**c)
    if m > MAX_RESIDUE_MODULUS:
        return None
    by_residues: dict[frozenset[int], list[str]] = {}
    for f in range(10**c):
        need = frozenset(i for i in range(m) if (i * 10**c + f) % big == 0)
        if need:
            by_residues.setdefault(need, []).append(str(f).zfill(c) if c else "")
    parts = []
    for need, fractions in by_residues.items():
        whole = _residues_regex(m, need)
        if whole is None:
            return None
        zero = "0" * c
        texts = [t.rstrip("0") + "0*" for t in fractions if t != zero]
        if zero in fractions:
            texts.append("0+")
        suffix = r"\." + _alt(texts)
        parts.append(whole + ("(?:%s)?" % suffix if zero in fractions else suffix))
    regex = "-?" + _alt(parts)
    return regex if len(regex) <= MAX_MULTIPLE_REGEX else None


def _residues_regex(m: int, need: frozenset[int]) -> str | None:
    """Non-negative integers (no leading zero) whose remainder modulo ``m`` is in ``need``;
    None when ``_residue_regex`` is too large. Where ``m`` divides ``10**n`` only the last
    ``n`` digits matter (as in ``integer_multiple_regex``): the numbers below ``10**n``
    listed, the others as any leading digits and the ``n``-digit tails in ``need``.
    """
    if m == 1:
        return "(?:0|[1-9][0-9]*)"
    rest, width = m, 0
    while rest % 2 == 0 or rest % 5 == 0:
        rest //= 2 if rest % 2 == 0 else 5
    if rest == 1:
        while 10**width % m:
            width += 1
        tails = [str(v).zfill(width) for v in range(10**width) if v % m in need]
        short = [str(v) for v in range(10**width) if v % m in need]
        return _alt(["[1-9][0-9]*(?:%s)" % "|".join(tails)] + short)
    positive = _residue_regex(m, need)
    return None if positive is None else _alt((["0"] if 0 in need else []) + [positive])
