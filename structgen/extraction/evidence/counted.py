"""An array of counted items read from the text's item phrases (``counted_items``).

A list of goods writes each item as one local phrase: its count, what is counted, and
its price after it ("12 x SKU-4471 tea bowl @ USD 18.40", "four LED panels at ¥12,800
each", "two Zenith phone cases and one Zenith screen protector"). A small model fills
such an item's fields from different places of the text (the description from an
invoice number, the count's numeral repeated as the price, one item for three). The rule
reads the phrases instead, for an array whose item object has exactly:

* a *count* field: an integer field whose name holds ``quantity``, ``qty`` or ``count``;
* a *description* field: the one free string field (no enum, format or pattern);
* at most one *price* field: a number field whose name holds ``price``, ``value``,
  ``cost`` or ``amount``.

An item phrase is a whole-number numeral (digits or English words, ``numeral_spans``)
that starts a word and is not part of a code (no ``#``, ``-``, ``/``, letter or digit
right before it), then an optional ``x`` / ``×``, then one to six words up to a
punctuation mark or a stop word (``at``, ``@``, ``for``, ``each``, ``and``, ``because``,
...) with at least one letter word; its price is the first currency-marked numeral
(``labels.amount_spans``) after it, before the next phrase and with no ``;`` or
sentence end between. With a price field only phrases with a price are items (the
field's reading is the numeral's first reading it accepts); without one, the phrases
are items when there are two or more of them joined by a list joiner, or one whose
count is some model item's count.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.fields import accepts_number, field_kind, free_string_schema
from structgen.extraction.labels import amount_spans
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.numerals import numeral_spans

__all__ = ["counted_fields", "item_phrases", "counted_items"]

_COUNT_WORDS = ("quantity", "qty", "count")
_PRICE_WORDS = ("price", "value", "cost", "amount")
_STOP = frozenset(
    "at for each and because from with to in on per value priced costing or by as "
    "which that who were was is are".split()
)
_MAX_WORDS = 6
_TIMES = re.compile(r"\s*[x×]\s+|\s*×\s*", re.IGNORECASE)
_TOKEN = re.compile(r"\s*([^\s,;:.()@!?]+(?:\.[^\s,;:.()@!?]+)*)")
_JOINER = re.compile(r"\s*(?:,|;|&|and|,\s*and)\s*$", re.IGNORECASE)


def _name_words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]


def counted_fields(root: Any, items: Any) -> tuple[str, str, str | None] | None:
    """``(count, description, price or None)`` field names of an array's item schema
    (module docstring), or None where the item object is not of that shape.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    count = desc = price = None
    for name, prop in items["properties"].items():
        words = [w.lower() for w in _name_words(name)]
        kind, branch = field_kind(root, prop)
        if kind == "number" and any(w in _COUNT_WORDS for w in words):
            types = branch.get("type")
            types = {types} if isinstance(types, str) else set(types or ())
            if "integer" not in types or count is not None:
                return None
            count = name
        elif kind == "number" and any(w in _PRICE_WORDS for w in words):
            if price is not None:
                return None
            price = name
        elif free_string_schema(root, prop) is not None:
            if desc is not None:
                return None
            desc = name
        else:
            return None
    if count is None or desc is None:
        return None
    return count, desc, price


def item_phrases(text: str) -> list[tuple[int, int, Decimal, str, tuple[Decimal, ...] | None]]:
    """The item phrases of ``text`` (module docstring), in text order.

    Returns:
        ``(start, end, count, description, price readings or None)`` per phrase:
        ``start`` / ``end`` the character offsets of the count and of the description's
        end; the count a positive whole number.
    """
    spans = numeral_spans(text)
    amounts = amount_spans(text)
    found: list[list[Any]] = []
    for start, end, values in spans:
        count = values[0]
        if count <= 0 or count != count.to_integral_value():
            continue
        if start > 0 and not (text[start - 1].isspace() or text[start - 1] in "(:"):
            continue
        if any(a <= start < b for a, b, _ in amounts):
            continue  # a price, not a count
        at = end
        times = _TIMES.match(text, at)
        if times is not None:
            at = times.end()
        elif end < len(text) and not text[end].isspace():
            continue  # "12kg", "3/4"
        words: list[str] = []
        desc_end = at
        while len(words) <= _MAX_WORDS:
            token = _TOKEN.match(text, desc_end)
            if token is None or token.group(1).lower() in _STOP:
                break
            if words and token.group(1)[0].isdigit() and not re.search(r"[^\W\d_]", token.group(1)):
                break  # the next numeral
            words.append(token.group(1))
            desc_end = token.end()
        if not words or len(words) > _MAX_WORDS:
            continue
        if not any(re.fullmatch(r"[^\W\d_][\w'’-]*", w) for w in words):
            continue
        desc = text[at:desc_end].strip()
        found.append([start, desc_end, count, desc, None])
    for i, phrase in enumerate(found):
        limit = found[i + 1][0] if i + 1 < len(found) else len(text)
        for a, _b, readings in amounts:
            if a < phrase[1] or a >= limit:
                continue
            between = text[phrase[1] : a]
            if ";" in between or re.search(r"[.!?](\s|$)", between):
                break
            phrase[4] = readings
            break
    return [tuple(p) for p in found]  # type: ignore[misc]


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def counted_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of counted goods as the text's item phrases write them
    (module docstring), or None where the array's items are not of that shape, the text
    has no item phrase that qualifies, or a price fits none of its readings.

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted (model order).

    Returns:
        A new list of item dicts (count, description and, where the shape has one, price),
        or None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    items = _resolve(root, array.get("items"))
    fields = counted_fields(root, items)
    if fields is None:
        return None
    count, desc, price = fields
    phrases = item_phrases(text)
    if price is not None:
        phrases = [p for p in phrases if p[4] is not None]
    elif len(phrases) >= 2:
        joined = all(
            _JOINER.match(text[a[1] : b[0]]) for a, b in zip(phrases, phrases[1:], strict=False)
        )
        if not joined:
            return None
    elif phrases:
        counts = {
            Decimal(str(i.get(count)))
            for i in current
            if isinstance(i, dict) and isinstance(i.get(count), int)
        }
        if phrases[0][2] not in counts:
            return None
    if not phrases:
        return None
    props = items["properties"]
    _, count_branch = field_kind(root, props[count])
    price_branch = field_kind(root, props[price])[1] if price is not None else None
    out = []
    for _, _, n, description, readings in phrases:
        if not accepts_number(count_branch, n):
            return None
        item: dict[str, Any] = {desc: description, count: int(n)}
        if price is not None:
            fitting = [v for v in readings or () if accepts_number(price_branch, v)]
            if not fitting:
                return None
            item[price] = _number(fitting[0])
        out.append({k: item[k] for k in props if k in item})
    return out
