"""The date rules of ``structgen.extraction.evidence``.

Two ``format: date`` fields on one date take the text's dates in order
(``dates_in_order``, and ``nested_dates_in_order`` for the date fields of an object and
the objects nested in it: ``pickup.date`` and ``return_date``); a nullable plain string
field holding a sibling's date or time, its name nowhere in the text, is null
(``a_siblings_date``). Dates and times are read by
``structgen.fsm.dates``.
"""

from __future__ import annotations

from typing import Any

from structgen.extraction.evidence.fields import is_nullable
from structgen.extraction.evidence.text import TextWords, name_mentions, name_stems
from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import dates, times


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
    if len(written) != len(names):
        return {}
    return {k: d for k, d, v in zip(names, written, held) if d != v}


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
