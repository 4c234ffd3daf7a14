"""The date rules of ``structgen.extraction.evidence``.

Two ``format: date`` fields on one date take the text's dates in order
(``dates_in_order``, and ``nested_dates_in_order`` for the date fields of an object and
the objects nested in it: ``pickup.date`` and ``return_date``); a nullable plain string
field holding a sibling's date or time, its name nowhere in the text, is null
(``a_siblings_date``); a date or time field left null or out takes the one date or
time the text writes right after the words naming it (``named_date``: "Next meeting: 9
February 2026", "Doors open at 7 pm"); a date field holding one reading of an ambiguous
numeric date the text writes with its order stated right after it ("03/02/2026
(DD/MM/YYYY)") takes the stated reading (``stated_order``); of two date fields holding
the one date the text writes, the copy takes the one relative date the text writes ("one
week later", "yesterday"), or null where it writes none (``relative_date``). Dates and
times are read by ``structgen.fsm.dates``.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from structgen.extraction.evidence.fields import is_nullable, schema_accepts
from structgen.extraction.evidence.text import (
    TextWords,
    name_mentions,
    name_stems,
    stem,
    stems_match,
)
from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import date_spans, dates, times

# a field name's words that say what kind of value it holds, not which one: a run naming
# ``next_service_date`` is "next service"
_KIND_STEMS = frozenset(stem(w) for w in ("date", "time", "day"))

# words between the words naming a field and the date or time they label ("Next service
# due 11.03.2027", "next meet on April 2", "Doors open at 7 pm")
_GAP_NAMED = 2


# a numeric date whose order is ambiguous (``fsm.dates``: "03/02/2026", "11-02-2026") and
# the order a text states right after it: "(DD/MM/YYYY)", "dd.mm.yyyy", "[MM/DD/YY]"
_AMBIGUOUS_DATE = re.compile(r"(?<![\d./-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4})(?![\d/-])")
_STATED_ORDER = re.compile(r"[ \t]*[(\[]?[ \t]*(dd|mm)[/.-](dd|mm)[/.-]yy(?:yy)?(?![a-z])", re.I)
# the order stated later in the date's sentence, in letters or words: "(D/M/Y)",
# "(dates written day/month/year)", "(day first)", "(month first)"
_STATED_LATER = re.compile(
    r"(?<![a-z])(?:(dd?|mm?|day|month)[/.-](dd?|mm?|day|month)[/.-](?:yy(?:yy)?|y|year)"
    r"|(day|month)[ \t]+first)(?![a-z])",
    re.I,
)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def _iso(year: int, month: int, day: int) -> str | None:
    try:
        return _dt.date(year, month, day).isoformat()
    except ValueError:
        return None


def stated_order(root: Any, prop: Any, value: Any, text: str) -> str | None:
    """The stated-order rule of the package docstring: the day-first (``DD/MM``) or
    month-first (``MM/DD``) reading of the ambiguous numeric date the text writes with
    its order stated right after it, for a ``format: date`` field holding that date's
    other reading; None where no such date is held or the stated reading is held already
    ("03/02/2026 (DD/MM/YYYY)": "2026-03-02" -> "2026-02-03").
    """
    if not isinstance(value, str) or not _is_date_field(root, prop):
        return None
    for m in _AMBIGUOUS_DATE.finditer(text):
        first = _stated_first(text, m.end())
        if first is None:
            continue
        a, b, year = int(m[1]), int(m[3]), int(m[4])
        month_first, day_first = _iso(year, a, b), _iso(year, b, a)
        stated, other = (day_first, month_first) if first == "d" else (month_first, day_first)
        if stated is not None and value == other != stated:
            return stated
    return None


def _stated_first(text: str, at: int) -> str | None:
    """``"d"`` (day first) or ``"m"`` (month first): the order the text states for a
    numeric date ending at ``at``, right after it ("(DD/MM/YYYY)") or later in its
    sentence in letters or words ("04/05/2027 to 07/05/2027 (dates written
    day/month/year)", "(D/M/Y)", "(month first)"); None where it states none, or
    states both or neither part first ("dd/dd/yyyy").
    """
    order = _STATED_ORDER.match(text, at)
    if order is not None:
        a, b = order[1].lower(), order[2].lower()
        return a[0] if a != b else None
    end = _SENTENCE_END.search(text, at)
    later = _STATED_LATER.search(text, at, end.start() if end is not None else len(text))
    if later is None:
        return None
    if later[3] is not None:
        return later[3][0].lower()
    a, b = later[1].lower()[0], later[2].lower()[0]
    return a if a != b else None


def _is_date_field(root: Any, prop: Any) -> bool:
    sub = _resolve(root, prop)
    if not isinstance(sub, dict) or sub.get("format") != "date" or "enum" in sub:
        return False
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    return types - {"null"} == {"string"}


def dates_in_order(root: Any, sub: dict, node: dict, text: str) -> dict[str, str]:
    """The date-order rule of the package docstring: ``{field: new date}`` when two date
    fields of one object hold the same date and the text writes exactly as many dates
    (every reading, ``fsm.dates``) as the object has date fields, taken in text order.
    """
    names = [k for k, p in (sub.get("properties") or {}).items() if _is_date_field(root, p)]
    held = [node.get(k) for k in names]
    if len(names) < 2 or not any(isinstance(v, str) and held.count(v) > 1 for v in held):
        return {}
    written = dates(text)
    if len(written) != len(names) or len(date_spans(text)) != len(written):
        return {}  # (two readings of one ambiguous date are not two dates)
    return {k: d for k, d, v in zip(names, written, held) if d != v}


# what joins the two dates of a range ("01.09.2026 - 30.09.2026", "04/01/2027 to
# 06/30/2027", "from 3 May until 9 May 2027")
_RANGE_JOIN = re.compile(r"[ \t]*(?:-|–|—|to|until|till|through|thru)[ \t]*", re.I)
# a range whose first date is a day number alone, the second date naming its month and
# year: "from 14 to 16 June 2027", "14-16 June 2027", "3rd to 5th of May 2027"
_ELIDED_START = re.compile(
    r"(?<![\w./-])(\d{1,2})(?:st|nd|rd|th)?(?=[ \t]*(?:-|–|—|to|until|till)[ \t]*\d)"
)


def _ranges(text: str) -> list[tuple[list[str], list[str]]]:
    """The date ranges ``text`` writes: ``(first readings, second readings)`` for two
    whole dates joined by ``_RANGE_JOIN``, or a day number joined to a whole date in the
    same month and year (``_ELIDED_START``), in text order.
    """
    spans = date_spans(text)
    found = []
    for (a, b), (c, d) in zip(spans, spans[1:]):
        if _RANGE_JOIN.fullmatch(text, b, c):
            found.append((dates(text[a:b]), dates(text[c:d])))
    for m in _ELIDED_START.finditer(text):
        join = _RANGE_JOIN.match(text, m.end())
        second = next(((c, d) for c, d in spans if c == join.end()), None)
        if second is None:
            continue
        ends = dates(text[second[0] : second[1]])
        firsts = [_iso(int(e[:4]), int(e[5:7]), int(m[1])) for e in ends]
        found.append(([f for f in firsts if f], ends))
    return found


def date_range(root: Any, sub: dict, node: dict, text: str) -> dict[str, str]:
    """The date-range rule of the package docstring: ``{field: new date}`` when two date
    fields next to each other in one object (schema order) hold the same date and the
    text writes exactly one range (``_ranges``) with that date as one of its ends' readings:
    the first field takes its first date, the second its second (the held date stays the
    reading of the end it is one of; the other end's reading is the one after the start;
    with two such pairs, no change).
    """
    names = [k for k, p in (sub.get("properties") or {}).items() if _is_date_field(root, p)]
    for first, second in zip(names, names[1:]):
        held = node.get(first)
        if not isinstance(held, str) or node.get(second) != held:
            continue
        pairs = {
            (x, y)
            for starts, ends in _ranges(text)
            if held in starts or held in ends
            for x in ([held] if held in starts else starts)
            for y in (ends if held in starts else [held])
            if x < y
        }
        if len(pairs) != 1:
            continue
        ((x, y),) = pairs
        props = sub["properties"]
        if schema_accepts(root, props[first], x) and schema_accepts(root, props[second], y):
            return {k: v for k, v in ((first, x), (second, y)) if v != node.get(k)}
    return {}


def nested_dates_in_order(root: Any, schema: Any, value: dict, text: str) -> list[str]:
    """The date-order rule across nested objects (package docstring): the date fields of
    ``value`` and of the objects nested in it (not inside arrays), in schema order
    (``pickup.date``, ``return_date``), taken as one list; where two of them hold the
    same date, some of them inside a nested object, and the text writes exactly as many
    dates as there are such fields, they take the text's dates in order. Changes
    ``value`` in place.

    Args:
        root: the whole schema (``$ref`` resolution).
        schema: ``value``'s subschema.
        value: the extracted object.
        text: the document.

    Returns:
        The dotted paths of the fields changed, in schema order.
    """
    fields: list[tuple[dict, str, str]] = []  # (holder, key, dotted path)

    def collect(sub: Any, node: dict, path: str, depth: int) -> None:
        sub = _resolve(root, sub)
        if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
            return
        for key, prop in (sub.get("properties") or {}).items():
            if _is_date_field(root, prop):
                fields.append((node, key, path + key))
            elif isinstance(node.get(key), dict):
                collect(prop, node[key], f"{path}{key}.", depth + 1)

    collect(schema, value, "", 0)
    held = [holder.get(key) for holder, key, _ in fields]
    nested = any("." in path for *_, path in fields)
    if len(fields) < 2 or not nested:
        return []  # one object's date fields: ``dates_in_order``
    if not any(isinstance(v, str) and held.count(v) > 1 for v in held):
        return []
    written = dates(text)
    if len(written) != len(fields):
        return []
    changed = []
    for (holder, key, path), new, old in zip(fields, written, held):
        if new != old:
            holder[key] = new
            changed.append(path)
    return changed


def a_siblings_date(root: Any, prop: Any, name: str, node: dict, doc: TextWords) -> bool:
    """The date-null rule of the package docstring: whether a nullable plain string field
    holds a date or time (as ``fsm.dates`` reads it) that a sibling field holds.
    """
    value, sub = node.get(name), _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not is_nullable(root, prop):
        return False
    if any(k in sub for k in ("format", "pattern", "enum", "const")):
        return False
    if name_mentions(doc, name_stems(name)):
        return False  # the text names the field: the model decides
    read = set(dates(value)) | set(times(value))
    return any(k != name and isinstance(v, str) and v in read for k, v in node.items())


def time_field(root: Any, sub: dict) -> bool:
    """Whether a string field's subschema (resolved, a dict) holds a time of day:
    ``format: time``, or a ``pattern`` that ``09:30`` matches and ``2026-01-31`` does not.
    """
    if sub.get("format") == "time":
        return True
    if "pattern" not in sub or "format" in sub:
        return False
    return schema_accepts(root, sub, "09:30") and not schema_accepts(root, sub, "2026-01-31")


def named_date(root: Any, sub: dict, name: str, node: dict, doc: TextWords) -> str | None:
    """The named date rule of the package docstring: for a date field (``format: date``)
    or a time field (``format: time``, or a ``pattern`` time ``HH:MM`` fits) that the
    model left null or out (where the schema lets it: nullable, or not ``required``), the
    one date or time the text writes within ``_GAP_NAMED`` words after a run of words
    naming the field: every stem of the name but the kind words (``_KIND_STEMS``) matched
    by the run's words, in one clause, not negated ("Next meeting: 9 February 2026",
    "next service due 11.03.2027", "Doors open at 7 pm"). None (no change) otherwise: no
    such run, two different values, an ambiguous numeric date (``03/02/2026``), or a
    value the schema rejects.
    """
    prop = _resolve(root, (sub.get("properties") or {}).get(name))
    if not isinstance(prop, dict) or node.get(name) is not None:
        return None
    if name in node and not is_nullable(root, prop):
        return None
    if name not in node and name in (sub.get("required") or ()):
        return None
    return _named_value(root, prop, name, doc)


def renamed_date(root: Any, sub: dict, name: str, node: dict, doc: TextWords) -> str | None:
    """The named date rule for a date or time field the model filled with a sibling's
    value: the one date or time the text writes right after a run of words naming the
    field (as ``named_date`` reads it), where the field holds a different one that a
    sibling field holds too ("Next meeting: 10 November 2026" for ``next_meeting``
    holding the meeting's own ``date``; "Date of discharge: 11/19/2026" for
    ``discharge_date`` holding the ``date_of_birth``). None (no change) where the field
    is null or left out, holds a value no sibling holds (the model's own reading stays),
    the text names no single value, or the field holds it already.
    """
    props = sub.get("properties") or {}
    prop = _resolve(root, props.get(name))
    current = node.get(name)
    if not isinstance(prop, dict) or not isinstance(current, str):
        return None
    if not any(k != name and node.get(k) == current for k in props):
        return None  # a date no sibling holds: the model's reading stays
    found = _named_value(root, prop, name, doc)
    if found is None or found == current:
        return None
    if not _is_date_field(root, prop) and current[:5] == found:
        return None  # "18:30:00" holds the time "18:30"
    return found


def _named_value(root: Any, prop: dict, name: str, doc: TextWords) -> str | None:
    """The one date or time the text writes within ``_GAP_NAMED`` words after a run of
    words naming field ``name`` (``named_date``), accepted by ``prop``; None where there
    is no such run, two different values or an ambiguous numeric date.
    """
    is_date = _is_date_field(root, prop)
    if not is_date and not time_field(root, prop):
        return None
    stems = [s for s in name_stems(name) if s not in _KIND_STEMS]
    if not stems:
        return None
    words, found = doc.words, set()
    k = 0
    while k < len(words):
        j = k  # a run: consecutive words each matching a stem of the name, one clause
        while (
            j < len(words)
            and words[j][3] == words[k][3]
            and any(stems_match(words[j][0], s) for s in stems)
        ):
            j += 1
        if j == k:
            k += 1
            continue
        run = {s for s in stems for w in words[k:j] if stems_match(w[0], s)}
        if len(run) == len(stems) and not doc.negates(k, j - 1):
            found |= _values_after(doc, j - 1, is_date)
        k = j
    if len(found) != 1:
        return None
    (value,) = found
    if not is_date:
        value = next((v for v in times(value) if schema_accepts(root, prop, v)), None)
    return value if value is not None and schema_accepts(root, prop, value) else None


def _values_after(doc: TextWords, last: int, is_date: bool) -> set[str]:
    """The dates (``YYYY-MM-DD``), or the times (``HH:MM``), that start
    within ``_GAP_NAMED`` words after word ``last``, in its clause (a date runs on past
    the comma of "April 2, 2026"); an ambiguous numeric date gives nothing.
    """
    words, clause = doc.words, doc.words[last][3]
    window = [w for w in range(last + 1, min(last + 2 + _GAP_NAMED, len(words)))]
    window = [w for w in window if words[w][3] == clause]
    if not window:
        return set()
    lo, hi = words[window[0]][1], words[window[-1]][2]
    if is_date:
        out: set[str] = set()
        for a, b in date_spans(doc.text):
            if lo <= a < hi:
                read = dates(doc.text[a:b])
                if len(read) == 1:
                    out.add(read[0])
        return out
    # a time's words: the window and one word after it, in the clause ("7 pm")
    after = window[-1] + 1
    if after < len(words) and words[after][3] == clause:
        hi = words[after][2]
    return {r[:5] for r in times(doc.text[lo:hi])}  # HH:MM (each time is read twice)


# a date the text writes relative to the one date a document is about: a day word
# ("yesterday", "tomorrow") or a count of days, weeks, months or years followed by a word
# that points from that date ("one week later", "two weeks after today's screening",
# "twelve months from the date of this visit", "three days earlier", "a month ago"); a
# count "before" something ("due 14 days before travel") is a deadline, not counted
_RELATIVE_DAY = re.compile(r"(?<![^\W_])(yesterday|tomorrow)(?![^\W_])", re.I)
_COUNTS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
_RELATIVE_SPAN = re.compile(
    r"(?<![^\W_])(an?|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    r"|\d{1,3})[ \t-]+(day|week|fortnight|month|year)s?[ \t]+(later|after|from|earlier|ago)"
    r"(?![^\W_])",
    re.I,
)
_UNIT_DAYS = {"day": 1, "week": 7, "fortnight": 14}


def relative_offsets(text: str) -> list[tuple[int, str]]:
    """The relative dates ``text`` writes (``_RELATIVE_DAY``, ``_RELATIVE_SPAN``), in text
    order, as ``(count, unit)`` with ``unit`` one of ``"day"``, ``"month"``, ``"year"`` and
    the count negative for a date before the anchor ("yesterday": ``(-1, "day")``, "two
    weeks after": ``(14, "day")``, "twelve months from": ``(12, "month")``). Raises: never.
    """
    found = [
        (m.start(), (-1 if m[1].lower() == "yesterday" else 1, "day"))
        for m in _RELATIVE_DAY.finditer(text)
    ]
    for m in _RELATIVE_SPAN.finditer(text):
        word, unit, way = m[1].lower(), m[2].lower(), m[3].lower()
        count = int(word) if word.isdigit() else _COUNTS.get(word, 1)
        sign = -1 if way in ("earlier", "ago") else 1
        if unit in _UNIT_DAYS:
            found.append((m.start(), (sign * count * _UNIT_DAYS[unit], "day")))
        else:
            found.append((m.start(), (sign * count, unit)))
    return [off for _, off in sorted(found)]


def shifted(iso: str, offset: tuple[int, str]) -> str | None:
    """The date ``iso`` (``YYYY-MM-DD``) moved by ``offset`` (``relative_offsets``); a
    month or year shift keeps the day, clamped to the month's last ("31 January" plus one
    month: 28 or 29 February). None where ``iso`` is no date. Raises: never.
    """
    try:
        day = _dt.date.fromisoformat(iso)
    except ValueError:
        return None
    count, unit = offset
    if unit == "day":
        try:
            return (day + _dt.timedelta(days=count)).isoformat()
        except OverflowError:
            return None
    months = day.month - 1 + count * (12 if unit == "year" else 1)
    year, month = day.year + months // 12, months % 12 + 1
    if not 1 <= year <= 9999:
        return None
    last = (_dt.date(year + month // 12, month % 12 + 1, 1) - _dt.timedelta(days=1)).day
    return _dt.date(year, month, min(day.day, last)).isoformat()


def relative_date(root: Any, sub: dict, node: dict, text: str) -> dict[str, str | None]:
    """The relative-date rule of the package docstring: ``{field: new value}`` for two
    date fields of one object holding the same date that the text writes once (one date
    span, ``fsm.dates``, reads as it) and where every date the text writes is held by a
    date field of the object (else the copy may be the unheld date's, "reduced if paid
    ... by 17 April 2027"). One of them copied the other: the nullable one
    where exactly one is nullable, else the later in schema order. With exactly one
    relative date in the text (``relative_offsets``) that field takes the held date moved
    by it ("Submitted 02/02/2027 ... When: yesterday": ``incident_date`` 2027-02-01;
    "Outward 3rd of September 2027 ... coming back one week later": ``return_date``
    2027-09-10); with none, a nullable copy (the other field not nullable) is null ("Next
    routine service as per contract": no ``next_visit``). Empty (no change) otherwise: the
    date written twice or more, two relative dates, a value the schema rejects.
    """
    props = sub.get("properties") or {}
    names = [k for k, p in props.items() if _is_date_field(root, p)]
    for i, first in enumerate(names):
        held = node.get(first)
        if not isinstance(held, str):
            continue
        for second in names[i + 1 :]:
            if node.get(second) != held:
                continue
            readings = [dates(text[a:b]) for a, b in date_spans(text)]
            if sum(held in r for r in readings) != 1:
                return {}
            taken = {node.get(k) for k in names}
            if any(taken.isdisjoint(r) for r in readings):
                return {}  # a date no field holds: the copy may be that one's
            nullable = (is_nullable(root, props[first]), is_nullable(root, props[second]))
            target = first if nullable == (True, False) else second
            offsets = relative_offsets(text)
            if len(offsets) == 1:
                new = shifted(held, offsets[0])
                ok = new is not None and schema_accepts(root, props[target], new)
                return {target: new} if ok else {}
            if not offsets and nullable[0] != nullable[1]:
                return {target: None}
            return {}
    return {}
