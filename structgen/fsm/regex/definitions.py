"""Regex texts with shared definitions: the placeholder code points and writing them out.

A pattern may refer to *definitions* (regex texts converted once and shared, e.g. the
expansions of a JSON Schema ``$ref``, see ``json_schema.refs``) by placeholders: the raw
code point ``PLACEHOLDER_BASE + i`` stands for ``definitions[i]``, and a definition only
refers to earlier ones. ``parse.lower`` turns the definitions into arena terms in order
and every placeholder into its term, so the automaton shares them; ``expand_shared``
writes everything out as one regex text instead.

A definition may also be a *boolean definition*, which no regex text can write: the
raw code point ``INTERSECT`` followed by two or more placeholders is the intersection
of those definitions, ``COMPLEMENT`` followed by one placeholder its complement over all
byte strings (``terms`` ``AND`` / ``NOT``; the JSON Schema converter's ``oneOf``, ``not``
and ``if``/``then``/``else``, ``json_schema.boolean_ops``). Only definitions are read
this way, never a pattern; ``expand_shared`` cannot write them out and raises. Likewise
``RAW_BYTES`` followed by code points below 256 is exactly those bytes, which need not be
UTF-8 (a special token's reserved bytes, ``index.vocabulary.special_token_marker``).

Raw code points at or above ``escape.RESERVED_FROM`` never appear in pattern text
otherwise: literal text in that range is always written as escapes (so neither a user's
``pattern`` nor a literal can produce a placeholder or a boolean marker).
"""

from __future__ import annotations

import re

from ...errors import GrammarTooComplexError, UnsupportedRegexError

__all__ = [
    "PLACEHOLDER_BASE",
    "MAX_DEFINITIONS",
    "MAX_EXPANDED_CHARS",
    "INTERSECT",
    "COMPLEMENT",
    "RAW_BYTES",
    "raw_bytes",
    "boolean_operands",
    "placeholder_indices",
    "renumber_placeholders",
    "renumber_many",
    "expand_shared",
]

PLACEHOLDER_BASE = 0xF0000
MAX_DEFINITIONS = 0xFFFFD - PLACEHOLDER_BASE
MAX_EXPANDED_CHARS = 20_000_000
INTERSECT = chr(0xFFFFE)  # a definition "INTERSECT p1 p2 ...": the intersection
COMPLEMENT = chr(0xFFFFF)  # a definition "COMPLEMENT p": the complement
RAW_BYTES = chr(0xFFFFD)  # a definition "RAW_BYTES c1 c2 ...": the bytes ord(c1), ord(c2), ...
_AT_OR_PAST_BASE = re.compile(f"[{chr(PLACEHOLDER_BASE)}-{chr(0x10FFFF)}]")
_BASE_CHAR = chr(PLACEHOLDER_BASE)


def placeholder_indices(text: str, num_defined: int) -> set[int]:
    """The definitions ``i`` with ``0 <= i < num_defined`` whose placeholder ``text`` holds
    (what ``{ord(c) - PLACEHOLDER_BASE for c in text}`` keeps of that range, without a
    Python step per character: an ASCII text answers at once). Raises: never.
    """
    if text.isascii():
        return set()
    if _few_probes(num_defined, text):  # each placeholder looked for by one C-level search
        return {i for i in range(num_defined) if chr(PLACEHOLDER_BASE + i) in text}
    found = {ord(c) - PLACEHOLDER_BASE for c in set(_AT_OR_PAST_BASE.findall(text))}
    return {i for i in found if i < num_defined}


# ``re``'s scan for code points at or past the base costs ~30 ns per character of a text that
# holds one (a 4-byte-per-character string); ``str.__contains__`` of one code point ~0.3 ns
# per character plus ~0.15 us per call: up to ``_MIN_PROBES`` probes, plus one per
# ``_CHARS_PER_PROBE`` characters, and never more than ``_MAX_PROBES``, the probes are cheaper
_MIN_PROBES = 8
_CHARS_PER_PROBE = 8
_MAX_PROBES = 48


def _few_probes(num_probes: int, text: str) -> bool:
    """True when ``num_probes`` searches of ``text`` for one code point each cost less than
    one ``_AT_OR_PAST_BASE`` scan of it (``num_probes <= min(_MAX_PROBES, _MIN_PROBES +
    len(text) // _CHARS_PER_PROBE)``, the common few at once). Raises: never.
    """
    return num_probes <= _MIN_PROBES or (
        num_probes <= _MAX_PROBES and num_probes <= _MIN_PROBES + len(text) // _CHARS_PER_PROBE
    )


_MAX_REPLACED = 16  # placeholders moved by ``str.replace`` (past it: one ``translate``)


def renumber_placeholders(text: str, table: dict[int, int]) -> str:
    """``text.translate(table)`` for a table of placeholder code points (old -> new), the
    same string, without ``translate``'s dictionary lookup per character of a non-ASCII
    text: an ASCII text has no placeholder, and each placeholder the text holds that moves
    is one ``str.replace`` when no new code point is one the text holds (replacements in any
    order then give ``translate``'s result); otherwise, or past ``_MAX_REPLACED`` moves, it
    is ``translate``. Raises: never.
    """
    if text.isascii():
        return text
    if _few_probes(len(table), text):  # the table's code points looked for one by one
        moves = []
        clash = False  # a new code point held by the text (``present`` below would hold it)
        for old, new in table.items():  # (a loop: no comprehension frame for a few moves)
            if new is None or new == old or not PLACEHOLDER_BASE <= old <= 0x10FFFF:
                continue
            c = chr(old)
            if c in text:
                n = chr(new)
                moves.append((c, n))
                if not clash and n >= _BASE_CHAR and n in text:
                    clash = True
        if not moves:
            return text
    else:
        present = set(_AT_OR_PAST_BASE.findall(text))
        moves = []
        for c in present:
            new = table.get(ord(c))
            if new is not None and new != ord(c):
                moves.append((c, chr(new)))
        if not moves:
            return text
        clash = any(new in present for _, new in moves)
    if len(moves) > _MAX_REPLACED or clash:
        return text.translate(table)
    for old, new in moves:
        text = text.replace(old, new)
    return text


_MAX_TABLE_SPAN = 0x20000  # renumber_many: widest key range looked up in one table
# renumber_many: at most this many texts go one by one (``renumber_placeholders``): below
# it the array pass's fixed cost exceeds theirs (benchmarks/RESULTS.md, session 27 a9)
_FEW_TEXTS = 48


def renumber_many(texts: list[str] | tuple[str, ...], table: dict[int, int]) -> list[str]:
    """``[renumber_placeholders(t, table) for t in texts]`` (each ``t.translate(table)``)
    in one pass over all the texts at once: their code points as one ``uint32`` array, the
    table as a lookup array over its keys' range; for the thousands of short texts a
    bounded string body (``json_schema.string_length``) moves at a time. Up to
    ``_FEW_TEXTS`` texts (the any-value chain's run key, ``reused.run_key``) are renumbered
    one by one instead.

    Args:
        texts: regex texts.
        table: code point -> code point (ints).

    Returns:
        The renumbered texts, in order (each the same length as before). Raises: never.
    """
    if len(texts) <= _FEW_TEXTS:
        return [renumber_placeholders(t, table) for t in texts]
    joined = "".join(texts)
    if not table or joined.isascii():
        return list(texts)
    lo, hi = min(table), max(table)
    if hi - lo > _MAX_TABLE_SPAN:
        return [renumber_placeholders(t, table) for t in texts]
    import numpy as np

    codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    inside = (codes >= lo) & (codes <= hi)
    if not inside.any():
        return list(texts)
    lookup = np.arange(lo, hi + 1, dtype=np.uint32)
    lookup[np.fromiter(table, dtype=np.int64, count=len(table)) - lo] = list(table.values())
    codes = codes.copy()
    codes[inside] = lookup[codes[inside] - lo]
    out = codes.tobytes().decode("utf-32-le")
    result = []
    at = 0
    for text in texts:
        result.append(out[at : at + len(text)])
        at += len(text)
    return result


def raw_bytes(text: str) -> bytes | None:
    """The bytes of a ``RAW_BYTES`` definition, None for any other text.

    Raises:
        UnsupportedRegexError: the marker followed by nothing or by a code point >= 256.
    """
    if not text or text[0] != RAW_BYTES:
        return None
    if len(text) < 2 or any(ord(c) > 255 for c in text[1:]):
        raise UnsupportedRegexError("a malformed raw-bytes definition")
    return text[1:].encode("latin-1")


def boolean_operands(text: str, num_defined: int) -> tuple[str, list[int]] | None:
    """``(marker, definition indices)`` of a boolean definition, None for a regex text.

    Args:
        text: a definition.
        num_defined: how many definitions precede it (operands must be among them).

    Raises:
        UnsupportedRegexError: a marker followed by anything but placeholders of earlier
            definitions (two or more for ``INTERSECT``, one for ``COMPLEMENT``).
    """
    if not text or text[0] not in (INTERSECT, COMPLEMENT):
        return None
    ops = [ord(c) - PLACEHOLDER_BASE for c in text[1:]]
    arity_ok = len(ops) >= 2 if text[0] == INTERSECT else len(ops) == 1
    if not arity_ok or any(not 0 <= i < num_defined for i in ops):
        raise UnsupportedRegexError("a malformed intersection or complement definition")
    return text[0], ops


def expand_shared(pattern: str, definitions: list[str], max_chars: int = MAX_EXPANDED_CHARS) -> str:
    """``pattern`` with every placeholder replaced by its definition (one regex text).

    Raises:
        GrammarTooComplexError: the text would exceed ``max_chars`` (deep recursion with
            several references per level grows exponentially when written out;
            ``compile_json_schema`` never needs this text).
        UnsupportedRegexError: a boolean definition (intersection or complement), which
            has no regex text.
    """
    if not definitions:
        return pattern
    end = PLACEHOLDER_BASE + len(definitions)
    expanded: list[str] = []
    if any(
        boolean_operands(text, i) is not None or raw_bytes(text) is not None
        for i, text in enumerate(definitions)
    ):
        raise UnsupportedRegexError(
            "the grammar intersects or complements languages (oneOf, not, if/then/else),"
            " which regex text cannot write; use the compiled grammar"
        )
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
