r"""JSON Schema ``pattern`` -> regex over the JSON-encoded string body.

A ``pattern`` constrains the decoded string value with search semantics (ECMA-262
``RegExp.test``); the output regex runs over the characters between the JSON
quotes. Each character class, of any size, is rewritten so that ``"``, ``\`` and
control characters appear in their escaped JSON form (one form per character: the
character itself, a short escape, ``\u00XX`` for the other controls), and a branch
that is not anchored with ``^`` or ``\A`` (``$`` or ``\Z``) gets any string content
before (after) it; ``$`` is the end of the string, as in ECMA-262 (Python's ``re``
also matches it before a final newline). ``\d``, ``\w`` and ``\s`` use ASCII semantics
(ECMA without the ``u`` flag, except that ``\s`` is ASCII whitespace only). Anchors
elsewhere than at the ends of a top-level alternative (groups at its ends opened) are
unsupported, as is ``(?i)``. The pattern is parsed with Python ``re`` syntax (by ``re``'s
parser, or past the depth it reads by ``regex.lower.plain_tree``), and the tree is
translated with an explicit stack: a pattern nests as deep as ``compile_regex`` takes.
"""

from __future__ import annotations

import re

from ...errors import GrammarTooComplexError, UnsupportedSchemaError
from ..regex.anchors import strip_end_anchors
from ..regex.escape import RESERVED_FROM, escape_class_char, escape_literal
from ..regex.lower import plain_tree
from ..regex.parse import MAX_NESTING, MAXREPEAT, RE_MAX_NESTING, _nesting, check_nesting, parse
from ..regex.parse import sre_constants as C
from ..regex.utf8 import valid_ranges

__all__ = ["pattern_to_string_body", "top_level_branches", "split_anchors", "JSON_CHAR"]

_MAX = 0x10FFFF
_SHORT_ESCAPES = {0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t", 0x22: '"', 0x5C: "\\"}
JSON_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
_CATEGORIES = {
    C.CATEGORY_DIGIT: [(0x30, 0x39)],
    C.CATEGORY_WORD: [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    C.CATEGORY_SPACE: [(0x09, 0x0D), (0x20, 0x20)],
}
_NEGATED = {
    C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT,
    C.CATEGORY_NOT_WORD: C.CATEGORY_WORD,
    C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE,
}


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, nxt = [], 0
    for lo, hi in sorted(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= _MAX:
        out.append((nxt, _MAX))
    return out


def _encoded_alternatives(ranges: list[tuple[int, int]], pointer: str) -> str:
    """Regex for one JSON-encoded character whose decoded value lies in ``ranges``."""
    plain: list[str] = []
    escapes: list[str] = []
    unicode_escaped: list[int] = []  # control characters written \\u00XX
    for lo, hi in ranges:
        for cp in range(lo, min(hi, 0x7F) + 1) if lo < 0x80 else ():
            if cp < 0x20 or cp in (0x22, 0x5C):
                esc = _SHORT_ESCAPES.get(cp)
                if esc:
                    escapes.append("\\\\" + escape_literal(esc))
                else:
                    unicode_escaped.append(cp)
        segments = []
        cur = max(lo, 0x20)
        for cut in (0x22, 0x5C):
            if cur <= cut <= hi:
                if cur <= cut - 1:
                    segments.append((cur, cut - 1))
                cur = cut + 1
        if cur <= hi:
            segments.append((cur, hi))
        plain.extend(segments)
    if unicode_escaped:  # one class per high hex digit, not one alternative per character
        groups = [
            f"{hi_digit}["
            f"{''.join(f'{cp & 15:x}' for cp in unicode_escaped if cp >> 4 == hi_digit)}]"
            for hi_digit in (0, 1)
            if any(cp >> 4 == hi_digit for cp in unicode_escaped)
        ]
        escapes.append(
            "\\\\u00" + (groups[0] if len(groups) == 1 else "(?:" + "|".join(groups) + ")")
        )
    plain = valid_ranges(plain)  # a lone surrogate has no UTF-8 form
    parts = ([_class(plain)] if plain else []) + escapes
    if not parts:
        raise UnsupportedSchemaError("pattern", pointer, "a character class that matches nothing")
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _class_text(ranges: list[tuple[int, int]]) -> str:
    return "".join(
        escape_class_char(a)
        if a == b and a < RESERVED_FROM
        else f"{escape_class_char(a)}-{escape_class_char(b)}"
        for a, b in ranges
    )


def _class(ranges: list[tuple[int, int]]) -> str:
    """A character class of ``ranges`` of any size, written as ranges (the regex stage
    splits them into UTF-8 byte sequences); written negated when that takes fewer ranges.
    Surrogates are left out: they have no UTF-8 encoding.
    """
    ranges = valid_ranges(ranges)
    rest = valid_ranges(_complement(ranges))
    if rest and len(rest) < len(ranges):
        return f"[^{_class_text(rest)}]"
    return f"[{_class_text(ranges)}]"


def _class_ranges(items, pointer: str) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    negate = False
    for op, av in items:
        if op == C.NEGATE:
            negate = True
        elif op == C.LITERAL:
            ranges.append((av, av))
        elif op == C.RANGE:
            ranges.append(av)
        elif op == C.CATEGORY:
            if av in _CATEGORIES:
                ranges.extend(_CATEGORIES[av])
            elif av in _NEGATED:
                ranges.extend(_complement(_CATEGORIES[_NEGATED[av]]))
            else:
                raise UnsupportedSchemaError("pattern", pointer, f"character category {av}")
        else:
            raise UnsupportedSchemaError("pattern", pointer, f"class item {op}")
    return _complement(ranges) if negate else sorted(ranges)


def _translate(items, pointer: str) -> str:
    """JSON-body regex of parse ``items`` (no anchors among them), without recursion: each
    group, alternation and repetition is a frame of an explicit stack, so a pattern nested
    as deep as ``plain_tree`` reads it (``MAX_NESTING``) is translated.

    Raises:
        UnsupportedSchemaError: an anchor, ``(?i)``, a construct with no automaton form, or
            a character class that matches nothing.
    """
    # frame: [alternatives (item lists), index of the current one, finished texts,
    #         parts of the current one, index of the next item, how the texts combine]
    root: list = [[items], 0, [], [], 0, None]
    stack = [root]
    while True:
        frame = stack[-1]
        seqs, k, done, parts, i, how = frame
        seq = seqs[k]
        if i == len(seq):
            done.append("".join(parts))
            if k + 1 < len(seqs):
                frame[1:5] = [k + 1, done, [], 0]
                continue
            stack.pop()
            text = "|".join(done)
            if how is None:
                return text
            if how == "|" or not _one_group(seq):  # (a lone group is one already)
                text = "(?:" + text + ")"
            if how not in ("(", "|"):
                text += how  # a repetition's quantifier
            stack[-1][3].append(text)
            continue
        frame[4] = i + 1
        op, av = seq[i]
        if op == C.LITERAL:
            parts.append(_encoded_alternatives([(av, av)], pointer))
        elif op == C.NOT_LITERAL:
            parts.append(_encoded_alternatives(_complement([(av, av)]), pointer))
        elif op == C.ANY:
            parts.append(_encoded_alternatives(_complement([(0x0A, 0x0A)]), pointer))
        elif op == C.IN:
            parts.append(_encoded_alternatives(_class_ranges(av, pointer), pointer))
        elif op == C.SUBPATTERN:
            if av[1] & re.IGNORECASE:
                raise UnsupportedSchemaError("pattern", pointer, _NO_IGNORECASE)
            stack.append([[av[-1]], 0, [], [], 0, "("])
        elif op == C.BRANCH:
            stack.append([list(av[1]), 0, [], [], 0, "|"])
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) or op == getattr(C, "POSSESSIVE_REPEAT", None):
            lo, hi, sub = av
            quantifier = "{%d,}" % lo if hi == MAXREPEAT else "{%d,%d}" % (lo, hi)
            stack.append([[sub], 0, [], [], 0, quantifier])
        elif op == C.AT:
            raise UnsupportedSchemaError(
                "pattern",
                pointer,
                "an anchor (^, $, \\b) elsewhere than at the ends of a top-level alternative "
                "is not supported",
            )
        else:
            what = _NOT_REGULAR.get(str(op), f"the regex construct {op}")
            raise UnsupportedSchemaError("pattern", pointer, f"{what} has no finite-automaton form")


def _one_group(seq: list) -> bool:
    """True when the items ``seq`` of a group or repetition translate to one parenthesised
    group already (a lone group or alternation): no group of its own is needed.
    """
    return len(seq) == 1 and seq[0][0] in (C.SUBPATTERN, C.BRANCH)


# sre opcodes _translate meets that no automaton can express, in words
_NOT_REGULAR = {
    "ASSERT": "lookaround",
    "ASSERT_NOT": "lookaround",
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group",
    "ATOMIC_GROUP": "an atomic group",
}


_NO_IGNORECASE = "case-insensitive matching ((?i), not ECMA-262 syntax) is not supported"
_MAX_OPENED = 4096  # branches ``_open_ends`` may make of one pattern
_STARTS = (C.AT_BEGINNING, C.AT_BEGINNING_STRING)  # ^ and \A
_ENDS = (C.AT_END, C.AT_END_STRING)  # $ and \Z


def top_level_branches(pattern: str, pointer: str) -> list[list]:
    """The parsed alternatives of ``pattern``'s top-level alternation (one item: no alternation).

    ``re``'s parser factors a common prefix out of alternatives (``^a|^b$`` parses as
    ``^(?:a|b$)``); where an alternative of such a final alternation ends with an anchor,
    the prefix is put back into each alternative (the same language), so that every end
    anchor is at the end of a branch (see ``split_anchors``). Where the text has anchors
    elsewhere too (``(^a$)|(^b)``), the groups and alternations at the ends of each branch
    are opened (``_open_ends``).

    Raises:
        GrammarTooComplexError: the pattern nests parentheses too deep (``_parse``).
        UnsupportedSchemaError: (keyword ``pattern``) the pattern does not parse, has
            anchors under the multiline flag (``(?m)``: ``^`` would be any line's start)
            or is case-insensitive (``(?i)``).
    """
    tree, flags = _parse(pattern, pointer)
    if flags & re.IGNORECASE:
        raise UnsupportedSchemaError("pattern", pointer, f"{pattern!r}: {_NO_IGNORECASE}")
    opened = _open_ends(tree) if strip_end_anchors(pattern)[1] is not None else None
    if opened is not None:
        branches = opened
    elif len(tree) == 1 and tree[0][0] == C.BRANCH:
        branches = [list(b) for b in tree[0][1][1]]
    elif tree and tree[-1][0] == C.BRANCH and any(b and b[-1][0] == C.AT for b in tree[-1][1][1]):
        branches = [tree[:-1] + list(b) for b in tree[-1][1][1]]
    else:
        branches = [tree]
    if flags & re.MULTILINE and any(op == C.AT for b in branches for op, _ in b[:1] + b[-1:]):
        raise UnsupportedSchemaError("pattern", pointer, f"{pattern!r}: anchors under (?m)")
    return branches


def _parse(pattern: str, pointer: str) -> tuple[list, int]:
    """``(parse items, global flags)`` of ``pattern``: ``re``'s parser, or where the
    parentheses nest deeper than it reads (``RE_MAX_NESTING``), ``plain_tree`` (no
    recursion, plain syntax and end anchors, up to ``MAX_NESTING`` as ``compile_regex``).

    Raises:
        GrammarTooComplexError: nested past ``MAX_NESTING``, or past ``RE_MAX_NESTING``
            with syntax only ``re`` reads (``compile_regex``'s errors, word for word).
        UnsupportedSchemaError: (keyword ``pattern``) the pattern does not parse.
    """
    depth = _nesting(pattern) if "(" in pattern else 0
    if depth > RE_MAX_NESTING:
        check_nesting(pattern, depth=depth)
        tree = plain_tree(pattern, MAX_NESTING)
        if tree is not None:
            return tree, 0
    try:
        parsed = parse(pattern)
    except GrammarTooComplexError:
        raise
    except ValueError as exc:
        raise UnsupportedSchemaError("pattern", pointer, f"{pattern[:80]!r}: {exc}") from exc
    return list(parsed), parsed.state.flags


def _open_ends(tree: list) -> list[list] | None:
    """``tree`` as alternatives whose first and last items are no alternation and no plain
    group (``(A|B)C`` -> ``AC``, ``BC``; the same language); None past ``_MAX_OPENED``.
    """
    out: list[list] = []
    todo = [list(tree)]
    while todo:
        if len(out) + len(todo) > _MAX_OPENED:
            return None
        s = todo.pop()
        for end in (0, -1) if s else ():
            op, av = s[end]
            if op == C.SUBPATTERN and not av[1] and not av[2]:  # a group without flags
                parts = [list(av[-1])]
            elif op == C.BRANCH:
                parts = [list(b) for b in av[1]]
            else:
                continue
            todo += reversed([p + s[1:] if end == 0 else s[:-1] + p for p in parts])
            break
        else:
            out.append(s)
    return out


def split_anchors(branch: list) -> tuple[bool, list, bool]:
    r"""``(anchored at the start, the items between, anchored at the end)`` of one branch of
    ``top_level_branches``: leading ``^``/``\A`` and trailing ``$``/``\Z`` items removed.
    """
    i, j = 0, len(branch)
    while i < j and branch[i][0] == C.AT and branch[i][1] in _STARTS:
        i += 1
    while j > i and branch[j - 1][0] == C.AT and branch[j - 1][1] in _ENDS:
        j -= 1
    return i > 0, branch[i:j], j < len(branch)


def pattern_to_string_body(pattern: str, pointer: str) -> str:
    """Regex for the JSON-encoded body (between the quotes) of strings matching ``pattern``.

    Raises:
        GrammarTooComplexError: the pattern nests parentheses past ``MAX_NESTING`` (or past
            ``RE_MAX_NESTING`` with syntax only ``re`` reads), as ``compile_regex``.
        UnsupportedSchemaError: (keyword ``pattern``) unparsable pattern or a feature
            with no finite-automaton translation; the message names the pattern.
    """
    branches = top_level_branches(pattern, pointer)
    any_text = JSON_CHAR + "*"
    out = []
    for branch in branches:
        start, core, end = split_anchors(branch)
        try:
            body = _translate(core, pointer)
        except UnsupportedSchemaError as exc:
            raise UnsupportedSchemaError("pattern", pointer, f"{pattern!r}: {exc.detail}") from exc
        out.append(("" if start else any_text) + body + ("" if end else any_text))
    return out[0] if len(out) == 1 else "(?:" + "|".join(out) + ")"
