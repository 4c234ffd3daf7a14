"""The date rules of ``structgen.extraction.evidence``.

Two ``format: date`` fields on one date take the text's dates in order
(``_dates_in_order``); a nullable plain string field holding a sibling's date or time, its
name nowhere in the text, is null (``_a_siblings_date``). Dates and times are read by
``structgen.fsm.dates``.
"""

from __future__ import annotations

from typing import Any

from structgen.extraction.evidence.fields import is_nullable
from structgen.extraction.evidence.text import TextWords, _mentions, name_stems
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import dates, times


def _is_date_field(root: Any, prop: Any) -> bool:
    sub = _resolve(root, prop)
    if not isinstance(sub, dict) or sub.get("format") != "date" or "enum" in sub:
        return False
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    return types - {"null"} == {"string"}


def _dates_in_order(root: Any, sub: dict, node: dict, text: str) -> dict[str, str]:
    """The date-order rule of the package docstring: ``{field: new date}`` when two date
    fields of one object hold the same date and the text writes exactly as many dates
    (every reading, ``fsm.dates``) as the object has date fields, taken in text order.
    """
    names = [k for k, p in (sub.get("properties") or {}).items() if _is_date_field(root, p)]
    held = [node.get(k) for k in names]
    if len(names) < 2 or not any(isinstance(v, str) and held.count(v) > 1 for v in held):
        return {}
    written = dates(text)
    if len(written) != len(names):
        return {}
    return {k: d for k, d, v in zip(names, written, held) if d != v}


def _a_siblings_date(root: Any, prop: Any, name: str, node: dict, doc: TextWords) -> bool:
    """The date-null rule of the package docstring: whether a nullable plain string field
    holds a date or time (as ``fsm.dates`` reads it) that a sibling field holds.
    """
    value, sub = node.get(name), _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not is_nullable(root, prop):
        return False
    if any(k in sub for k in ("format", "pattern", "enum", "const")):
        return False
    if _mentions(doc, name_stems(name)):
        return False  # the text names the field: the model decides
    read = set(dates(value)) | set(times(value))
    return any(k != name and isinstance(v, str) and v in read for k, v in node.items())
