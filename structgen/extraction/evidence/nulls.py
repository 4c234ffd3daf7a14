"""The null rules of ``structgen.extraction.evidence``: fields set to null after the others.

A nullable field whose value equals a sibling's, its name nowhere in the text, copied
that sibling (null); a nullable number the text writes only inside a chunk a sibling
string field holds is part of that identifier (identifier null, ``_inside_sibling``); a
nullable plain string holding a sibling's date or time (date null,
``structgen.extraction.evidence.dates``). ``_copied_nulls`` gathers them for one object.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.dates import _a_siblings_date
from structgen.extraction.evidence.fields import _kind, _nullable, _scalar
from structgen.extraction.evidence.text import _JOINED, _mentions, _Text, name_stems


def _inside_sibling(root: Any, prop: Any, name: str, node: dict, text: str, spans: list) -> bool:
    """The identifier null rule of the package docstring: whether a nullable number field
    holds a numeral the text writes only inside a chunk that a sibling string field holds
    ("88-17" as ``ticket_id``: 17 is not the ``order_number``).
    """
    value = node.get(name)
    kind, _ = _kind(root, prop)
    if kind != "number" or not _scalar(value) or isinstance(value, str):
        return False
    if not _nullable(root, prop):
        return False
    held = {v for k, v in node.items() if k != name and isinstance(v, str) and v}
    places = [(a, b) for a, b, values in spans if Decimal(str(value)) in values]
    if not places:
        return False
    for a, b in places:
        start, end = a, b
        while start > 0 and _JOINED.fullmatch(text[start - 1]):
            start -= 1
        while end < len(text) and _JOINED.fullmatch(text[end]):
            end += 1
        chunk = text[start:end].strip("-.#@+&")
        if chunk == text[a:b] or not any(chunk in h for h in held):
            return False
    return True


def _copied_nulls(
    schema: Any, sub: dict, node: dict, doc: _Text, text: str, spans: list
) -> list[str]:
    """The null, identifier null and date null rules of the package docstring: the
    fields of one object (schema order) to set to null, after the rules above.
    """
    copied = [
        name
        for name, prop in (sub.get("properties") or {}).items()
        if _scalar(node.get(name))
        and _nullable(schema, prop)
        and not _mentions(doc, name_stems(name))
        and any(k != name and _scalar(v) and v == node[name] for k, v in node.items())
    ]
    copied += [
        name
        for name, prop in (sub.get("properties") or {}).items()
        if name not in copied
        and (
            _inside_sibling(schema, prop, name, node, text, spans)
            or _a_siblings_date(schema, prop, name, node, doc)
        )
    ]
    return copied
