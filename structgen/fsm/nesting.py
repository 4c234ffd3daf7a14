"""Nesting limits for user input, and the tools that keep deep input off the Python stack.

Every walker over user input (a JSON document, a schema, a pattern, a term) either runs
iteratively or carries an explicit depth budget; nothing on that path may raise
``RecursionError``. This module holds what those walkers share:

- ``MAX_JSON_DEPTH``: the deepest JSON nesting (arrays and objects, counted one per
  container) that ``loads`` decodes (server bodies, schema files, schema strings);
  deeper input raises ``GrammarTooComplexError`` naming the limit.
- ``MAX_SCHEMA_DEPTH``: the deepest JSON nesting of a schema document that
  ``compile_json_schema`` converts (5,000 containers: 2,500 nested objects, each level a
  schema and its ``properties`` map); deeper raises ``GrammarTooComplexError`` before any
  other walk of the schema.
- ``MAX_VALUE_DEPTH``: the deepest ``const`` / ``enum`` value the converter takes (64
  containers: values are compared and validated by ``jsonschema`` and ``json``, which
  recurse); deeper raises ``GrammarTooComplexError`` naming the keyword and pointer.
- ``json_depth`` / ``check_depth``: the nesting of a decoded value and where it is deepest,
  found without recursion.
- ``loads`` / ``dumps``: ``json``'s own functions for shallow values; past
  ``_STDLIB_DEPTH`` (where ``json``'s C code would reach the interpreter's recursion limit)
  an iterative decoder / encoder that gives the same results.
- ``fresh_stack``: for the few walkers whose recursion mirrors the input's structure and is
  kept recursive for readability (the schema converter, the metaschema table): every
  ``SEGMENT`` levels the walk continues on a new thread's stack, so no thread's recursion
  passes a fixed bound, while the whole depth stays bounded by the walker's own budget
  (``MAX_SCHEMA_DEPTH``).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable, TypeVar

from ..errors import GrammarTooComplexError
from .deadline import cpu_clock, credit, fresh_stack_clock

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_SCHEMA_DEPTH",
    "MAX_VALUE_DEPTH",
    "SEGMENT",
    "json_depth",
    "json_depth_holding",
    "check_depth",
    "loads",
    "dumps",
    "fresh_stack",
]

MAX_JSON_DEPTH = 10_000  # containers nested in one JSON text that loads decodes
MAX_SCHEMA_DEPTH = 5_000  # containers nested in a schema that the converter walks
MAX_VALUE_DEPTH = 64  # containers nested in a const/enum value (compared by recursive code)
SEGMENT = 32  # levels a recursive walker descends on one thread's stack (fresh_stack)
_STDLIB_DEPTH = 100  # json's C encoder/decoder recurse once per container
_T = TypeVar("_T")


def _pointer(tokens: list) -> str:
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def json_depth(value: Any, limit: int | None = None) -> tuple[int, str]:
    """How many containers (lists, dicts) nest in ``value``, and the JSON pointer of the
    deepest one ("" for the value itself). Iterative: any depth. Raises: never.

    Args:
        value: a decoded JSON value.
        limit: stop at the first container nested deeper than this (its depth and pointer
            are returned); None: walk everything.
    """
    return json_depth_holding(value, limit, None)[:2]


def json_depth_holding(
    value: Any, limit: int | None, key: str | None
) -> tuple[int, str, bool, int]:
    """:func:`json_depth`'s ``(depth, pointer)`` and, in the same walk, whether some object
    of ``value`` (at any depth) holds a string under ``key``: True as well when the walk
    stopped at ``limit`` (not every object was seen); False when ``key`` is None; and how
    many objects (dicts) the walk met, each occurrence counted (a dict held twice counts
    twice): every object of ``value`` unless the walk stopped at ``limit``.
    Iterative. Raises: never.
    """
    best, best_link, holds, objects = 0, None, False, 0
    # node, depth of its parent, link to it: (key, the parent's link) (a reversed pointer)
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        node, depth, link = stack.pop()
        if isinstance(node, dict):
            children: Any = node.items()
            objects += 1
            if key is not None and not holds and isinstance(node.get(key), str):
                holds = True
        elif isinstance(node, list):
            children = enumerate(node)
        else:
            continue
        depth += 1
        if depth > best:
            best, best_link = depth, link
            if limit is not None and depth > limit:
                holds = key is not None  # unknown: not every object was seen
                break
        for k, v in children:
            if isinstance(v, (dict, list)):
                stack.append((v, depth, (k, link)))
    tokens: list = []
    while best_link is not None:
        k, best_link = best_link
        tokens.append(k)
    return best, _pointer(tokens[::-1]), holds, objects


def check_depth(value: Any, limit: int, what: str) -> int:
    """Raise when ``value`` nests more than ``limit`` containers; otherwise return its depth
    (``json_depth``'s, so a caller can pass it on to :func:`dumps` instead of walking again).

    Args:
        value: a decoded JSON value.
        limit: the deepest nesting allowed.
        what: what ``value`` is, for the message ("JSON Schema", "request body").

    Raises:
        GrammarTooComplexError: naming the depth, the limit and the pointer where it is
            deepest.
    """
    depth, pointer = json_depth(value, limit)
    if depth > limit:
        raise too_deep(what, limit, pointer)
    return depth


def too_deep(what: str, limit: int, pointer: str) -> GrammarTooComplexError:
    """The error :func:`check_depth` raises for ``value`` nesting past ``limit`` containers
    at ``pointer`` (the JSON pointer of its first container past the limit).
    """
    return GrammarTooComplexError(
        f"{what} nests more than {limit} arrays/objects deep (the depth limit), at "
        f"{_abbreviated(pointer)}"
    )


def _abbreviated(pointer: str, keep: int = 6) -> str:
    """``pointer`` with the middle of a long one left out (``/a/b/.../y/z``) for messages."""
    tokens = pointer.split("/")[1:]
    if len(tokens) <= 2 * keep:
        return pointer or "#"
    skipped = len(tokens) - 2 * keep
    head, tail = "/".join(tokens[:keep]), "/".join(tokens[-keep:])
    return f"/{head}/...({skipped} more)/{tail}"


_SCAN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _text_depth(text: str) -> int:
    """Deepest bracket nesting of a JSON text (strings skipped), without decoding it."""
    depth = best = 0
    for m in _SCAN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > best:
                best = depth
        elif c in "]}":
            depth -= 1
    return best


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for a JSON text of any nesting up to ``max_depth``.

    Args:
        text: the JSON text (bytes are decoded as UTF-8).
        max_depth: the deepest container nesting accepted.

    Returns:
        The decoded value, equal to what ``json.loads`` gives where it can decode the text.

    Raises:
        json.JSONDecodeError: the text is not JSON.
        UnicodeDecodeError: bytes that are not UTF-8.
        GrammarTooComplexError: the text nests deeper than ``max_depth`` (the message
            names the limit).
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    depth = _text_depth(text)
    if depth > max_depth:
        raise GrammarTooComplexError(
            f"JSON text nests {depth} arrays/objects deep (the depth limit is {max_depth})"
        )
    if depth <= _STDLIB_DEPTH:
        return json.loads(text)
    return _Decoder(text).run()


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_CONSTANTS = {"null": None, "true": True, "false": False}


class _Decoder:
    """Iterative JSON decoder (the language and values of ``json.loads``, strict strings)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _error(self, msg: str, pos: int) -> json.JSONDecodeError:
        return json.JSONDecodeError(msg, self.text, pos)

    def _scalar(self, pos: int) -> tuple[Any, int]:
        text = self.text
        c = text[pos : pos + 1]
        if c == '"':
            return json.decoder.scanstring(text, pos + 1, True)
        m = _NUMBER.match(text, pos)
        if m and m.end() > pos:
            integer, frac, exp = m.groups()
            if frac or exp:
                return float(integer + (frac or "") + (exp or "")), m.end()
            return int(integer), m.end()
        for word, value in _CONSTANTS.items():
            if text.startswith(word, pos):
                return value, pos + len(word)
        for word, value in (("NaN", float("nan")), ("Infinity", float("inf"))):
            if text.startswith(word, pos):
                return value, pos + len(word)
        if text.startswith("-Infinity", pos):
            return float("-inf"), pos + 9
        raise self._error("Expecting value", pos)

    def run(self) -> Any:
        text, n = self.text, len(self.text)
        # each open container: [value, pending key or None]
        stack: list[list] = []
        pos = _WS.match(text, 0).end()
        result: Any = None
        while True:
            c = text[pos : pos + 1]
            if c in ("[", "{"):
                container: Any = [] if c == "[" else {}
                pos = _WS.match(text, pos + 1).end()
                close = "]" if c == "[" else "}"
                if text[pos : pos + 1] == close:
                    value, pos = container, pos + 1
                else:
                    stack.append([container, None])
                    if c == "{":
                        pos = self._key(stack[-1], pos)
                    continue
            else:
                value, pos = self._scalar(pos)
            while True:  # attach value to its container, closing finished containers
                if not stack:
                    result = value
                    pos = _WS.match(text, pos).end()
                    if pos != n:
                        raise self._error("Extra data", pos)
                    return result
                top = stack[-1]
                if isinstance(top[0], list):
                    top[0].append(value)
                else:
                    top[0][top[1]] = value
                pos = _WS.match(text, pos).end()
                c = text[pos : pos + 1]
                if c == ",":
                    pos = _WS.match(text, pos + 1).end()
                    if isinstance(top[0], dict):
                        pos = self._key(top, pos)
                    break
                if c == ("]" if isinstance(top[0], list) else "}"):
                    value = stack.pop()[0]
                    pos += 1
                    continue
                raise self._error("Expecting ',' delimiter", pos)

    def _key(self, frame: list, pos: int) -> int:
        text = self.text
        if text[pos : pos + 1] != '"':
            raise self._error("Expecting property name enclosed in double quotes", pos)
        key, pos = json.decoder.scanstring(text, pos + 1, True)
        pos = _WS.match(text, pos).end()
        if text[pos : pos + 1] != ":":
            raise self._error("Expecting ':' delimiter", pos)
        frame[1] = key
        return _WS.match(text, pos + 1).end()


def dumps(value: Any, *, sort_keys: bool = False, depth: int | None = None) -> str:
    """``json.dumps(value, sort_keys=sort_keys)`` for a value of any nesting.

    Args:
        value: a decoded JSON value.
        sort_keys: as ``json.dumps``.
        depth: ``value``'s nesting depth when the caller already has it (``check_depth``);
            None: measured here.

    Raises:
        TypeError: a value JSON cannot encode (as ``json.dumps``).
    """
    if depth is None:
        depth = json_depth(value, _STDLIB_DEPTH)[0]
    if depth <= _STDLIB_DEPTH:
        return json.dumps(value, sort_keys=sort_keys)
    encode = json.encoder.encode_basestring_ascii
    out: list[str] = []
    # items: a value to write, or a literal string (str in the ``_LIT`` wrapper)
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if type(item) is _Lit:
            out.append(item.text)
        elif isinstance(item, dict):
            keys = sorted(item) if sort_keys else list(item)
            parts: list[Any] = [_Lit("{")]
            for i, k in enumerate(keys):
                if not isinstance(k, str):
                    raise TypeError(f"keys must be str, not {type(k).__name__}")
                parts.append(_Lit((", " if i else "") + encode(k) + ": "))
                parts.append(item[k])
            parts.append(_Lit("}"))
            todo.extend(reversed(parts))
        elif isinstance(item, (list, tuple)):
            parts = [_Lit("[")]
            for i, v in enumerate(item):
                if i:
                    parts.append(_Lit(", "))
                parts.append(v)
            parts.append(_Lit("]"))
            todo.extend(reversed(parts))
        else:
            out.append(json.dumps(item))
    return "".join(out)


class _Lit:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def fresh_stack(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` run on a new thread's stack; its result, or its exception re-raised.

    A recursive walker calls this every ``SEGMENT`` levels of its own recursion (the caller
    blocks until it returns), so each thread holds at most ``SEGMENT`` levels. The walker's
    own depth budget bounds the number of threads. The new thread's CPU time counts on the
    caller's ``deadline.cpu_clock``, so compile budgets hold across the hand-off.

    Raises:
        Whatever ``fn`` raises.
    """
    box: list = []
    clock = cpu_clock()  # the walk's CPU counts against the caller's compile budgets
    spent: list[float] = []

    def target() -> None:
        fresh_stack_clock(clock)
        try:
            box.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            box.append((False, exc))
        finally:
            spent.append(cpu_clock() - clock)

    thread = threading.Thread(target=target, name="structgen-deep-walk", daemon=True)
    thread.start()
    thread.join()
    credit(spent[0])
    ok, value = box.pop()
    if not ok:
        try:
            raise value
        finally:  # the traceback holds this frame: no cycle through its local
            del value
    return value
