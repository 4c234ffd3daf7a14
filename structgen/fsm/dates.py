"""The dates and times a text writes, normalised: what a copied date or time may be.

A field whose grammar demands ISO 8601 (``format: date``, or a ``pattern`` such as
``^[0-2][0-9]:[0-5][0-9]$``) cannot be a span of a text that writes ``7 March 2026`` or
``2:15 pm``; ``dates(text)`` and ``times(text)`` give those values as the schema writes
them, and the copy constraint (``json_schema.copy``) allows them beside the spans.

``dates(text)`` reads, as ``YYYY-MM-DD``:

* numeric dates with a four-digit year: ``2026-04-08``, ``2026/09/10`` (year first),
  ``23.12.2026`` (day first), and ``06/15/2026`` or ``11-02-2026`` where the order is
  ambiguous: every reading that is a real date (month-day and day-month);
* dates with an English month name or its three-letter abbreviation, either order, with
  ordinals (``9th``, or in words: ``the twentieth of October 2026``, ``May twenty-first``)
  and ``of``: ``7 March 2026``, ``the 9th of July 2026``, ``March 7, 2026``,
  ``Mar. 7th 2026``; without a year (``November 2``), once per four-digit year
  (1900-2099) the text writes.

``times(text)`` reads, as ``HH:MM`` and ``HH:MM:SS`` (24-hour): ``09:30``, ``9:30:15``,
``2:15 pm``, ``11 a.m.``, ``14h30``, ``7 o'clock`` (as written: no am/pm guessed),
``noon`` and ``midnight``.

Both return distinct values in the order of their first occurrence. ``date_time_parts(text)``
gives where numeric dates write their month and day and clock times their hours, minutes
and seconds: digits that are not numbers of their own (``numerals`` skips them).
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = ["dates", "times", "date_spans", "date_time_parts"]

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_MONTH = r"(?P<{}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL_UNITS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth".split()
)
# a day of the month written as an English ordinal word: "twentieth", "twenty-first"
_ORDINAL_DAYS = {
    **{w: i + 1 for i, w in enumerate(_ORDINAL_UNITS)},
    "twentieth": 20,
    **{f"twenty{sep}{w}": 21 + i for i, w in enumerate(_ORDINAL_UNITS[:9]) for sep in "- "},
    "thirtieth": 30,
    "thirty-first": 31,
    "thirty first": 31,
}
_DAY = (
    r"(?:(?P<{0}>[0-3]?[0-9])(?:st|nd|rd|th)?|(?P<{0}w>"
    + "|".join(re.escape(w) for w in sorted(_ORDINAL_DAYS, key=len, reverse=True))
    + r"))"
)
_YEAR = r"(?P<{}>(?:19|20)[0-9]{{2}})"
_B = r"(?<![0-9A-Za-z])"  # no letter or digit before
_E = r"(?![0-9A-Za-z])"  # nor after

_ISO = re.compile(_B + r"([0-9]{4})[-/]([0-9]{1,2})[-/]([0-9]{1,2})" + _E)
_DMY_DOT = re.compile(_B + r"([0-9]{1,2})\.([0-9]{1,2})\.([0-9]{4})" + _E)
_AMBIGUOUS = re.compile(_B + r"([0-9]{1,2})([/-])([0-9]{1,2})\2([0-9]{4})" + _E)
_DAY_MONTH = re.compile(
    _B
    + r"(?:the\s+)?"
    + _DAY.format("d")
    + r"(?:\s+of)?\s+"
    + _MONTH.format("m")
    + r"(?:,?\s+"
    + _YEAR.format("y")
    + r")?"
    + _E,
    re.IGNORECASE,
)
_MONTH_DAY = re.compile(
    _B
    + _MONTH.format("m")
    + r"\s+(?:the\s+)?"
    + _DAY.format("d")
    + r"(?:,?\s+"
    + _YEAR.format("y")
    + r")?"
    + _E,
    re.IGNORECASE,
)
_YEARS = re.compile(_B + r"(?:19|20)[0-9]{2}" + _E)

_AMPM = r"\s*(?P<ap>[ap])\.?\s?m\b\.?"
_CLOCK = re.compile(
    _B + r"(?P<h>[0-2]?[0-9])[:h](?P<m>[0-5][0-9])(?::(?P<s>[0-5][0-9]))?(?:" + _AMPM + r")?"
    r"(?![0-9])",
    re.IGNORECASE,
)
_HOUR_AMPM = re.compile(
    r"(?<![0-9A-Za-z:.])(?P<h>1[0-2]|0?[1-9])(?:\.(?P<m>[0-5][0-9]))?" + _AMPM, re.I
)
_OCLOCK = re.compile(_B + r"(?P<h>1[0-2]|0?[1-9])\s*o'?\s?clock\b", re.IGNORECASE)
_NAMED = re.compile(r"\b(noon|midday|midnight)\b", re.IGNORECASE)


def _named_month_dates(text: str) -> list[re.Match]:
    """The matches of ``_DAY_MONTH`` and ``_MONTH_DAY`` in ``text``; a day in words before
    its month counts only with ``of`` ("the second of May", not "the second may be").
    """
    found = []
    for pattern in (_DAY_MONTH, _MONTH_DAY):
        for m in pattern.finditer(text):
            if pattern is _DAY_MONTH and m["dw"] and not re.search(r"\sof\s", m[0], re.I):
                continue
            found.append(m)
    return found


def _iso(year: int, month: int, day: int) -> str | None:
    try:
        return _dt.date(year, month, day).isoformat()
    except ValueError:
        return None


def dates(text: str) -> list[str]:
    """The dates ``text`` writes, as ``YYYY-MM-DD`` (module docstring).

    Args:
        text: any text.

    Returns:
        Distinct ISO dates in order of first occurrence (an ambiguous numeric date gives
        both readings, month first).
    """
    found: list[tuple[float, str | None]] = []
    for m in _ISO.finditer(text):
        found.append((m.start(), _iso(int(m[1]), int(m[2]), int(m[3]))))
    for m in _DMY_DOT.finditer(text):
        found.append((m.start(), _iso(int(m[3]), int(m[2]), int(m[1]))))
    for m in _AMBIGUOUS.finditer(text):
        a, b, y = int(m[1]), int(m[3]), int(m[4])
        found.append((m.start(), _iso(y, a, b)))
        found.append((m.start() + 0.5, _iso(y, b, a)))
    years = list(dict.fromkeys(int(y) for y in _YEARS.findall(text)))
    for m in _named_month_dates(text):
        month = _MONTHS[m["m"].lower()]
        day = int(m["d"]) if m["d"] else _ORDINAL_DAYS[re.sub(r"\s+", " ", m["dw"].lower())]
        for y in [int(m["y"])] if m["y"] else years:
            found.append((m.start(), _iso(y, month, day)))
    found.sort(key=lambda p: p[0])
    return list(dict.fromkeys(v for _, v in found if v is not None))


def _hhmm(hour: int, minute: int, second: int | None = None) -> list[str]:
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return []
    out = [f"{hour:02d}:{minute:02d}", f"{hour:02d}:{minute:02d}:{second or 0:02d}"]
    return out


def _twelve(hour: int, ap: str | None) -> int | None:
    if ap is None:
        return hour
    if not 1 <= hour <= 12:
        return None
    return hour % 12 + (12 if ap.lower() == "p" else 0)


def times(text: str) -> list[str]:
    """The times of day ``text`` writes, as ``HH:MM`` and ``HH:MM:SS`` (module docstring).

    Args:
        text: any text.

    Returns:
        Distinct times in order of first occurrence, each as ``HH:MM`` then
        ``HH:MM:SS``.
    """
    found: list[tuple[int, list[str]]] = []
    for m in _CLOCK.finditer(text):
        hour = _twelve(int(m["h"]), m["ap"])
        if hour is not None:
            second = int(m["s"]) if m["s"] else None
            found.append((m.start(), _hhmm(hour, int(m["m"]), second)))
    for m in _HOUR_AMPM.finditer(text):
        hour = _twelve(int(m["h"]), m["ap"])
        if hour is not None:
            found.append((m.start(), _hhmm(hour, int(m["m"] or 0))))
    for m in _OCLOCK.finditer(text):
        found.append((m.start(), _hhmm(int(m["h"]), 0)))
    for m in _NAMED.finditer(text):
        found.append((m.start(), _hhmm(0 if m[1].lower() == "midnight" else 12, 0)))
    found.sort(key=lambda p: p[0])
    return list(dict.fromkeys(v for _, vs in found for v in vs))


def date_time_parts(text: str) -> list[tuple[int, int]]:
    """Where ``text`` writes the month and day of a numeric date (``2024-11-30``,
    ``23.12.2026``, ``06/15/2026``: the four-digit year is not a part, a year is a number
    of its own) and the hour, minute and second of a clock time (``19:30``, ``9:30:15``,
    ``14h30``).

    Args:
        text: any text.

    Returns:
        ``(start, end)`` character offsets of each such digit group, in no particular order.
    """
    parts: list[tuple[int, int]] = []
    for pattern, groups in ((_ISO, (2, 3)), (_DMY_DOT, (1, 2)), (_AMBIGUOUS, (1, 3))):
        for m in pattern.finditer(text):
            parts.extend(m.span(g) for g in groups)
    for m in _CLOCK.finditer(text):
        parts.extend(m.span(g) for g in ("h", "m", "s") if m[g] is not None)
    return parts


def date_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` writes a whole date, its year included when written ("June 1,
    2019", "1st of June", "2024-11-30", "23.12.2026", "06/15/2026"): the spans ``dates``
    reads, unlike ``date_time_parts``, which gives only a numeric date's month and day.

    Args:
        text: any text.

    Returns:
        ``(start, end)`` character offsets of each date, in text order.
    """
    numeric = [m.span() for p in (_ISO, _DMY_DOT, _AMBIGUOUS) for m in p.finditer(text)]
    return sorted({*numeric, *(m.span() for m in _named_month_dates(text))})
