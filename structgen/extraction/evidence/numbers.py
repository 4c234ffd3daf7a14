"""The number rules of ``structgen.extraction.evidence``.

The numeral nearest a mention of the field's name (``number_value``), the whole reading
of a numeral the model stopped at the separator of (``grouped_reading``), the next
numeral for a field repeating a sibling's (``repeated_numbers``), the one currency-marked
numeral for a money field (``amount_value``, marks read by ``labels.amount_spans``), the
two ends of a range for a ``X_min`` / ``X_max`` pair (``range_values``, ranges read by
``_ranges``), and null for a nullable field the text mentions only negated
(``denied_number``), 0 for such an integer count that is not nullable (``denied_count``),
and no numeral of a phone number, e-mail address, identifier or date for an unrelated field
(``foreign_value``, spans read by ``labels.foreign_spans``).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.fields import (
    accepts_number,
    field_kind,
    is_nullable,
    is_scalar,
    node_numbers,
)
from structgen.extraction.evidence.text import (
    GAP_REPEAT,
    TextWords,
    name_mentions,
    name_stems,
    stems_match,
)
from structgen.extraction.labels import CURRENCY_MARK, identifier_field, is_amount_field

_WINDOW_NUMBER = 3

# what joins the two ends of a range ("65,000 to 80,000", "15 - 18", "between 1 and 3")
_RANGE_JOINERS = frozenset({"to", "-", "–", "—", "and"})

_BETWEEN = re.compile(r"\bbetween\s*\S*\s*$", re.IGNORECASE)

# the stems (``text.stem``) that name a range's ends in a field name
_RANGE_ENDS = {
    "min": "min", "minimum": "min", "low": "min", "max": "max", "maximum": "max", "high": "max"
}  # fmt: skip


def number_value(
    doc: TextWords,
    spans: list,
    stems: list[str],
    sub: dict,
    window: int = _WINDOW_NUMBER,
    name_first: bool = False,
) -> Decimal | None:
    """The number rule of the package docstring; None when no mention decides it.

    ``window`` is the most words from a mention to the numeral (1: next to it);
    ``name_first`` counts only mentions before the numeral ("wind 20 km/h", not "for 7
    days"): the left-out number rule, which reads a field the model left out.
    """
    mentions = name_mentions(doc, stems)
    in_range = {k for pair in _ranges(doc, spans) for k in pair}
    best: tuple[int, int, Decimal] | None = None
    for index, (start, end, values) in enumerate(spans):
        if index in in_range:
            continue  # one end of "65 to 80": neither is the value of a plain field
        first, last = doc.word_at(start), doc.word_at(max(start, end - 1))
        if first >= len(doc.words):
            continue
        fitting = [v for v in values if accepts_number(sub, v)]
        if not fitting:
            continue
        for k in mentions:
            if doc.words[k][3] != doc.words[first][3] or first <= k <= last:
                continue
            if name_first and k > last:
                continue
            dist = first - k if k < first else k - last
            if dist > window:
                continue
            rank = (dist, 0 if last < k else 1)
            if best is None or rank < best[:2]:
                best = (*rank, fitting[0])
    return None if best is None else best[2]


def _ranges(doc: TextWords, spans: list) -> list[tuple[int, int]]:
    """Index pairs ``(i, i + 1)`` of ``spans`` that the text writes as a range, only a
    joiner between them: "42,000 to 48,000", "€15 - €18", "between 65,000 and 80,000"
    (currency marks, spaces and line breaks around the joiner allowed), the first
    reading below the second.
    """
    found: list[tuple[int, int]] = []
    for i in range(len(spans) - 1):
        (a_start, a_end, a_values), (b_start, _, b_values) = spans[i], spans[i + 1]
        between = CURRENCY_MARK.sub(" ", doc.text[a_end:b_start]).strip().lower()
        if between not in _RANGE_JOINERS:
            continue
        if between == "and" and not _BETWEEN.search(doc.text[:a_start]):
            continue
        if a_values and b_values and min(a_values) < max(b_values):
            found.append((i, i + 1))
    return found


def range_values(
    root: Any, sub: dict, node: dict, doc: TextWords, spans: list
) -> dict[str, Decimal]:
    """The range rule of the package docstring: ``{field: new value}`` for a pair of
    sibling number fields named ``X_min`` / ``X_max`` (``min``/``max``, ``minimum``/
    ``maximum``, ``low``/``high``, either end of the name) that take the two ends of the
    one range the text writes (in a clause mentioning ``X`` when the text mentions it).
    """
    props = sub.get("properties") or {}
    ends: dict[tuple[str, ...], dict[str, str]] = {}
    for name, prop in props.items():
        kind, _ = field_kind(root, prop)
        stems = name_stems(name)
        marks = [s for s in stems if s in _RANGE_ENDS]
        if kind != "number" or len(marks) != 1:
            continue
        base = tuple(s for s in stems if s not in _RANGE_ENDS)
        ends.setdefault(base, {})[_RANGE_ENDS[marks[0]]] = name
    found: dict[str, Decimal] = {}
    for base, pair in ends.items():
        if set(pair) != {"min", "max"}:
            continue
        (_, lo_sub), (_, hi_sub) = (
            field_kind(root, props[pair["min"]]),
            field_kind(root, props[pair["max"]]),
        )
        clauses = {doc.words[k][3] for k in name_mentions(doc, list(base))} if base else set()
        readings: set[tuple[Decimal, Decimal]] = set()
        for i, j in _ranges(doc, spans):
            at = doc.word_at(spans[i][0])
            if clauses and (at >= len(doc.words) or doc.words[at][3] not in clauses):
                continue
            lo = [v for v in spans[i][2] if accepts_number(lo_sub, v)]
            hi = [v for v in spans[j][2] if accepts_number(hi_sub, v)]
            if lo and hi and lo[0] < hi[0]:
                readings.add((lo[0], hi[0]))
        if len(readings) != 1:
            continue  # no range, or two: the model decides
        ((lo_v, hi_v),) = readings
        for end, value in (("min", lo_v), ("max", hi_v)):
            current = node.get(pair[end])
            if isinstance(current, bool) or not (
                isinstance(current, (int, float)) and Decimal(str(current)) == value
            ):
                found[pair[end]] = value
    return found


def repeated_numbers(
    root: Any, sub: dict, node: dict, doc: TextWords, spans: list
) -> dict[str, Decimal]:
    """The repeat rule of the package docstring: ``{field: new value}`` for the
    non-nullable number fields of one object that repeat an earlier sibling's value the
    text writes once, each taking the numeral the text writes next after it.
    """
    found: dict[str, Decimal] = {}
    held: list[tuple[str, Decimal]] = []  # number siblings so far, schema order
    for name, prop in (sub.get("properties") or {}).items():
        kind, branch = field_kind(root, prop)
        current = node.get(name)
        if kind != "number" or not is_scalar(current) or isinstance(current, str):
            continue
        value = Decimal(str(current))
        earlier = any(v == value for _, v in held)
        held.append((name, value))
        if not earlier or is_nullable(root, prop):
            continue
        places = [k for k, (_, _, values) in enumerate(spans) if value in values]
        if len(places) != 1 or places[0] + 1 >= len(spans):
            continue  # written twice (both may be right) or never: the model decides
        start, end, _ = spans[places[0]]
        n_start, n_end, n_values = spans[places[0] + 1]
        last, first = doc.word_at(max(start, end - 1)), doc.word_at(n_start)
        if first >= len(doc.words) or doc.words[first][3] != doc.words[last][3]:
            continue  # the next numeral is in another clause
        if first - last - 1 > GAP_REPEAT:
            continue
        taken = {v for _, v in held} | set(node_numbers(node))
        fitting = [v for v in n_values if accepts_number(branch, v) and v not in taken]
        if fitting:
            found[name] = fitting[0]
            held[-1] = (name, fitting[0])
    return found


def grouped_reading(root: Any, prop: Any, value: Any, spans: list) -> Decimal | None:
    """The separator rule of the package docstring: the thousands reading of the numeral
    whose decimal reading with trailing zeros ``value`` equals, or None (no change).
    """
    kind, branch = field_kind(root, prop)
    if kind != "number" or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = Decimal(str(value))
    found: set[Decimal] = set()
    for _, _, values in spans:
        if number not in values:
            continue
        zeroed = [
            r
            for r in values
            if r == number and int(r.as_tuple().exponent) < 0 and r.as_tuple().digits[-1] == 0
        ]
        whole = [r for r in values if r != number and int(r.as_tuple().exponent) >= 0]
        if not zeroed or len(whole) != 1:
            return None  # some numeral reads as the value plainly: the model decides
        found.add(whole[0])
    if len(found) != 1:
        return None
    (grouped,) = found
    return grouped if accepts_number(branch, grouped) else None


def amount_value(root: Any, prop: Any, name: str, value: Any, amounts: list) -> Decimal | None:
    """The amount rule of the package docstring: the one currency-marked numeral a money
    field may hold, when the model's value is none of them; else None (no change).
    """
    kind, branch = field_kind(root, prop)
    if kind != "number" or isinstance(value, (str, bool)) or not is_amount_field(name_stems(name)):
        return None
    if value is None and not is_nullable(root, prop):
        return None
    number = None if value is None else Decimal(str(value))
    if number is not None and any(number in values for _, _, values in amounts):
        return None
    fitting = [[v for v in values if accepts_number(branch, v)] for _, _, values in amounts]
    distinct = {f[0] for f in fitting if f}
    return distinct.pop() if len(distinct) == 1 else None


def denied_count(doc: TextWords, stems: list[str], root: Any, prop: Any) -> bool:
    """The denied-count rule of the package docstring: a non-nullable integer field whose
    bounds take 0 and whose name's words the text mentions only negated.
    """
    kind, branch = field_kind(root, prop)
    types = branch.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    if kind != "number" or "integer" not in types or is_nullable(root, prop):
        return False
    return accepts_number(branch, Decimal(0)) and all_negated(doc, stems)


def denied_number(doc: TextWords, stems: list[str], root: Any, prop: Any) -> bool:
    """The denied-number rule of the package docstring: a nullable field whose name's
    words the text mentions, every mention in a clause with a negation.
    """
    return is_nullable(root, prop) and all_negated(doc, stems)


def all_negated(doc: TextWords, stems: list[str]) -> bool:
    """Whether the text mentions some of the name's words, every mention in a clause with
    a negation.
    """
    mentions = [k for k, (w, *_) in enumerate(doc.words) if any(stems_match(w, s) for s in stems)]
    return bool(mentions) and all(doc.negated(k) for k in mentions)


# name stems of number fields that a date's or time's parts may fill ("day", "hour")
_DATE_PART_STEMS = frozenset("day month year hour minut second date time".split())


def foreign_value(
    root: Any, prop: Any, name: str, node: dict, spans: list, foreign: tuple[list, list]
) -> tuple[bool, Decimal | None]:
    """The foreign numeral rule of the package docstring: ``(True, new value)`` for a
    number field whose value the text writes only inside a phone number, e-mail address,
    identifier or date (``foreign``: ``labels.foreign_spans`` with and without
    identifiers; no rule for a field named for a date part, identifiers not for a field
    named for an identifier) or, when the text writes no numeral at all, nowhere; the new
    value is None for a nullable field, else the one numeral written outside such spans
    that fits the field and no sibling holds. ``(False, None)``: no change.
    """
    value = node.get(name)
    kind, branch = field_kind(root, prop)
    if kind != "number" or not is_scalar(value) or isinstance(value, str):
        return False, None
    if any(s in _DATE_PART_STEMS for s in name_stems(name)):
        return False, None
    number = Decimal(str(value))
    foreign_here = foreign[1] if identifier_field(name) else foreign[0]

    def inside(start: int, end: int) -> bool:
        return any(a <= start and end <= b for a, b in foreign_here)

    places = [(a, b) for a, b, values in spans if number in values]
    if places and not all(inside(a, b) for a, b in places):
        return False, None  # written as a numeral of its own somewhere
    if not places and spans:
        return False, None  # not written, but the text has numerals: it may be derived
    if is_nullable(root, prop):
        return True, None
    taken = set(node_numbers({k: v for k, v in node.items() if k != name}))
    free = set()
    for a, b, values in spans:
        fitting = [v for v in values if accepts_number(branch, v) and v not in taken]
        if fitting and not inside(a, b):
            free.add(fitting[0])
    return (True, free.pop()) if len(free) == 1 else (False, None)
