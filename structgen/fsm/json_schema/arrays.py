"""Lowering of ``type: array``: ``prefixItems`` / draft-04 tuple ``items`` (+ ``additionalItems``),
``items`` (schema or ``false``), ``minItems``/``maxItems``, ``contains`` with ``minContains``
and ``maxContains``.

``contains`` is enforced when the array has no tuple prefix and no ``minItems``/``maxItems``
above ``minContains``: ``minContains`` to ``maxContains`` elements are written from the
intersection of ``items`` and ``contains`` (an ``allOf`` merge), the others from ``items``,
or, under ``maxContains``, from ``items`` and the complement of ``contains`` (``not``).
``uniqueItems: true`` is not regular in general (strict error) but is exact where at most
one item is possible or the items come from a small finite domain (``const``/``enum``,
booleans, ``null``, an integer range of at most ``MAX_UNIQUE_VALUES`` values): one state
per set of values written so far, each a shared definition listing the values still free
(``n * 2**n`` text for ``n`` values).
"""

from __future__ import annotations

import math
from typing import Any

from .combine import merge_all_of, value_key
from .context import ConvertContext
from .objects import _sharer
from .values import values_regex

__all__ = ["array_regex", "MAX_UNIQUE_VALUES"]

MAX_UNIQUE_VALUES = 10  # uniqueItems over a finite item domain: up to 10 * 2**10 pieces


def _rep(body: str, lo: int, hi: int | None) -> str:
    if hi is not None and hi <= 0:
        return ""
    if lo == 0 and hi is None:
        return "(?:%s)*" % body
    return "(?:%s){%d,%s}" % (body, lo, "" if hi is None else hi)


def array_regex(conv: ConvertContext, schema: dict, pointer: str, refs: tuple) -> str | None:
    """Regex for the arrays valid under the array keywords of ``schema``."""
    lo = int(schema.get("minItems", 0))
    hi = schema.get("maxItems")
    hi = None if hi is None else int(hi)
    if hi is not None and hi < lo:
        return None
    if schema.get("uniqueItems") is True and (hi is None or hi > 1):
        domain = _finite_domain(conv, schema, pointer)
        if domain is not None:
            return _unique_items(conv, domain, lo, hi)
        conv.unsupported(
            "uniqueItems",
            pointer,
            "uniqueItems cannot be expressed by an automaton (exact only over at most "
            f"{MAX_UNIQUE_VALUES} item values: const/enum, booleans, null, a small integer range)",
        )
    prefix = schema.get("prefixItems", [])
    rest: Any = schema.get("items", True)
    rest_key = "items"
    if isinstance(rest, list):  # draft-04 tuple form
        prefix, rest, rest_key = rest, schema.get("additionalItems", True), "additionalItems"
    prefix_key = "prefixItems" if "prefixItems" in schema else "items"
    ws = conv.ws
    sep = ws + "," + ws
    if "contains" in schema and (int(schema.get("minContains", 1)) > 0 or "maxContains" in schema):
        return _contains(conv, schema, pointer, refs, prefix, rest, lo, hi)
    elems = [
        conv.convert_member(s, f"{pointer}/{prefix_key}/{i}", refs) for i, s in enumerate(prefix)
    ]
    item = conv.convert_member(rest, f"{pointer}/{rest_key}", refs)
    if item is not None:  # written twice below (first item, then each ", item")
        item = _sharer(conv)(item)
    # tail(i): what follows once positions < i are written
    p = len(prefix)
    if item is None or (hi is not None and hi <= p):
        tail = "" if p >= lo else None
    else:
        tail = _rep(sep + item, max(lo - p, 0), None if hi is None else hi - p)
    for i in range(p - 1, 0, -1):
        if hi is not None and i >= hi:
            tail = ""
            continue
        if elems[i] is None or tail is None:
            tail = "" if i >= lo else None
            continue
        step = sep + elems[i] + tail
        tail = step if i < lo else "(?:%s)?" % step
    if p == 0:
        first = item
        after = (
            None
            if item is None
            else _rep(sep + item, max(lo - 1, 0), None if hi is None else hi - 1)
        )
    else:
        first, after = elems[0], tail
    if first is None or after is None or hi == 0:
        body = None
    else:
        body = first + after
    open_, close = "\\[" + ws, ws + "\\]"
    if body is None:
        return open_ + "\\]" if lo == 0 else None
    # empty: one whitespace run between the brackets, not two
    return open_ + body + close if lo > 0 else open_ + "(?:" + body + ws + ")?\\]"


def _contains(
    conv: ConvertContext,
    schema: dict,
    pointer: str,
    refs: tuple,
    prefix: list,
    rest: Any,
    lo: int,
    hi: int | None,
) -> str | None:
    """The arrays with ``minContains`` to ``maxContains`` elements valid under ``contains``
    (items and contains merged: a hit) and the rest valid under ``items`` (without
    ``maxContains``) or under ``items`` and not ``contains`` (a miss: its complement,
    ``boolean_ops``).
    """
    need = int(schema.get("minContains", 1))
    most = schema.get("maxContains")
    most = None if most is None else int(most)
    if prefix:
        conv.unsupported("contains", pointer, "contains next to prefixItems")
    if hi is not None or lo > need:
        conv.unsupported("contains", pointer, "contains together with minItems/maxItems")
    if most is not None and most < need:
        return None
    both = merge_all_of([rest, schema["contains"]], pointer, conv.resolve)
    hit = None if most == 0 else conv.convert_member(both, pointer + "/contains", refs)
    if most is None:
        item = conv.convert_member(rest, pointer + "/items", refs)
    else:  # the other elements must not be hits
        miss = merge_all_of([rest, {"not": schema["contains"]}], pointer, conv.resolve)
        item = conv.convert_member(miss, pointer + "/contains", refs)
    ws = conv.ws
    sep = ws + "," + ws
    open_, close = "\\[" + ws, ws + "\\]"
    shapes = []
    if need == 0:  # no hit at all: misses only, or nothing
        body = "" if item is None else "(?:%s(?:%s%s)*%s)?" % (item, sep, item, ws)
        shapes.append(open_ + body + "\\]")
    if hit is not None:
        free = "" if item is None else "(?:%s%s)*" % (item, sep)
        tail = "" if item is None else "(?:%s%s)*" % (sep, item)
        first = max(need, 1) - 1  # hits after the first one: at least, then at most
        upto = first if most is None else most - 1
        between = "(?:%s%s%s)" % (sep, free, hit)
        again = "" if upto == 0 else "%s{%d,%d}" % (between, first, upto)
        shapes.append(open_ + free + hit + again + tail + close)
    if not shapes:
        return None
    return shapes[0] if len(shapes) == 1 else "(?:" + "|".join(shapes) + ")"


def _finite_domain(conv: ConvertContext, schema: dict, pointer: str) -> list[str] | None:
    """The regexes of the item values (one per distinct value, in order) when every item
    comes from ``items`` alone and that schema admits at most ``MAX_UNIQUE_VALUES``
    values, else None.
    """
    if "prefixItems" in schema or "contains" in schema or isinstance(schema.get("items"), list):
        return None
    items = schema.get("items", True)
    if isinstance(items, dict) and ("$ref" in items or "allOf" in items):
        items = merge_all_of([items], pointer + "/items", conv.resolve, (), conv.keywords_of)
    if not isinstance(items, dict):
        return None
    types = items.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    if "const" in items or "enum" in items:
        candidates = [items["const"]] if "const" in items else list(items["enum"])
    elif types and types <= {"boolean", "null"}:
        candidates = [True, False, None]
    elif types == {"integer"} and all(
        isinstance(items.get(k), (int, float)) and not isinstance(items.get(k), bool)
        for k in ("minimum", "maximum")
    ):
        first, last = math.floor(items["minimum"]), math.ceil(items["maximum"])
        if last - first + 1 > MAX_UNIQUE_VALUES:
            return None
        candidates = list(range(first, last + 1))
    else:
        return None
    values: dict[str, Any] = {}
    for v in candidates:  # distinct by JSON equality (1 == 1.0), valid under items
        if value_key(v) not in values and conv.is_valid(v, items):
            values[value_key(v)] = v
    if len(values) > MAX_UNIQUE_VALUES:
        return None
    integer_only = "integer" in types and "number" not in types
    out = []
    for v in values.values():
        texts = values_regex([v], conv.ws, integer_only, _sharer(conv))
        if texts:
            out.append(texts[0])
    return out


def _unique_items(conv: ConvertContext, values: list[str], lo: int, hi: int | None) -> str | None:
    """Arrays of ``lo..hi`` distinct items of ``values`` (regexes of distinct values), in any
    order: ``after[S]`` is what may follow once the values of the set ``S`` are written.
    """
    n = len(values)
    hi = n if hi is None else min(hi, n)
    if lo > hi:
        return None
    ws = conv.ws
    sep = ws + "," + ws
    share = _sharer(conv)
    after: dict[int, str | None] = {}
    for mask in sorted(range(1, 1 << n), key=lambda m: -m.bit_count()):
        used = mask.bit_count()
        if used > hi:
            continue
        alts = [
            sep + values[i] + after[mask | 1 << i]
            for i in range(n)
            if not mask >> i & 1 and used < hi and after[mask | 1 << i] is not None
        ]
        if used >= lo:
            alts.append("")
        after[mask] = None if not alts else share("(?:" + "|".join(alts) + ")")
    firsts = [values[i] + after[1 << i] for i in range(n) if hi > 0 and after[1 << i] is not None]
    open_, close = "\\[" + ws, ws + "\\]"
    if not firsts:
        return open_ + "\\]" if lo == 0 else None
    body = "(?:" + "|".join(firsts) + ")"
    if lo > 0:
        return open_ + body + close
    # empty: one whitespace run between the brackets, not two
    return open_ + ("(?:" + body + ws + ")?" if ws else body + "?") + "\\]"
