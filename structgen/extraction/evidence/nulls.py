"""The null rules of ``structgen.extraction.evidence``: fields set to null after the others.

A nullable field whose value equals a sibling's, its name nowhere in the text, copied
that sibling (null); a nullable number the text writes only inside a chunk a sibling
string field holds is part of that identifier (identifier null, ``_inside_sibling``); a
nullable plain string holding a sibling's date or time (date null,
``structgen.extraction.evidence.dates``). ``copied_nulls`` gathers them for one object;
``denied_items`` reads the denied array rule (an array whose name the text negates as a
word is empty); ``denied_string`` is the denied string rule, which treats a field the schema lets an
object leave out (not ``required``) as nullable: the field is then left out
(``clearable``, ``clear_field``). The null rule does not (a schema without ``required`` would
lose every field equal to a sibling's).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.dates import a_siblings_date
from structgen.extraction.evidence.fields import field_kind, is_nullable, is_scalar
from structgen.extraction.evidence.numbers import all_negated
from structgen.extraction.evidence.text import (
    JOINED,
    TextWords,
    name_mentions,
    name_stems,
    stems_match,
)
from structgen.extraction.refs import resolve as _resolve


def _inside_sibling(root: Any, prop: Any, name: str, node: dict, text: str, spans: list) -> bool:
    """The identifier null rule of the package docstring: whether a nullable number field
    holds a numeral the text writes only inside a chunk that a sibling string field holds
    ("88-17" as ``ticket_id``: 17 is not the ``order_number``).
    """
    value = node.get(name)
    kind, _ = field_kind(root, prop)
    if kind != "number" or not is_scalar(value) or isinstance(value, str):
        return False
    if not is_nullable(root, prop):
        return False
    held = {v for k, v in node.items() if k != name and isinstance(v, str) and v}
    places = [(a, b) for a, b, values in spans if Decimal(str(value)) in values]
    if not places:
        return False
    for a, b in places:
        start, end = a, b
        while start > 0 and JOINED.fullmatch(text[start - 1]):
            start -= 1
        while end < len(text) and JOINED.fullmatch(text[end]):
            end += 1
        chunk = text[start:end].strip("-.#@+&")
        if chunk == text[a:b] or not any(chunk in h for h in held):
            return False
    return True


def copied_nulls(
    schema: Any, sub: dict, node: dict, doc: TextWords, text: str, spans: list
) -> list[str]:
    """The null, identifier null and date null rules of the package docstring: the
    fields of one object (schema order) to set to null, after the rules above.
    """
    copied = [
        name
        for name, prop in (sub.get("properties") or {}).items()
        if is_scalar(node.get(name))
        and is_nullable(schema, prop)
        and not name_mentions(doc, name_stems(name))
        and any(k != name and is_scalar(v) and v == node[name] for k, v in node.items())
    ]
    copied += [
        name
        for name, prop in (sub.get("properties") or {}).items()
        if name not in copied
        and (
            _inside_sibling(schema, prop, name, node, text, spans)
            or a_siblings_date(schema, prop, name, node, doc)
        )
    ]
    return copied


def clearable(root: Any, sub: dict, name: str, prop: Any) -> bool:
    """Whether an object's field may be null or left out (not in ``sub``'s ``required``)."""
    return is_nullable(root, prop) or name not in (sub.get("required") or ())


def clear_field(root: Any, prop: Any, node: dict, name: str) -> None:
    """Set a nullable field to null, else leave it out (``clearable`` said one holds)."""
    if is_nullable(root, prop):
        node[name] = None
    else:
        node.pop(name, None)


def _shaped(root: Any, prop: Any) -> bool:
    """Whether a string field's subschema (or a branch of it) gives its values a shape
    (``format`` or ``pattern``), which the grammar made the value have.
    """
    sub = _resolve(root, prop)
    if not isinstance(sub, dict):
        return False
    branches = [_resolve(root, b) for key in ("anyOf", "oneOf") for b in sub.get(key) or ()]
    return any(isinstance(b, dict) and ("format" in b or "pattern" in b) for b in [sub, *branches])


def denied_string(root: Any, sub: dict, name: str, prop: Any, value: Any, doc: TextWords) -> bool:
    """The denied string rule of the package docstring: whether a string field that may be
    null or left out (``clearable``) is cleared because the text mentions its name only
    negated ("No email given", "she left no email", "without email", "Email: none") and
    its value has no evidence of being that field: the text does not write it (the model
    invented an address), or writes it but the field gives its values no shape
    (``format``, ``pattern``) that the value then had to have. A copied plain string is
    some other words of the text ("bought one laptop stand" for "she left no email":
    under copy constraints every value is a span of the text, so the model's choice
    between null and a span is no evidence).
    """
    if field_kind(root, prop)[0] is not None or not isinstance(value, str):
        return False
    stems = name_stems(name)
    if not stems or not clearable(root, sub, name, prop) or not all_negated(doc, stems):
        return False
    return value not in doc.text or not _shaped(root, prop)


def denied_items(doc: TextWords, stems: list[str]) -> bool:
    """The denied-array rule of the package docstring: the text mentions the array
    field's name, each mention negated as a word (``TextWords.negates``: a negation just
    before it, "No apologies", or as its predicate, "Apologies: none"), not only somewhere
    in its clause ("Apologies from Marco, who could not attend" denies nothing).
    """
    mentions = [k for k, (w, *_) in enumerate(doc.words) if any(stems_match(w, s) for s in stems)]
    return bool(mentions) and all(doc.negates(k, k) for k in mentions)


# what a text writes where it has no value ("Breed unknown", "Fax: n/a", "Floor: TBC")
PLACEHOLDERS = frozenset(
    {"unknown", "not known", "n/a", "na", "none", "nil", "not stated", "not given",
     "unspecified", "not specified", "not applicable", "tbc", "tbd", "to be confirmed",
     "-", "--", "?"}
)  # fmt: skip


def placeholder(root: Any, prop: Any, value: Any) -> bool:
    """The placeholder rule of the package docstring: whether a string field without an
    ``enum`` or ``const`` holds a word that stands for no value (``PLACEHOLDERS``, case and
    surrounding spaces and full stops ignored: "unknown", "n/a", "TBC"), which the caller
    clears where the schema lets it (``clearable``). Raises: never.
    """
    if not isinstance(value, str):
        return False
    sub = _resolve(root, prop)
    if not isinstance(sub, dict) or "enum" in sub or "const" in sub:
        return False
    return value.strip(" .").lower() in PLACEHOLDERS
