r"""Copy constraints: the substring automaton of a source text, as shared regex definitions.

A copy-constrained JSON string may only be a *span* of the source text: a substring that
starts and ends at a unit boundary, where the text's units are its maximal runs of
letters and digits and each other character alone (so a span never cuts a word:
``"Aiko"`` and ``"Aiko Tanaka"`` are spans of ``"Aiko Tanaka"``, ``"iko"`` and ``"Tanak"``
are not), and that neither starts nor ends with whitespace and is not empty. What is
written is the span's JSON string content as ``json.dumps(..., ensure_ascii=False)``
writes it: ``\"``, ``\\``, ``\n``, ``\t``, ``\r``, ``\b``, ``\f``, other control
characters as ``\u00XX``, everything else (non-ASCII included) as its UTF-8 bytes; the
schema grammar's JSON string (``json_schema.pattern.JSON_CHAR``) accepts all of these.

The automaton is the suffix automaton (Blumer et al., 1985) of the text's unit sequence:
at most ``2 * num_units`` states, every path from the start a substring. Acyclic, it is
written as one regex definition per state (``regex.definitions``: a definition refers only
to earlier ones, and every transition leads to a state with a longer longest string, so
states are defined longest first), and the arena hash-conses the rest. Derivatives then
read it byte by byte: a state's term is the alternation of its units, each followed by
the next state's term.

``SubstringAutomaton.definitions(base)`` gives those texts for a definitions list that
already holds ``base`` entries; the JSON Schema converter appends them
(``json_schema.copy``). ``with_copy(spec, sources)`` puts a constraint under copy: a JSON
Schema's eligible values, a regex intersected with the spans of the raw text, or (no
constraint) a span of the raw text; the DSL's ``gen(copy_from=...)`` and the server's
``copy_from`` use it. Its parts serve the other users: ``span_definitions`` (the raw
texts' spans appended to a definitions list), ``intersect`` (an ``INTERSECT`` definition)
and ``matches_nothing`` (the emptiness check before a copy is kept); a template's
``copy_from`` (``lang.template``) intersects each copied hole with the spans this way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import GrammarTooComplexError, RequestError
from .regex.anchors import strip_end_anchors
from .regex.definitions import INTERSECT, PLACEHOLDER_BASE
from .regex.escape import escape_literal
from .regex.parse import lower
from .regex.terms import TermArena
from .spec import Regex

__all__ = [
    "text_units",
    "SubstringAutomaton",
    "json_string_content",
    "with_copy",
    "as_sources",
    "CopiedRegex",
    "span_definitions",
    "intersect",
    "matches_nothing",
]


def json_string_content(text: str) -> str:
    r"""``text`` as JSON string content (``json.dumps`` without ``ensure_ascii``, unquoted).

    Args:
        text: any string (lone surrogates are written as ``\uXXXX`` escapes).

    Returns:
        The escaped content, without the quotes.
    """
    return json.dumps(text, ensure_ascii=False)[1:-1]


def text_units(text: str) -> list[str]:
    """The text's units: maximal runs of letters and digits (``str.isalnum``), every other
    character alone, in order (their concatenation is ``text``).
    """
    units: list[str] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or not (text[i].isalnum() and text[i - 1].isalnum()):
            units.append(text[start:i])
            start = i
    return units


class SubstringAutomaton:
    """The suffix automaton of one text's units (see the module docstring).

    Args:
        text: the source text.

    Attributes:
        units: the distinct units, indexed by symbol.
        num_states: states of the automaton (state 0 is the start).
    """

    def __init__(self, text: str) -> None:
        symbols: dict[str, int] = {}
        self.units: list[str] = []
        seq = []
        for u in text_units(text):
            if u not in symbols:
                symbols[u] = len(self.units)
                self.units.append(u)
            seq.append(symbols[u])
        # Blumer et al.'s online construction: length, suffix link, transitions per state
        self._len = [0]
        self._link = [-1]
        self._next: list[dict[int, int]] = [{}]
        last = 0
        for c in seq:
            cur = self._new(self._len[last] + 1, {})
            p = last
            while p != -1 and c not in self._next[p]:
                self._next[p][c] = cur
                p = self._link[p]
            if p == -1:
                self._link[cur] = 0
            else:
                q = self._next[p][c]
                if self._len[p] + 1 == self._len[q]:
                    self._link[cur] = q
                else:
                    clone = self._new(self._len[p] + 1, dict(self._next[q]))
                    self._link[clone] = self._link[q]
                    while p != -1 and self._next[p].get(c) == q:
                        self._next[p][c] = clone
                        p = self._link[p]
                    self._link[q] = self._link[cur] = clone
            last = cur
        self._last_unit = [-1] * len(self._len)  # the unit every string of a state ends in
        for transitions in self._next:
            for c, q in transitions.items():
                self._last_unit[q] = c

    def _new(self, length: int, transitions: dict[int, int]) -> int:
        self._len.append(length)
        self._link.append(-1)
        self._next.append(transitions)
        return len(self._len) - 1

    @property
    def num_states(self) -> int:
        """States of the automaton (state 0 is the start)."""
        return len(self._len)

    def _is_space(self, symbol: int) -> bool:
        return self.units[symbol].isspace()

    def is_empty(self) -> bool:
        """True when the text has no span (it is empty or only whitespace)."""
        return all(self._is_space(c) for c in self._next[0])

    def spans(self, max_units: int | None = None) -> set[str]:
        """Every span, by enumeration (a reference for tests; quadratic in the text).

        Args:
            max_units: only spans of at most this many units (None: all).
        """
        out: set[str] = set()
        stack = [(0, "", 0)]
        while stack:
            state, prefix, n = stack.pop()
            if n and not self._is_space(self._last_unit[state]):
                out.add(prefix)
            if max_units is not None and n == max_units:
                continue
            for c, q in self._next[state].items():
                if n == 0 and self._is_space(c):
                    continue
                stack.append((q, prefix + self.units[c], n + 1))
        return out

    def definitions(self, base: int, escape: Callable[[str], str] = json_string_content):
        """Regex definitions of the spans, as ``escape`` writes each unit (module docstring).

        Args:
            base: how many definitions precede these in the list they are appended to
                (placeholders are numbered from there).
            escape: how a unit is written (default: JSON string content; ``str`` for the
                raw text).

        Returns:
            ``(texts, pattern)``: the definitions to append, and the pattern of the spans
            (a placeholder). The caller checks :meth:`is_empty` first.
        """
        order = sorted(range(1, self.num_states), key=lambda s: -self._len[s])
        placeholder: dict[int, str | None] = {}
        texts: list[str] = []
        for s in order + [0]:
            alts = []
            for c, q in sorted(self._next[s].items()):
                if s == 0 and self._is_space(c) or placeholder[q] is None:
                    continue  # a span starts with no whitespace; q leads to no span end
                alts.append(escape_literal(escape(self.units[c])) + placeholder[q])
            accepting = s != 0 and not self._is_space(self._last_unit[s])
            if not alts:
                placeholder[s] = "" if accepting else None  # a leaf: ends here, or dead
                continue
            body = "(?:" + "|".join(alts) + ")" + ("?" if accepting else "")
            placeholder[s] = chr(PLACEHOLDER_BASE + base + len(texts))
            texts.append(body)
        assert placeholder[0], "definitions() of a text without spans"
        return texts, placeholder[0]


def as_sources(copy_from: Any) -> tuple[str, ...]:
    """``copy_from`` (a text or a list of texts) as a tuple of texts.

    Raises:
        RequestError: not a string or a non-empty list of strings.
    """
    if isinstance(copy_from, str):
        sources: tuple = (copy_from,)
    else:
        sources = tuple(copy_from) if isinstance(copy_from, (list, tuple)) else ()
    if not sources or not all(isinstance(t, str) for t in sources):
        raise RequestError(
            f"copy_from must be a text or a non-empty list of texts, got {type(copy_from).__name__}"
        )
    return sources


@dataclass(frozen=True)
class CopiedRegex(Regex):
    """The ``Regex`` ``with_copy`` builds for a regex or free text, remembering what it was
    built from, so that a client can send it as the server's ``regex`` and ``copy_from``
    instead of its lowered definitions (which no wire regex can write).

    Args:
        copy_base: the regex spec before the copy constraint, or None for free text.
        copy_from: the source texts.
        (the others as ``Regex``; ``cache_key`` is ``Regex``'s: the pattern and
        definitions determine the language)
    """

    copy_base: Regex | None = None
    copy_from: tuple[str, ...] = ()


def with_copy(spec: Any, sources: tuple[str, ...]) -> Any:
    """``spec`` with its output (or its eligible values) copied from ``sources``.

    Args:
        spec: a ``JsonSchema`` (its string and number values are copied,
            ``json_schema.copy``), a ``Regex`` (intersected with the spans of the raw
            texts), or None (the output is one span of a raw text).
        sources: the source texts.

    Returns:
        The new spec (``CopyJsonSchema``, or a ``CopiedRegex`` with definitions).

    Raises:
        RequestError: another kind of spec (choices are never copy-constrained), or
            sources without any span (a regex or free text has no fallback).
    """
    from .json_schema.copy import CopyJsonSchema
    from .spec import JsonSchema, Regex

    if isinstance(spec, JsonSchema):
        fields = {f: getattr(spec, f) for f in spec.__dataclass_fields__}
        return CopyJsonSchema(**{**fields, "copy_from": tuple(sources)})
    if spec is not None and not isinstance(spec, Regex):
        raise RequestError(
            f"copy_from applies to a JSON Schema, a regex or free text, not {spec!r}"
        )
    defs = list(spec.definitions) if spec is not None else []
    spans = span_definitions(sources, defs)
    if spec is None:
        return CopiedRegex(spans, None, tuple(defs), None, tuple(sources))
    # a definition keeps its anchors: the spec's are removed first
    top = intersect(defs, [strip_end_anchors(spec.pattern)[0], spans])
    return CopiedRegex(top, spec.trigger, tuple(defs), spec, tuple(sources))


def span_definitions(sources: tuple[str, ...], defs: list[str]) -> str:
    """Append the definitions of the raw texts' spans to ``defs`` (mutated).

    Args:
        sources: the source texts (a text without spans contributes nothing).
        defs: the definitions list the pattern will be lowered with.

    Returns:
        The pattern of the spans of any source (a placeholder, or their alternation).

    Raises:
        RequestError: no source has a span (all empty or whitespace only).
    """
    roots = []
    for text in sources:
        automaton = SubstringAutomaton(text)
        if automaton.is_empty():
            continue
        texts, root = automaton.definitions(len(defs), escape=str)
        defs.extend(texts)
        roots.append(root)
    if not roots:
        raise RequestError("copy_from has no span to copy (empty or whitespace only)")
    return roots[0] if len(roots) == 1 else "(?:" + "|".join(roots) + ")"


def intersect(defs: list[str], texts: list[str]) -> str:
    """Append ``texts`` to ``defs`` (mutated), each as a definition of its own, then their
    ``INTERSECT`` definition.

    Args:
        defs: the definitions list the pattern will be lowered with.
        texts: two or more regex texts (which may refer to earlier definitions).

    Returns:
        The placeholder of the intersection.
    """
    placeholders = []
    for text in texts:
        defs.append(text)
        placeholders.append(chr(PLACEHOLDER_BASE + len(defs) - 1))
    defs.append(INTERSECT + "".join(placeholders))
    return chr(PLACEHOLDER_BASE + len(defs) - 1)


def matches_nothing(
    pattern: str, defs: list[str], reusable: frozenset[int] | set[int] = frozenset()
) -> bool:
    """True when ``pattern`` (over the definitions ``defs``) matches no string, or when
    that is not decided within the term arena's budget (the caller then keeps its
    constraint without the copy).

    ``reusable``: indices of ``defs`` the same in every spec (``regex.reused``: lowered once
    per process, restored after).

    Raises:
        RegexError, UnsupportedRegexError: as ``regex.parse.lower``.
    """
    try:
        arena = TermArena()
        return arena.is_empty(lower(pattern, arena, definitions=defs, reusable=reusable))
    except GrammarTooComplexError:
        return True
