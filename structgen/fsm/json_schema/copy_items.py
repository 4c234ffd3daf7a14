r"""Copied arrays of objects: items in the order the text writes them.

Under a copy constraint an array of objects lets every item copy any span of the text, so
a small model loops (the same item again and again until ``maxItems``) or pairs spans
from anywhere (benchmarks/RESULTS.md, "Arrays of objects"). A list in a text writes its
records in order, one after the other; ``ordered_items`` constrains an array of objects
to that order by its items' first property (the *lead* field, the first key written):

* the lead of each item is a span of the text (as ``structgen.fsm.copy`` writes spans:
  unit boundaries, no leading or trailing whitespace) that starts with a letter or digit;
* the lead of each item after the first starts after the end of the previous item's lead
  (in units of the text), so an item is never written twice from one mention and the
  number of items is bounded by the text's distinct mentions.

It is an ``INTERSECT`` of the array's own regex (every keyword, the copy constraints of
each field, ``minItems``/``maxItems``) with the *order language*, a regular language over
positions of the one source text:

    ``ARRAY = "[" ( "]" | "{" KEY ":\"" GE_0 )``
    ``GE_i  = Q_i | GE_{i+1}``  (``Q_i`` only where unit ``i`` starts with a letter or digit)
    ``Q_j   = unit_j ( "\"" REST AFTER_j | Q_{j+1} )``  (the first branch only where
    unit ``j`` is not whitespace)
    ``AFTER_j = "]" | ",{" KEY ":\"" GE_{j+1}``

where ``REST`` is the rest of a flat object after its first value (JSON strings, and any
character but quotes and braces between them, then ``}``). Every definition refers only to
later positions, so they are written from the last unit back (``regex.definitions`` lets a
definition refer to earlier ones only): ``3 * num_units`` definitions. Which arrays qualify:
compact whitespace, one source text, items of ``type: object`` whose first listed property
is required, a plain copied ``string`` (no ``format``, ``pattern``, ``enum``; ``maxLength``
is kept by the array's own regex) and whose every property is a scalar (so ``REST`` finds
the item's end). Otherwise the array is converted as before.
"""

from __future__ import annotations

import json
from typing import Any

from ..copy import intersect, json_string_content, text_units
from ..regex.definitions import PLACEHOLDER_BASE
from ..regex.escape import escape_literal
from .pattern import JSON_CHAR

__all__ = ["lead_property", "ordered_items", "order_definitions", "has_ordered_leads"]

_SCALARS = frozenset({"string", "number", "integer", "boolean", "null"})
_LEAD_KEYWORDS = frozenset({"type", "maxLength", "minLength", "description", "title"})
# the rest of a flat object after its first value: strings, other characters, then "}"
REST = r'(?:[^"{}]|"' + JSON_CHAR + r'*")*\}'


def _is_scalar(schema: Any) -> bool:
    """Whether every value ``schema`` allows is a JSON scalar (no object, no array)."""
    if not isinstance(schema, dict):
        return False
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", []) + ([schema["const"]] if "const" in schema else [])
        return all(not isinstance(v, (dict, list)) for v in values)
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or ())
    return bool(types) and set(types) <= _SCALARS and not {"anyOf", "oneOf", "$ref"} & set(schema)


def lead_property(items: Any) -> str | None:
    """The lead field of an array's item schema, or None when the array does not qualify
    (module docstring: required, a plain string, every property a scalar).

    Args:
        items: the array's ``items`` subschema.

    Returns:
        The name of the item's first listed property.
    """
    if not isinstance(items, dict) or items.get("type") != "object":
        return None
    props = items.get("properties")
    if not isinstance(props, dict) or not props:
        return None
    if set(items) - {"type", "properties", "required", "additionalProperties", "description",
                     "title"}:  # fmt: skip
        return None
    lead, schema = next(iter(props.items()))
    if lead not in (items.get("required") or ()) or not isinstance(schema, dict):
        return None
    if schema.get("type") != "string" or set(schema) - _LEAD_KEYWORDS:
        return None
    if schema.get("x-structgen-copy") is False:
        return None
    if not all(_is_scalar(s) for s in props.values()):
        return None
    return lead


def order_definitions(text: str, lead: str, defs: list[str]) -> str | None:
    """Append the order language's definitions (module docstring) to ``defs`` (mutated).

    Args:
        text: the source text.
        lead: the lead field's name.
        defs: the definitions list the pattern will be lowered with.

    Returns:
        The pattern of the ordered arrays (from ``[`` to ``]``), or None when the text has
        no unit that starts with a letter or digit.
    """
    units = text_units(text)
    if not any(u[0].isalnum() for u in units):
        return None
    opener = escape_literal("{" + json.dumps(lead, ensure_ascii=False) + ':"')

    def add(body: str) -> str:
        defs.append(body)
        return chr(PLACEHOLDER_BASE + len(defs) - 1)

    ge_next: str | None = None  # GE_{j+1}
    q_next: str | None = None  # Q_{j+1}
    for j in range(len(units) - 1, -1, -1):
        unit = units[j]
        after = r"\]" if ge_next is None else r"(?:\]|," + opener + ge_next + ")"
        alts = []
        if not unit.isspace():
            alts.append('"' + REST + after)
        if q_next is not None:
            alts.append(q_next)
        q = add(escape_literal(json_string_content(unit)) + "(?:" + "|".join(alts) + ")")
        if unit[0].isalnum():
            ge_next = add(q if ge_next is None else "(?:" + q + "|" + ge_next + ")")
        q_next = q
    assert ge_next is not None  # some unit starts with a letter or digit
    return r"\[(?:\]|" + opener + ge_next + ")"


def ordered_items(
    conv: Any, array_text: str, text: str, items: Any, min_items: int = 0
) -> str | None:
    """The array's regex intersected with the order language, or None when the array does
    not qualify or the intersection is empty (the caller keeps ``array_text``).

    Args:
        conv: the running ``JsonSchemaConverter`` (its ``ws`` and shared definitions).
        array_text: the array's own regex (its keywords and copy constraints).
        text: the one source text.
        items: the array's ``items`` subschema.
        min_items: the array's ``minItems``.

    Returns:
        The placeholder of the intersection, or None.
    """
    lead = lead_property(items)
    if lead is None or conv.ws != "":
        return None
    defs = conv.sharing.definitions
    mark = len(defs)
    order = order_definitions(text, lead, defs)
    if order is None:
        return None
    lead_schema = items["properties"][lead]
    bounds = int(lead_schema.get("minLength", 0)), lead_schema.get("maxLength")
    if not has_ordered_leads(text_units(text), *bounds, int(min_items)):
        del defs[mark:]
        return None
    return intersect(defs, [array_text, order])


def has_ordered_leads(units: list[str], lo: int, hi: int | None, count: int) -> bool:
    """Whether ``count`` leads fit the order language: spans of ``lo`` to ``hi`` code points
    (None: no bound), each starting with a letter or digit after the end of the one before.

    The array's own regex holds every other constraint of its items, so this decides
    whether the intersection is empty without a search over the automaton: taking, from
    left to right, the span that ends first (interval scheduling) fits the most leads.

    Args:
        units: the text's units (``copy.text_units``).
        lo: the lead's ``minLength``.
        hi: the lead's ``maxLength``, or None.
        count: the array's ``minItems``.
    """
    if count <= 0:
        return True
    ends = []  # the first end of a valid span starting at each unit
    for i, first in enumerate(units):
        if not first[0].isalnum():
            continue
        size = 0
        for j in range(i, len(units)):
            size += len(units[j])
            if hi is not None and size > hi:
                break
            if size >= lo and not units[j].isspace():
                ends.append((j, i))
                break
    fitted, last_end = 0, -1
    for end, start in sorted(ends):
        if start > last_end:
            fitted, last_end = fitted + 1, end
    return fitted >= count
