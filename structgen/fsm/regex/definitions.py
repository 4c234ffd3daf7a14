"""Regex texts with shared definitions: the placeholder code points and writing them out.

A pattern may refer to *definitions* (regex texts converted once and shared, e.g. the
expansions of a JSON Schema ``$ref``, see ``json_schema.refs``) by placeholders: the raw
code point ``PLACEHOLDER_BASE + i`` stands for ``definitions[i]``, and a definition only
refers to earlier ones. ``parse.lower`` turns the definitions into arena terms in order
and every placeholder into its term, so the automaton shares them; ``expand_shared``
writes everything out as one regex text instead.

Raw code points at or above ``escape.RESERVED_FROM`` never appear in pattern text
otherwise: literal text in that range is always written as escapes.
"""

from __future__ import annotations

from ...errors import GrammarTooComplexError

__all__ = ["PLACEHOLDER_BASE", "MAX_DEFINITIONS", "MAX_EXPANDED_CHARS", "expand_shared"]

PLACEHOLDER_BASE = 0xF0000
MAX_DEFINITIONS = 0xFFFFE - PLACEHOLDER_BASE
MAX_EXPANDED_CHARS = 20_000_000


def expand_shared(pattern: str, definitions: list[str], max_chars: int = MAX_EXPANDED_CHARS) -> str:
    """``pattern`` with every placeholder replaced by its definition (one regex text).

    Raises:
        GrammarTooComplexError: the text would exceed ``max_chars`` (deep recursion with
            several references per level grows exponentially when written out;
            ``compile_json_schema`` never needs this text).
    """
    if not definitions:
        return pattern
    end = PLACEHOLDER_BASE + len(definitions)
    expanded: list[str] = []
    for text in definitions:  # a definition only refers to earlier ones
        expanded.append(_substitute(text, expanded, end, max_chars))
    return _substitute(pattern, expanded, end, max_chars)


def _substitute(pattern: str, expanded: list[str], end: int, max_chars: int) -> str:
    out, size = [], 0
    for ch in pattern:
        cp = ord(ch)
        piece = (
            "(?:" + expanded[cp - PLACEHOLDER_BASE] + ")" if PLACEHOLDER_BASE <= cp < end else ch
        )
        size += len(piece)
        if size > max_chars:
            raise GrammarTooComplexError(
                f"the schema's regex text exceeds {max_chars} characters "
                "(recursion written out); lower max_recursion_depth"
            )
        out.append(piece)
    return "".join(out)
