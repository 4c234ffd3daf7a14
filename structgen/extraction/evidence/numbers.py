"""The number rules of ``structgen.extraction.evidence``.

The numeral nearest a mention of the field's name (``_number_value``), the whole reading
of a numeral the model stopped at the separator of (``_grouped_reading``), the next
numeral for a field repeating a sibling's (``_repeated_numbers``), the one currency-marked
numeral for a money field (``_amount_value``, marks read by ``labels.amount_spans``), and
null for a nullable field the text mentions only negated (``_denied``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.fields import _accepts, _kind, _node_numbers, _nullable, _scalar
from structgen.extraction.evidence.text import _GAP_REPEAT, _matches, _mentions, _Text, name_stems
from structgen.extraction.labels import is_amount_field

_WINDOW_NUMBER = 3


def _number_value(doc: _Text, spans: list, stems: list[str], sub: dict) -> Decimal | None:
    """The number rule of the package docstring; None when no mention decides it."""
    mentions = _mentions(doc, stems)
    best: tuple[int, int, Decimal] | None = None
    for start, end, values in spans:
        first, last = doc.word_at(start), doc.word_at(max(start, end - 1))
        if first >= len(doc.words):
            continue
        fitting = [v for v in values if _accepts(sub, v)]
        if not fitting:
            continue
        for k in mentions:
            if doc.words[k][3] != doc.words[first][3] or first <= k <= last:
                continue
            dist = first - k if k < first else k - last
            if dist > _WINDOW_NUMBER:
                continue
            rank = (dist, 0 if last < k else 1)
            if best is None or rank < best[:2]:
                best = (*rank, fitting[0])
    return None if best is None else best[2]


def _repeated_numbers(
    root: Any, sub: dict, node: dict, doc: _Text, spans: list
) -> dict[str, Decimal]:
    """The repeat rule of the package docstring: ``{field: new value}`` for the
    non-nullable number fields of one object that repeat an earlier sibling's value the
    text writes once, each taking the numeral the text writes next after it.
    """
    found: dict[str, Decimal] = {}
    held: list[tuple[str, Decimal]] = []  # number siblings so far, schema order
    for name, prop in (sub.get("properties") or {}).items():
        kind, branch = _kind(root, prop)
        current = node.get(name)
        if kind != "number" or not _scalar(current) or isinstance(current, str):
            continue
        value = Decimal(str(current))
        earlier = any(v == value for _, v in held)
        held.append((name, value))
        if not earlier or _nullable(root, prop):
            continue
        places = [k for k, (_, _, values) in enumerate(spans) if value in values]
        if len(places) != 1 or places[0] + 1 >= len(spans):
            continue  # written twice (both may be right) or never: the model decides
        start, end, _ = spans[places[0]]
        n_start, n_end, n_values = spans[places[0] + 1]
        last, first = doc.word_at(max(start, end - 1)), doc.word_at(n_start)
        if first >= len(doc.words) or doc.words[first][3] != doc.words[last][3]:
            continue  # the next numeral is in another clause
        if first - last - 1 > _GAP_REPEAT:
            continue
        taken = {v for _, v in held} | set(_node_numbers(node))
        fitting = [v for v in n_values if _accepts(branch, v) and v not in taken]
        if fitting:
            found[name] = fitting[0]
            held[-1] = (name, fitting[0])
    return found


def _grouped_reading(root: Any, prop: Any, value: Any, spans: list) -> Decimal | None:
    """The separator rule of the package docstring: the thousands reading of the numeral
    whose decimal reading with trailing zeros ``value`` equals, or None (no change).
    """
    kind, branch = _kind(root, prop)
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
    return grouped if _accepts(branch, grouped) else None


def _amount_value(root: Any, prop: Any, name: str, value: Any, amounts: list) -> Decimal | None:
    """The amount rule of the package docstring: the one currency-marked numeral a money
    field may hold, when the model's value is none of them; else None (no change).
    """
    kind, branch = _kind(root, prop)
    if kind != "number" or isinstance(value, (str, bool)) or not is_amount_field(name_stems(name)):
        return None
    if value is None and not _nullable(root, prop):
        return None
    number = None if value is None else Decimal(str(value))
    if number is not None and any(number in values for _, _, values in amounts):
        return None
    fitting = [[v for v in values if _accepts(branch, v)] for _, _, values in amounts]
    distinct = {f[0] for f in fitting if f}
    return distinct.pop() if len(distinct) == 1 else None


def _denied(doc: _Text, stems: list[str], root: Any, prop: Any) -> bool:
    """The denied-number rule of the package docstring: a nullable field whose name's
    words the text mentions, every mention in a clause with a negation.
    """
    if not _nullable(root, prop):
        return False
    mentions = [k for k, (w, *_) in enumerate(doc.words) if any(_matches(w, s) for s in stems)]
    return bool(mentions) and all(doc.negated(k) for k in mentions)
