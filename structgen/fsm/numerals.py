"""The numbers a text writes, normalised: what a copy-constrained number may be.

``numerals(text)`` reads every numeral of a text as a value: digit runs with thousands
separators (``1,250``, ``1.250``, ``1 250``, ``1'250``) and a decimal point or comma
(``3.5``, ``3,5``, ``1.250,75``), a leading currency sign or sign stripped (``$-12.50``
gives 12.5 and -12.5: the sign, ``-`` or the minus sign ``\u2212``, is kept as a second
reading, since a text writes ``-`` as a dash too), and English number words (``three``,
``forty-one``, ``two hundred and five``, ``one thousand two hundred``, ``a dozen``). The
sign word ``minus`` right before a numeral (``minus six``, ``minus 6``, ``minus 0.5``)
makes it negative, its one reading, and its span starts at the sign word; after a
numeral (``ten minus three``: a subtraction) it signs nothing. The month and day of a
numeric date and the parts of a clock time are not numerals (``2024-11-30`` writes 2024
only, ``19:30`` none: ``dates.date_time_parts``). A separator group reads as thousands
when every group after the first has exactly three digits and the first has at most
three; otherwise a comma or point before the last group is the decimal mark.

``json_numeral(value)`` writes a value as the JSON Schema grammar writes numbers
(``json_schema.scalars.NUMBER``): integers without a fraction, decimals without an
exponent or trailing zeros.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from ..lru import LRUCache
from .dates import date_time_parts

__all__ = ["numerals", "numeral_spans", "json_numeral"]

_SMALL = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_WORD = re.compile(r"[A-Za-z]+")
# digits with optional separator groups and one decimal part; the sign and currency are
# read from the two characters before the match
_DIGITS = re.compile(r"(?<![0-9])[0-9]+(?:[,.' \u00a0\u202f][0-9]+)*")
_CURRENCY = "$€£¥₹"
_SIGNS = ("-", "\u2212")  # hyphen-minus, minus sign
# a sign word right before a numeral ("minus six", "minus 6"), not inside a longer word
_SIGN_WORD = re.compile(r"(?<![^\W\d_])minus[ \t\u00a0]+$", re.I)


def _digit_values(run: str) -> list[Decimal]:
    """The value of one digit run with its separators (thousands or decimal, see module)."""
    groups = re.split(r"[,.' \u00a0\u202f]", run)
    seps = re.findall(r"[,.' \u00a0\u202f]", run)
    if not seps:
        return [Decimal(run)]
    if len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:]) and len(set(seps)) == 1:
        out = [Decimal("".join(groups))]
        if len(seps) == 1 and seps[0] in ",.":  # "3.500" may also be 3.5
            out.append(Decimal(groups[0] + "." + groups[1]))
        return out
    if seps[-1] in ",." and all(s not in ",." or s != seps[-1] for s in seps[:-1]):
        whole = "".join(groups[:-1])  # "1.250,75": the last mark is the decimal one
        if all(len(g) == 3 for g in groups[1:-1]) and len(groups[0]) <= 3 or len(groups) == 2:
            return [Decimal(whole + "." + groups[-1])]
    # not one number: each space- or apostrophe-separated part on its own
    out: list[Decimal] = []
    for part in re.split(r"[' \u00a0\u202f]", run):
        pieces = re.split(r"[,.]", part)
        if len(pieces) == 2:
            out.append(Decimal(pieces[0] + "." + pieces[1]))
        else:
            out.extend(Decimal(p) for p in pieces if p)
    return out


def _word_phrases(text: str) -> list[tuple[Decimal, int, int]]:
    """``(value, start, end)`` of each English number phrase in ``text`` (``forty-one``,
    ``two hundred and five``, ``a dozen``); two number words in a row that do not compose
    (``two three``) are two phrases.
    """
    words = [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    phrases: list[list[tuple[str, int, int]]] = []
    phrase: list[tuple[str, int, int]] = []
    last = ""  # the kind of the phrase's last number word: small, tens, scale
    for k, (w, start, end) in enumerate(words):
        joined = k > 0 and not text[words[k - 1][2] : start].strip(" -")
        if not (phrase and joined):
            phrase, last = _flush(phrases, phrase), ""
        nxt = words[k + 1][0] if k + 1 < len(words) else ""
        if w in _SMALL or w in _TENS:
            kind = "small" if w in _SMALL else "tens"
            composes = last in ("", "scale") or (
                last == "tens" and kind == "small" and _SMALL[w] < 10
            )
            if not composes:
                phrase = _flush(phrases, phrase)
            phrase.append((w, start, end))
            last = kind
        elif w in _SCALES or w == "dozen":
            phrase.append((w, start, end))
            last = "scale"
        elif w in ("a", "an") and not phrase and (nxt in _SCALES or nxt == "dozen"):
            phrase.append(("one", start, end))
            last = "small"
        elif w == "and" and phrase and last == "scale" and (nxt in _SMALL or nxt in _TENS):
            continue
        else:
            phrase, last = _flush(phrases, phrase), ""
    _flush(phrases, phrase)
    out = []
    for ph in phrases:
        if not any(w in _SMALL or w in _TENS for w, _, _ in ph):
            continue  # "hundred" alone
        total = current = 0
        for w, _, _ in ph:
            if w in _SMALL or w in _TENS:
                current += _SMALL.get(w, 0) + _TENS.get(w, 0)
            elif w == "hundred":
                current = (current or 1) * 100
            elif w == "dozen":
                current = (current or 1) * 12
            else:
                total += (current or 1) * _SCALES[w]
                current = 0
        out.append((Decimal(total + current), ph[0][1], ph[-1][2]))
    return out


def _flush(phrases: list[list[Any]], phrase: list[Any]) -> list[Any]:
    """Close ``phrase`` (kept when not empty); a new empty phrase."""
    if phrase:
        phrases.append(phrase)
    return []


def _without_date_parts(text: str) -> str:
    """``text`` with the digits of date and time parts (``dates.date_time_parts``: the
    ``11`` and ``30`` of ``2024-11-30``, the ``19`` of ``19:30``) blanked, offsets kept:
    a quantity is never read from inside a date or a time.
    """
    parts = date_time_parts(text)
    if not parts:
        return text
    chars = list(text)
    for start, end in parts:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _signed(
    text: str, found: list[tuple[int, int, tuple[Decimal, ...]]]
) -> list[tuple[int, int, tuple[Decimal, ...]]]:
    """``found`` with each numeral that a sign word precedes (module docstring: ``minus
    six``) read as negative only, its span from the sign word; a sign word after a
    numeral (a subtraction: ``ten minus three``) is no sign.
    """
    ends = {end for _, end, _ in found}
    out = []
    for start, end, values in found:
        sign = _SIGN_WORD.search(text, max(0, start - 20), start)
        if sign is not None and sign.end() == start:
            head = text[: sign.start()].rstrip(" \t\u00a0")
            if len(head) not in ends and not head.endswith(_SIGNS):
                negative = tuple(dict.fromkeys(-abs(v) for v in values))
                out.append((sign.start(), end, negative))
                continue
        out.append((start, end, values))
    return out


def _digit_spans(text: str) -> list[tuple[int, int, tuple[Decimal, ...]]]:
    """``(start, end, values)`` of each digit run of ``text`` (no sign words), in order."""
    found: list[tuple[int, int, tuple[Decimal, ...]]] = []
    for m in _DIGITS.finditer(_without_date_parts(text)):
        run = m.group().rstrip(",.' \u00a0\u202f")
        before = text[max(0, m.start() - 2) : m.start()]
        negative = before.endswith(_SIGNS) or before.endswith(
            tuple(s + c for s in _SIGNS for c in _CURRENCY)
        )
        negative = negative and not re.search(r"[0-9A-Za-z][-\u2212]$", before)
        values: list[Decimal] = []
        for v in _digit_values(run):
            values.append(v)
            if negative:
                values.append(-v)
        found.append((m.start(), m.start() + len(run), tuple(values)))
    return found


def numeral_spans(text: str) -> list[tuple[int, int, tuple[Decimal, ...]]]:
    """Where ``text`` writes each numeral, with its readings.

    Args:
        text: the source text.

    Returns:
        ``(start, end, values)`` per digit run or number phrase, ordered by ``start``:
        character offsets of the numeral in ``text`` (from its sign word: ``minus six``)
        and every value it may be read as (``numerals``' rules: ``3.500`` as 3500 and
        3.5, ``-12`` as -12 and 12, ``minus six`` as -6 only). A new list each call (a
        text read again comes from a cache of the last ``_SPANS_CACHE_SIZE`` texts: the
        extraction passes read one document's text several times).
    """
    got = _spans_cache.get(text)
    if got is None:
        found = _digit_spans(text)
        found.extend((start, end, (v,)) for v, start, end in _word_phrases(text))
        got = tuple(sorted(_signed(text, sorted(found, key=lambda f: f[0])), key=lambda f: f[0]))
        _spans_cache.put(text, got)
    return list(got)


_SPANS_CACHE_SIZE = 512  # texts (``numeral_spans``; documents and their spans)
_spans_cache: LRUCache = LRUCache(_SPANS_CACHE_SIZE)


def numerals(text: str) -> list[Decimal]:
    """Every number ``text`` writes, normalised (see the module docstring): the digit
    runs' readings in text order, then the number words', without repeats.

    Args:
        text: the source text.

    Returns:
        The values as ``Decimal`` (exact: ``1.10`` stays 1.10, compared numerically).
    """
    words = [(start, end, (v,)) for v, start, end in _word_phrases(text)]
    digits = _digit_spans(text)
    every = sorted(digits + words, key=lambda f: f[0])
    signed = dict(zip([(a, b) for a, b, _ in every], _signed(text, every), strict=True))
    found = [v for a, b, _ in digits + words for v in signed[(a, b)][2]]
    seen: dict[Decimal, Decimal] = {}
    for v in found:
        key = v.normalize()
        if key not in seen:
            seen[key] = v
    return list(seen.values())


def json_numeral(value: Decimal) -> str:
    """``value`` as the JSON grammar writes a number: ``34``, ``-12.5``, ``0.05``.

    Args:
        value: a finite decimal.

    Returns:
        Text matching ``json_schema.scalars.NUMBER`` without an exponent.
    """
    if value == value.to_integral_value():
        return str(int(value))
    text = format(value.normalize(), "f")
    return "0" + text if text.startswith(".") else text
