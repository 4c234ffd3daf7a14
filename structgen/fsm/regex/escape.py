"""Literal text and single code points written as regex syntax the fsm reads.

Every constraint lowered to a regex (choices, JSON Schema property names and values,
templates, token healing) writes its literal text through these two functions, so that
the text reads back as exactly itself both in Python ``re`` and in the fsm's parser.

Code points at or above ``RESERVED_FROM`` are always written as escapes, never raw: raw
ones in a pattern text are the placeholders of shared subpatterns (``definitions``).
"""

from __future__ import annotations

import re

__all__ = ["RESERVED_FROM", "escape_class_char", "escape_literal"]

RESERVED_FROM = 0xF0000
# text escape_literal leaves as it is: no metacharacter, control character or reserved code point
_PLAIN_LITERAL = re.compile("[^.^$*+?{}\\[\\]\\\\|()\x00-\x1f\x7f\U000f0000-\U0010ffff]*")


def escape_class_char(cp: int) -> str:
    """One code point written safely inside a regex character class.

    Args:
        cp: the code point (0 to 0x10FFFF).

    Returns:
        Text that stands for exactly ``cp`` between ``[`` and ``]`` (or as a range end).
    """
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    if cp >= RESERVED_FROM:
        return f"\\U{cp:08x}"
    ch = chr(cp)
    return "\\" + ch if ch in "\\]^-[" else ch


def escape_literal(text: str) -> str:
    """Regex-escape ``text``: the returned pattern matches exactly ``text``.

    Args:
        text: any string (control characters and reserved code points included).

    Returns:
        A pattern without groups or anchors, safe to concatenate with other patterns.
    """
    if _PLAIN_LITERAL.fullmatch(text):
        return text  # most property names: nothing to escape
    out = []
    for ch in text:
        if ch in ".^$*+?{}[]\\|()":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) >= RESERVED_FROM:  # a range, so it never parses as a placeholder literal
            esc = escape_class_char(ord(ch))
            out.append(f"[{esc}-{esc}]")
        else:
            out.append(ch)
    return "".join(out)
