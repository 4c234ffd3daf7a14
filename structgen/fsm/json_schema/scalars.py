"""Lowering of the scalar JSON Schema types (string, integer, number) to regexes.

Strings: ``minLength``/``maxLength`` in characters (an escape is one character),
``pattern`` (see ``pattern``), ``format`` (see ``formats``). A
``pattern`` or ``format`` next to a length bound is their exact intersection
(``string_length``: product of the pattern's automaton with a character counter),
or, past its size caps, strict ``UnsupportedSchemaError`` naming the length keyword
(non-strict: the pattern/format is kept, the length bound dropped). ``pattern``
together with ``format``: strict error.

Integers: exact bounds of any magnitude, ``multipleOf`` through a residue automaton
(small moduli) or by listing the multiples of a small bounded range; a wider or open
range with a small modulus is the intersection of the range's and the residue's automata.

Numbers: without bounds, the full JSON number grammar (exponents included). With
bounds, every spelling without an exponent whose value is in range, plus the exponent
spellings that are in range whatever their digits (``exponent_forms``): any exponent
on a half-line such as ``minimum: 0`` (``1e+16``), zero (``0e5``) when 0 is in range,
and ``d.dddeE`` (``json.dumps``'s spelling of large and small floats) where the whole
band ``[10**E, 10**(E+1))`` is in range. Other exponent spellings are rejected even when in
range, so no out-of-range value is ever accepted. With ``multipleOf`` = 1, 0.1, 0.01,
... (exact decimal steps) no exponent spelling is produced. Other ``multipleOf`` values on
numbers: integer steps, the spellings of integer multiples only (``6``, ``6.0``); other
steps (``0.5``, ``0.25``, ``2.5``), every spelling without an exponent whose value is a
multiple (``numeric.decimal_multiple_regex``; within bounds: its intersection with the
range's spellings), or, where that regex is too large, strict error.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ...errors import UnsupportedSchemaError
from ..regex.escape import escape_literal
from .context import ConvertContext
from .formats import DRAFT_FORMATS, FORMATS, UNDECIDABLE
from .numeric import (
    decimal_multiple_regex,
    decimal_range_regex,
    enumerate_multiples,
    integer_bounds,
    integer_multiple_regex,
    integer_range_regex,
    number_bounds,
)
from .pattern import JSON_CHAR, pattern_to_string_body
from .string_length import Unrepresentable, bounded_string_body

__all__ = ["string_regex", "integer_regex", "number_regex", "INTEGER", "NUMBER", "BOUNDS"]

_LATEST_FORMATS = DRAFT_FORMATS["Draft202012Validator"]

INTEGER = r"-?(?:0|[1-9][0-9]*)"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _alt(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def string_regex(conv: ConvertContext, schema: dict, pointer: str) -> str | None:
    """Regex for the JSON strings valid under the string keywords of ``schema``."""
    lo = int(schema.get("minLength", 0))
    hi = schema.get("maxLength")
    has_len = lo > 0 or hi is not None
    if hi is not None and int(hi) < lo:
        return None
    if "format" in schema:
        fmt = schema["format"]
        if fmt in FORMATS and "pattern" not in schema:
            if not has_len:
                return '"' + FORMATS[fmt] + '"'
            body = _bounded(conv, "format", FORMATS[fmt], True, lo, hi, pointer)
            if body is not _LENGTH_ONLY:
                return None if body is None else '"' + body + '"'
        elif fmt not in DRAFT_FORMATS.get(getattr(conv, "_draft", ""), _LATEST_FORMATS):
            note = (  # not defined by the document's draft: an annotation
                f"ignored format {fmt!r} at {pointer or '#'} (not a format of the "
                "schema's JSON Schema draft: an annotation, any string)"
            )
            if note not in conv.warnings:
                conv.warnings.append(note)
        else:
            conv.unsupported(
                "format",
                pointer,
                f"format {fmt!r}"
                + (" combined with pattern" if fmt in FORMATS else "")
                + (f": {UNDECIDABLE[fmt]}" if fmt in UNDECIDABLE else ""),
            )
    if "pattern" in schema:
        if not has_len:
            try:
                return '"' + pattern_to_string_body(schema["pattern"], pointer + "/pattern") + '"'
            except UnsupportedSchemaError as exc:  # non-strict: any string (a warning)
                conv.unsupported("pattern", exc.pointer, exc.detail)
        else:
            body = _bounded(conv, "pattern", schema["pattern"], False, lo, hi, pointer)
            if body is not _LENGTH_ONLY:
                return None if body is None else '"' + body + '"'
    if hi is None:
        rep = "*" if lo == 0 else "{%d,}" % lo
    else:
        rep = "{%d,%d}" % (lo, int(hi))
    text = '"' + JSON_CHAR + rep + '"'
    sharing = getattr(conv, "sharing", None)  # one definition per spelling: schemas repeat it
    if sharing is None:
        return text
    found, shared = sharing.lookup(("string", rep))
    return shared if found else sharing.store(("string", rep), text)


_LENGTH_ONLY = object()


def _bounded(
    conv: ConvertContext, keyword: str, regex: str, anchored: bool, lo: int, hi: Any, pointer: str
) -> Any:
    """``bounded_string_body`` (pattern/format with a length). Where the intersection has
    no exact form within the caps, the length bound is the part reported unsupported
    (strict error naming ``maxLength``/``minLength``) and the pattern/format is kept:
    lengths are usually generous caps (Github_easy o9778: an email format with
    maxLength 1024), the pattern carries the structure. A pattern that has no automaton
    at all is reported itself, and ``_LENGTH_ONLY`` tells the caller to keep the length.
    """
    ptr = pointer + ("/pattern" if keyword == "pattern" else "")
    try:
        alone = regex if anchored else pattern_to_string_body(regex, ptr)
    except UnsupportedSchemaError as exc:  # the pattern itself: the length alone is kept
        conv.unsupported("pattern", ptr, exc.detail)
        return _LENGTH_ONLY
    try:
        return bounded_string_body(conv, regex, anchored, lo, None if hi is None else int(hi), ptr)
    except Unrepresentable as exc:
        if hi is not None:
            conv.unsupported("maxLength", pointer, f"maxLength next to {keyword}: {exc}")
            return _bounded(conv, keyword, regex, anchored, lo, None, pointer)
        conv.unsupported("minLength", pointer, f"minLength next to {keyword}: {exc}")
    return alone


def integer_regex(conv: ConvertContext, schema: dict, pointer: str) -> str | None:
    """Regex for the JSON integers (integer spellings) valid under ``schema``."""
    bounded = any(k in schema for k in BOUNDS)
    lo, hi = integer_bounds(schema) if bounded else (None, None)
    if "multipleOf" not in schema:
        return integer_range_regex(lo, hi) if bounded else INTEGER
    step = Fraction(str(schema["multipleOf"]))
    if step.denominator != 1:  # multiples of p/q that are integers: multiples of p
        step = Fraction(step.numerator)
    k = int(step)
    listed = enumerate_multiples(k, lo, hi) if bounded else None
    if listed is not None:
        return _alt([escape_literal(str(v)) for v in listed]) if listed else None
    if k == 1:
        return integer_range_regex(lo, hi) if bounded else INTEGER
    regex = integer_multiple_regex(k)
    if bounded:  # a wide or open range: the range's and the multiples' automata intersected
        in_range = integer_range_regex(lo, hi)
        if in_range is None:
            return None
        if regex is None or not hasattr(conv, "sharing"):
            conv.unsupported("multipleOf", pointer, f"multipleOf {k} with a wide or open range")
            return in_range
        from .boolean_ops import intersection  # it lowers scalars too (canonical mode)

        return intersection(conv, [in_range, regex])
    if regex is None:
        conv.unsupported("multipleOf", pointer, f"multipleOf {k}: residue automaton too large")
        return INTEGER
    return regex


def number_regex(conv: ConvertContext, schema: dict, pointer: str) -> str | None:
    """Regex for the JSON numbers valid under ``schema`` (see the module docstring)."""
    bounded = any(k in schema for k in BOUNDS)
    if "multipleOf" in schema:
        step = Fraction(str(schema["multipleOf"]))
        digits = _decimal_step(step)
        if digits is not None:
            lo, lo_incl, hi, hi_incl = number_bounds(schema)
            return decimal_range_regex(lo, lo_incl, hi, hi_incl, max_digits=digits)
        if step.denominator == 1:
            whole = integer_regex(conv, schema, pointer)
            return None if whole is None else whole + r"(?:\.0+)?"
        multiples = decimal_multiple_regex(step)
        if multiples is not None and not bounded:
            return multiples
        if multiples is not None and hasattr(conv, "sharing"):
            lo, lo_incl, hi, hi_incl = number_bounds(schema)
            in_range = decimal_range_regex(lo, lo_incl, hi, hi_incl)
            if in_range is None:
                return None
            from .boolean_ops import intersection  # it lowers scalars too (canonical mode)

            return intersection(conv, [in_range, multiples])
        conv.unsupported("multipleOf", pointer, f"multipleOf {schema['multipleOf']} on numbers")
    if not bounded:
        return NUMBER
    lo, lo_incl, hi, hi_incl = number_bounds(schema)
    parts = [
        r
        for r in (
            decimal_range_regex(lo, lo_incl, hi, hi_incl),
            exponent_forms(lo, lo_incl, hi, hi_incl),
        )
        if r is not None
    ]
    return _alt(parts) if parts else None


_NONZERO_MANTISSA = r"(?:[1-9][0-9]*(?:\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)"
_EXPONENT = r"[eE][+-]?[0-9]+"


def _pow10(e: int) -> Fraction:
    return Fraction(10) ** e


def _exponent_band(lo: Fraction | None, lo_incl: bool, hi: Fraction | None) -> str | None:
    """``d(.ddd)eE`` spellings of positive values (each in ``[10**E, 10**(E+1))``) for every
    E whose whole band lies within ``lo`` (None or <= 0: no bound) and ``hi``.
    """
    if hi is not None and hi <= 0:
        return None
    e_min = None  # None: no lower limit on E
    if lo is not None and lo > 0:
        e_min = len(str(lo.numerator)) - len(str(lo.denominator)) - 2
        while _pow10(e_min) < lo or (_pow10(e_min) == lo and not lo_incl):
            e_min += 1
    e_max = None
    if hi is not None:
        e_max = len(str(hi.numerator)) - len(str(hi.denominator)) + 2
        while _pow10(e_max + 1) > hi:
            e_max -= 1
    if e_min is not None and e_max is not None and e_min > e_max:
        return None
    exps = []
    if e_max is None or e_max >= 0:  # E >= 0, written e5, e+5, e+05
        exps.append(r"[eE]\+?0*" + integer_range_regex(max(e_min or 0, 0), e_max))
    if e_min is None or e_min <= -1:  # E = -K < 0
        k_lo = 1 if e_max is None or e_max >= -1 else -e_max
        exps.append(r"[eE]-0*" + integer_range_regex(k_lo, None if e_min is None else -e_min))
    if (e_min is None or e_min <= 0) and (e_max is None or e_max >= 0):
        exps.append(r"[eE]-0+")
    return r"[1-9](?:\.[0-9]+)?" + _alt(exps)


def exponent_forms(
    lo: Fraction | None, lo_incl: bool, hi: Fraction | None, hi_incl: bool
) -> str | None:
    """Exponent spellings of numbers that lie within the bounds whatever their digits.

    Exact by construction: any positive mantissa and exponent only when there is no
    upper bound and the lower bound is <= 0; zero spellings only when 0 is in range;
    ``[1-9](.d+)?eE`` (a value in ``[10**E, 10**(E+1))``) for the E whose whole band is
    in range; negative values symmetrically. None when no such spelling exists.
    """

    def zero_in() -> bool:
        return (lo is None or lo < 0 or (lo == 0 and lo_incl)) and (
            hi is None or hi > 0 or (hi == 0 and hi_incl)
        )

    parts = []
    if zero_in():
        parts.append(r"-?0(?:\.0+)?" + _EXPONENT)
    if hi is None and (lo is None or lo <= 0):  # every positive value is in range
        parts.append(_NONZERO_MANTISSA + _EXPONENT)
    if lo is None and (hi is None or hi >= 0):  # every negative value is in range
        parts.append("-" + _NONZERO_MANTISSA + _EXPONENT)
    pos = _exponent_band(lo, lo_incl, hi)
    if pos is not None:
        parts.append(pos)
    neg = _exponent_band(None if hi is None else -hi, hi_incl, None if lo is None else -lo)
    if neg is not None:
        parts.append("-" + neg)
    return _alt(parts) if parts else None


def _decimal_step(step: Fraction) -> int | None:
    """K when ``step`` is 10**-k (k >= 0), else None."""
    if step.numerator != 1:
        return None
    k, d = 0, step.denominator
    while d % 10 == 0:
        d //= 10
        k += 1
    return k if d == 1 else None
