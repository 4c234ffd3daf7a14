"""The string rules of ``structgen.extraction.evidence``.

A value the text writes only inside longer chunks starts where the chunk starts
(``_span_start``); a patterned field repeating a sibling's value takes the next word
(``_repeated_strings``); an identifier field takes the one identifier after its label
(``_identifier_value``) and a phone field the one phone number (``_phone_value``), both
read by ``structgen.extraction.labels``.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from structgen.extraction.evidence.fields import _schema_accepts
from structgen.extraction.evidence.text import _GAP_REPEAT, _JOINED, _Text, stem
from structgen.extraction.labels import (
    identifier_candidates,
    identifier_field,
    phone_field,
    phone_runs,
)
from structgen.extraction.refs import resolve as _resolve


def _repeated_strings(root: Any, sub: dict, node: dict, doc: _Text) -> dict[str, str]:
    """The string repeat rule of the package docstring: ``{field: new value}`` for the
    string fields with a ``pattern`` of one object that repeat an earlier sibling's
    value the text writes once (as one word), each taking the first word the text writes
    after it, in the same clause with at most ``_GAP_REPEAT`` words between, that the
    field's schema accepts and no sibling holds.
    """
    found: dict[str, str] = {}
    held: list[str] = []  # string siblings so far, schema order
    for name, prop in (sub.get("properties") or {}).items():
        branch = _resolve(root, prop)
        current = node.get(name)
        if not isinstance(current, str) or not isinstance(branch, dict):
            continue
        earlier = current in held
        held.append(current)
        if not earlier or "pattern" not in branch or "enum" in branch or "const" in branch:
            continue
        places = [k for k, (_, a, b, _) in enumerate(doc.words) if doc.text[a:b] == current]
        if len(places) != 1:
            continue  # written twice (both may be right) or not as one word
        k = places[0]
        clause = doc.words[k][3]
        for j in range(k + 1, min(len(doc.words), k + 2 + _GAP_REPEAT)):
            if doc.words[j][3] != clause:
                break
            word = doc.text[doc.words[j][1] : doc.words[j][2]]
            if word in held or word in node.values():
                continue
            try:
                cls = jsonschema.validators.validator_for(root)
                ok = cls(branch, format_checker=cls.FORMAT_CHECKER).is_valid(word)
            except Exception:  # a subschema that does not stand alone (a $ref inside)
                break
            if ok:
                found[name] = word
                held[-1] = word
                break
    return found


def _span_start(root: Any, prop: Any, value: Any, text: str) -> str | None:
    """The span-start rule of the package docstring: the value extended to the start of
    the chunk the text writes it in, or None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not value.strip() or not isinstance(sub, dict):
        return None
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    if types - {"null"} != {"string"} or "enum" in sub or "const" in sub:
        return None
    found: set[str] = set()
    at = text.find(value)
    while at >= 0:
        start = at
        while start > 0 and _JOINED.fullmatch(text[start - 1]):
            start -= 1
        while start < at and not text[start].isalnum():
            start += 1  # leading punctuation of the chunk ("(", "-") is not copied
        if start == at:
            return None  # this occurrence starts a chunk: the value may be right
        found.add(text[start:at] + value)
        at = text.find(value, at + 1)
    if len(found) != 1:
        return None
    (new,) = found
    return new if _schema_accepts(root, sub, new) else None


def _identifier_value(root: Any, prop: Any, name: str, value: Any, text: str) -> str | None:
    """The identifier rule of the package docstring: the one identifier the text writes
    after the field's label, when the model's value differs; else None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not identifier_field(name):
        return None
    if "enum" in sub or "const" in sub or "format" in sub:
        return None
    found = identifier_candidates(text, name, stem)
    if len(found) != 1 or found[0] == value:
        return None
    return found[0] if _schema_accepts(root, sub, found[0]) else None


def _phone_value(root: Any, prop: Any, name: str, value: Any, text: str) -> str | None:
    """The phone rule of the package docstring: the one phone number the text writes,
    when the model's value is none of them; else None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not phone_field(name):
        return None
    if any(k in sub for k in ("enum", "const", "format")):
        return None
    found = phone_runs(text)
    if len(found) != 1 or value in found:
        return None
    return found[0] if _schema_accepts(root, sub, found[0]) else None
