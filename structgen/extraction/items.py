"""Array items the text does not support, dropped: greedy never closes an array early.

Under the schema's grammar a 135M model writes ``,`` rather than ``]`` after every item
until ``maxItems`` forbids it: the items after the real ones repeat an earlier item or
pair spans and numerals that the text writes apart (``{"name": "daily", "dose_mg": 142}``
from "lisinopril 10 mg daily. BP 142/91"). The model's own scores do not separate the
real end from the invented items (``]`` scores below ``,`` at every item boundary,
benchmarks/RESULTS.md, "Array items"), so ``trim_items`` decides from the text, for
every array reached through object properties (nested arrays excluded):

* **distinct**: the first item equal to an earlier one (JSON equality) marks a loop;
  it and every item after it are dropped;
* **written together**: an item's *anchors* are its string values (case-folded) found
  in the text as whole words, its ISO dates and times where the text writes them in any notation
  ``structgen.fsm.dates`` reads, and its numbers found among the text's numerals
  (``structgen.fsm.numerals.numeral_spans``), each an occurrence as a range of words; an
  item with two or more anchors is supported when one occurrence per anchor can be
  chosen, no two overlapping (one span of the text is one value), such that in text
  order at most ``MAX_ITEM_GAP`` words lie between neighbours. A list in a text writes
  each record's parts next to each other ("metformin 500 mg", "AI 131 BOM to LHR");
  an invented item pairs parts from different places. An item with fewer than two
  anchors (a value the text does not write is no anchor) is kept;
* **one mention, one record**: an item that repeats, in the same field, a string or
  number of an earlier item (kept or not) that the text writes only once copied it
  (``{"name": "Review", "dose_mg": 10}`` after ``{"name": "lisinopril", "dose_mg": 10}``
  from "lisinopril 10 mg daily. ... Review in 4 weeks"): it is dropped.

The array keeps its supported items in order; when that leaves fewer than its
``minItems``, the earliest dropped items (before a repeat) come back until it has
them, and where fewer distinct items exist before a repeat it keeps every item. An
array's ``minItems`` is the largest one of its subschema and of the branches of its
``anyOf``/``oneOf``/``allOf`` (``{"anyOf": [{"type": "array", "minItems": 2},
{"type": "null"}]}`` gives 2). Each array's change is kept only when the whole object
stays valid under the schema (``jsonschema``); an array whose change would break it
keeps its items, and the other arrays' changes stand. No model call.
``apply_evidence`` (``evidence/``) runs it last.
"""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import jsonschema

from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import dates, times
from structgen.fsm.numerals import numeral_spans

__all__ = [
    "MAX_ITEM_GAP",
    "trim_items",
    "item_supported",
    "copies_previous",
    "kept_prefix",
    "listed_together",
    "min_items",
]

MAX_ITEM_GAP = 4  # words allowed between neighbouring parts of one item
_MAX_ASSIGNMENTS = 4096  # occurrence combinations tried per item
_WORD = re.compile(r"[^\W_]+")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ISO_TIME = re.compile(r"[0-9]{2}:[0-9]{2}(?::[0-9]{2})?")
_DATE_WORDS = 6  # most words of one written date or time ("the 9th of July 2026")
# what joins two items of a list a text writes ("A, B and C", "A; B", "A & B", "A or B")
_LIST_JOINER = re.compile(r"[ \t]*(?:,[ \t]*(?:and|or)?|;|&|and|or)[ \t]+|,", re.IGNORECASE)


class _Words:
    """The text's words (runs of letters and digits) and numerals, to place values in."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.folded = text.casefold() if len(text.casefold()) == len(text) else None
        found = [m.span() for m in _WORD.finditer(text)]
        self.starts = [s for s, _ in found]
        self.ends = [e for _, e in found]
        self.numerals = numeral_spans(text)
        self._iso: dict[str, list[tuple[int, int, int, int]]] = {}

    def words(self, start: int, end: int) -> tuple[int, int] | None:
        """The range of word indices a character range covers (None: no word in it)."""
        ks = [k for k, (s, e) in enumerate(zip(self.starts, self.ends)) if s < end and e > start]
        return (ks[0], ks[-1]) if ks else None

    def occurrences(self, value: Any) -> list[tuple[int, int, int, int]]:
        """``(first word, last word, start, end)`` of each place the text writes ``value``."""
        found = []
        if isinstance(value, str):
            needle = value.strip()
            if not needle:
                return []
            if _ISO_DATE.fullmatch(needle) or _ISO_TIME.fullmatch(needle):
                found = list(self._written_as(needle))
            hay = self.text
            if self.folded is not None:
                hay, needle = self.folded, needle.casefold()
            at = hay.find(needle)
            while at >= 0:
                span = self.words(at, at + len(needle))
                if span is not None and _bounded(hay, at, at + len(needle)):
                    found.append((*span, at, at + len(needle)))
                at = hay.find(needle, at + 1)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = Decimal(str(value))
            except InvalidOperation:
                return []
            for start, end, values in self.numerals:
                span = self.words(start, end)
                if span is not None and any(v == number for v in values):
                    found.append((*span, start, end))
        return list(dict.fromkeys(found))

    def _written_as(self, iso: str) -> list[tuple[int, int, int, int]]:
        """Where the text writes a date or time in any notation: the runs of at most
        ``_DATE_WORDS`` words that ``structgen.fsm.dates`` reads as ``iso`` and no
        shorter run inside reads so.
        """
        if iso in self._iso:
            return self._iso[iso]
        read = dates if _ISO_DATE.fullmatch(iso) else times
        found: list[tuple[int, int, int, int]] = []
        self._iso[iso] = found
        for i, start in enumerate(self.starts):
            for j in range(i, min(i + _DATE_WORDS, len(self.starts))):
                if iso in read(self.text[start : self.ends[j]]):
                    if j == i or iso not in read(self.text[self.starts[i + 1] : self.ends[j]]):
                        found.append((i, j, start, self.ends[j]))  # no shorter run reads it
                    break
        return found


def _bounded(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` neither starts nor ends inside a word ("fra" is not in
    "Frankfurt").
    """
    before = start > 0 and text[start - 1].isalnum() and text[start].isalnum()
    after = end < len(text) and text[end].isalnum() and text[end - 1].isalnum()
    return not (before or after)


def _leaves(value: Any) -> list[Any]:
    """The scalar values of an item (through nested objects and arrays)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [] if value is None or isinstance(value, bool) else [value]


def item_supported(item: Any, words: _Words, max_gap: int = MAX_ITEM_GAP) -> bool:
    """Whether the text writes an item's parts together (module docstring).

    Args:
        item: one array item (an object, or a scalar: then it has one anchor at most).
        words: the text, as ``_Words``.
        max_gap: most words between neighbouring anchors.

    Returns:
        True when the item has fewer than two anchors or some non-overlapping choice of
        their occurrences leaves at most ``max_gap`` words between neighbours.
    """
    places = [p for p in (words.occurrences(v) for v in _leaves(item)) if p]
    if len(places) < 2:
        return True
    tried = 0
    for choice in itertools.product(*places):
        tried += 1
        if tried > _MAX_ASSIGNMENTS:
            return True  # undecided within budget: keep the item
        spans = sorted(choice, key=lambda p: (p[2], p[3]))
        if any(b[2] < a[3] for a, b in zip(spans, spans[1:])):
            continue  # two values on one span of the text
        if all(b[0] - a[1] - 1 <= max_gap for a, b in zip(spans, spans[1:])):
            return True
    return False


def copies_previous(item: Any, previous: Any, words: _Words) -> bool:
    """Whether ``item`` repeats a value of ``previous`` (an item before it) in the same
    field where the text writes that value once: one mention is one record's part, so
    the later item copied it rather than read it.

    Args:
        item: one array item.
        previous: an item before it in the array.
        words: the text, as ``_Words``.

    Returns:
        True when some field of both objects holds the same string or number (booleans
        and nulls are not mentions) and the text writes it exactly once.
    """
    if not isinstance(item, dict) or not isinstance(previous, dict):
        return False
    for key, value in item.items():
        if value is None or isinstance(value, (bool, dict, list)) or key not in previous:
            continue
        same = previous[key]
        if type(same) is type(value) and same == value and len(words.occurrences(value)) == 1:
            return True
    return False


def _trimmed(items: list[Any], min_items: int, words: _Words) -> list[Any]:
    """The items kept (module docstring)."""
    seen: list[Any] = []
    keys: set[str] = set()
    for item in items:
        key = json.dumps(item, sort_keys=True)  # JSON equality: true is not 1
        if key in keys:  # a loop: this item and every one after it
            break
        keys.add(key)
        seen.append(item)
    kept = [
        k
        for k, item in enumerate(seen)
        if item_supported(item, words)
        and not any(copies_previous(item, seen[j], words) for j in range(k))
    ]
    for k in range(len(seen)):
        if len(kept) >= min_items:
            break
        if k not in kept:
            kept = sorted(kept + [k])
    if len(kept) < min_items:  # fewer distinct items than the schema wants: all stay
        return list(items)
    return [seen[k] for k in kept]


def min_items(schema: Any, sub: Any, depth: int = 0) -> int:
    """The ``minItems`` an array under ``sub`` must keep: the largest integer
    ``minItems`` of ``sub`` and of the branches of its ``anyOf``/``oneOf``/``allOf``
    (``$ref`` resolved against ``schema``); 0 where none is given.

    Args:
        schema: the root JSON Schema (for ``$ref``).
        sub: the array's subschema.
        depth: the nesting reached (references followed at most ``MAX_REF_DEPTH`` deep).
    """
    sub = _resolve(schema, sub)
    if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
        return 0
    low = sub.get("minItems", 0)
    if isinstance(low, bool) or not isinstance(low, (int, float)) or low != int(low):
        low = 0
    best = max(0, int(low))
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in sub.get(key) or ():
            best = max(best, min_items(schema, branch, depth + 1))
    return best


def kept_prefix(items: list[Any], min_items: int, text: str) -> int | None:
    """How many items of one array ``trim_items``' rules keep, where they keep a leading
    run of it and drop the rest (a loop, or invented items at its end); None where they
    keep every item or a set that is not a leading run.

    Args:
        items: the array's items.
        min_items: the array's ``minItems``.
        text: the document.
    """
    kept = _trimmed(items, min_items, _Words(text))
    n = len(kept)
    return n if n < len(items) and kept == list(items[:n]) else None


def trim_items(schema: Any, text: str, value: Any) -> tuple[Any, list[str]]:
    """One finished object with the unsupported items of its arrays dropped (module
    docstring).

    Args:
        schema: the JSON Schema (a dict) ``value`` is valid under.
        text: the document the object was extracted from.
        value: the extracted object (a dict; anything else is returned as it is).

    Returns:
        ``(object, changed)``: the object (a new dict where an array changed) and the
        dotted paths of the arrays changed, in schema order.
    """
    if not isinstance(schema, dict) or not isinstance(value, dict):
        return value, []
    words = _Words(text)
    out = json.loads(json.dumps(value))
    changed: list[str] = []

    def walk(sub: Any, node: dict, path: str, depth: int) -> None:
        sub = _resolve(schema, sub)
        if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
            return
        branches = [sub] + [b for k in ("anyOf", "oneOf") for b in sub.get(k) or ()]
        for branch in branches:
            branch = _resolve(schema, branch)
            if not isinstance(branch, dict):
                continue
            for name, prop in (branch.get("properties") or {}).items():
                current = node.get(name)
                if isinstance(current, dict):
                    walk(prop, current, f"{path}{name}.", depth + 1)
                elif isinstance(current, list) and current:
                    new = _trimmed(current, min_items(schema, prop), words)
                    if new != current:
                        node[name] = new
                        if checker.is_valid(out):
                            changed.append(path + name)
                        else:  # this array's change breaks the schema: it stays
                            node[name] = current

    checker = jsonschema.validators.validator_for(schema)(schema)
    if not checker.is_valid(out):  # not valid to begin with: nothing to keep valid
        return value, []
    walk(schema, out, "", 0)
    if not changed:
        return value, []
    return out, list(dict.fromkeys(changed))


def listed_together(previous: Any, item: Any, text: str) -> bool:
    """Whether the text writes ``item`` right after ``previous`` as the next entry of a
    list: only a list joiner between them (``,``, ``;``, ``&``, ``and``, ``or``, ", and"):
    "Hiroshi Nakamura, Chiamaka Okafor and Sigrid Berg" lists "Chiamaka Okafor" after
    "Hiroshi Nakamura"; "knows Python and Rust. Lives in Lyon" does not list "Lyon"
    after "Rust".

    Args:
        previous: an array item (only strings are found in the text).
        item: the item after it.
        text: the document.

    Returns:
        True when both are non-empty strings and some occurrence of ``previous`` (not
        inside a word) is followed by a joiner and then ``item`` (not inside a word).
        Raises: never.
    """
    if not (isinstance(previous, str) and isinstance(item, str)):
        return False
    previous, item = previous.strip(), item.strip()
    if not previous or not item:
        return False
    at = text.find(previous)
    while at >= 0:
        end = at + len(previous)
        joiner = _LIST_JOINER.match(text, end)
        if joiner is not None and _bounded(text, at, end):
            nxt = joiner.end()
            if text.startswith(item, nxt) and _bounded(text, nxt, nxt + len(item)):
                return True
        at = text.find(previous, at + 1)
    return False
