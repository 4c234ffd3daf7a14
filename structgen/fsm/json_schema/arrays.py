"""Lowering of ``type: array``: ``prefixItems`` / draft-04 tuple ``items`` (+ ``additionalItems``),
``items`` (schema or ``false``), ``minItems``/``maxItems``, ``contains`` with ``minContains``.

``contains`` is enforced when the array has no tuple prefix and no ``maxContains`` below
the item count: at least ``minContains`` elements are written from the intersection of
``items`` and ``contains`` (an ``allOf`` merge), the others from ``items``. ``maxContains``
needs the complement of ``contains`` and ``uniqueItems: true`` is not regular: both
raise the strict error (``uniqueItems`` is fine when at most one item is possible).
"""

from __future__ import annotations

from typing import Any

from .combine import merge_all_of
from .context import ConvertContext
from .objects import _sharer

__all__ = ["array_regex"]


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
        conv.unsupported("uniqueItems", pointer, "uniqueItems cannot be expressed by an automaton")
    prefix = schema.get("prefixItems", [])
    rest: Any = schema.get("items", True)
    rest_key = "items"
    if isinstance(rest, list):  # draft-04 tuple form
        prefix, rest, rest_key = rest, schema.get("additionalItems", True), "additionalItems"
    prefix_key = "prefixItems" if "prefixItems" in schema else "items"
    ws = conv.ws
    sep = ws + "," + ws
    if "contains" in schema and int(schema.get("minContains", 1)) > 0:
        return _contains(conv, schema, pointer, refs, prefix, rest, lo, hi)
    if "maxContains" in schema and "contains" in schema:
        conv.unsupported("maxContains", pointer, "maxContains needs the complement of contains")
    elems = [conv.convert(s, f"{pointer}/{prefix_key}/{i}", refs) for i, s in enumerate(prefix)]
    item = conv.convert(rest, f"{pointer}/{rest_key}", refs)
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
    return open_ + (body if lo > 0 else "(?:%s)?" % body) + close


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
    need = int(schema.get("minContains", 1))
    if prefix:
        conv.unsupported("contains", pointer, "contains next to prefixItems")
    if "maxContains" in schema:
        conv.unsupported("maxContains", pointer, "maxContains needs the complement of contains")
    if hi is not None or lo > need:
        conv.unsupported("contains", pointer, "contains together with minItems/maxItems")
    both = merge_all_of([rest, schema["contains"]], pointer, conv.resolve)
    hit = conv.convert(both, pointer + "/contains", refs)
    item = conv.convert(rest, pointer + "/items", refs)
    if hit is None:
        return None
    ws = conv.ws
    sep = ws + "," + ws
    free = "" if item is None else "(?:%s%s)*" % (item, sep)
    tail = "" if item is None else "(?:%s%s)*" % (sep, item)
    again = "(?:%s%s%s){%d}" % (sep, free, hit, need - 1) if need > 1 else ""
    return "\\[" + ws + free + hit + again + tail + ws + "\\]"
