r"""Anchors at the ends of a whole-output regex: no-ops, removed from the text.

A regex constraint matches the whole output (``re.fullmatch``), so ``^`` and ``\A`` at
the start and ``$`` and ``\Z`` at the end of the pattern, or of one of its top-level
alternatives, always hold: ``^(|.*)$`` and ``^a|^b$`` mean ``(|.*)`` and ``a|b``. Under
``re.fullmatch`` that is true with or without ``(?m)``: position 0 is a line start and
the end of the text is a line end (``$`` before a final newline leaves the newline
unmatched). An anchor anywhere else (``a^b``, ``(^a)b``, ``\bword``) is refused with
its position; no automaton of the fsm has a notion of position.

The text is scanned, not the parse tree (``re``'s parser factors a common prefix out of
alternatives, ``^a|^b`` parses as ``^(?:a|b)``, and keeps no positions): escapes,
classes and ``(?#...)`` comments are skipped, a depth-0 ``|`` starts an alternative and
leading global flags (``(?i)``) come before the first one. A verbose pattern (``(?x)``)
is left as it is (whitespace and ``#`` comments change what the characters mean); its
anchors meet ``parse``'s general refusal.
"""

from __future__ import annotations

import re

__all__ = ["strip_end_anchors"]

_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")  # global flags, only legal at the very start
_VERBOSE = re.compile(r"\(\?[aiLmsux]*x[aiLmsux]*[-:)]|\(\?[aiLmsu]*-[imsx]*x")
_START, _END, _WORD, _ALT = "start", "end", "word", "alt"
# ``\z`` is ``\Z`` from Python 3.14 on (before, ``re`` refuses it, before any stripping)
_ESCAPES = {"A": _START, "Z": _END, "z": _END, "b": _WORD, "B": _WORD}


def _skip_class(pattern: str, i: int) -> int:
    """Index just past the class that opens at ``pattern[i] == "["``."""
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] == "^":
        j += 1
    if j < n and pattern[j] == "]":  # a first ``]`` is a member
        j += 1
    while j < n and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _scan(pattern: str, i: int) -> list[tuple[str, int, int]]:
    """(kind, start, end) of every anchor, word boundary and depth-0 ``|`` from ``i``."""
    out: list[tuple[str, int, int]] = []
    depth, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            e = pattern[i + 1 : i + 2]
            kind = _ESCAPES.get(e)
            if kind is not None:
                out.append((kind, i, i + 2))
            i += 2
        elif c == "[":
            i = _skip_class(pattern, i)
        elif c == "(" and pattern.startswith("(?#", i):
            i += 3
            while i < n and pattern[i] != ")":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
        else:
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "|" and depth == 0:
                out.append((_ALT, i, i + 1))
            elif c == "^":
                out.append((_START, i, i + 1))
            elif c == "$":
                out.append((_END, i, i + 1))
            i += 1
    return out


def strip_end_anchors(pattern: str) -> tuple[str, int | None]:
    r"""``pattern`` without the anchors at its ends and at those of its top-level alternatives.

    Args:
        pattern: a regex in Python ``re`` syntax, matched against the whole output.

    Returns:
        ``(text, stray)``: ``text`` matches, under ``re.fullmatch``, exactly what
        ``pattern`` matches, with ``^``/``\A`` removed where nothing but other such
        anchors comes between them and the start of the pattern or of a top-level
        alternative, and ``$``/``\Z`` likewise at the ends; ``stray`` is the index in
        ``pattern`` of the first anchor or word boundary (``\b``, ``\B``) that is left,
        None when there is none (or the pattern is verbose, left unchanged).

    Raises:
        never (a pattern that does not parse is scanned as far as it goes; ``re``'s
        parser reports it).
    """
    if _VERBOSE.search(pattern):
        return pattern, None
    start = 0
    while (m := _FLAGS.match(pattern, start)) is not None:
        start = m.end()
    toks = _scan(pattern, start)
    if not toks:
        return pattern, None
    # the tokens of each top-level alternative (between depth-0 ``|`` and the pattern's ends):
    # an anchor is at the alternative's start when only start anchors come before it there
    alts: list[tuple[int, int, list[int]]] = []
    lo, members = start, []
    for k, (kind, s, e) in enumerate(toks):
        if kind == _ALT:
            alts.append((lo, s, members))
            lo, members = e, []
        else:
            members.append(k)
    alts.append((lo, len(pattern), members))
    drop: set[int] = set()
    for lo, hi, members in alts:
        pos = lo
        for k in members:  # leading start anchors
            kind, s, e = toks[k]
            if kind != _START or s != pos:
                break
            drop.add(k)
            pos = e
        pos = hi
        for k in reversed(members):  # trailing end anchors
            kind, s, e = toks[k]
            if kind != _END or e != pos or k in drop:
                break
            drop.add(k)
            pos = s
    stray = next(
        (s for k, (kind, s, _e) in enumerate(toks) if kind != _ALT and k not in drop), None
    )
    if not drop:
        return pattern, stray
    out, prev = [], 0
    for k in sorted(drop):
        _kind, s, e = toks[k]
        out.append(pattern[prev:s])
        prev = e
    out.append(pattern[prev:])
    return "".join(out), stray
