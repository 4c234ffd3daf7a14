r"""One-pass lowering of plain regex texts to arena terms (the fast path of ``parse.lower``).

The JSON Schema converter writes long patterns that repeat the same groups many times
(the JSON string body after every key, an array's item before and after ``(?:,...)*``,
a format's expression in every field that uses it). ``re._parser`` plus the tree walk
see every copy, character by character; here a C-speed tokenizer splits
the text, each parenthesised group's text is looked up in a memo shared by the pattern
and its definitions (one arena, one placeholder binding), so each distinct group is
lowered once, and the terms come from ``parse._Lowering``'s own class and literal code.
The token loop runs in C where the extension is built (``csrc/regexlower.c``: the same
terms in the same order; the Python loop here is its fallback and reference), and the
terms of escapes, classes and ``.`` are kept across compiles as recipes
(``recipes``): the JSON string class is ~30 terms built from UTF-8 sequences.

Only plain syntax is taken: literals, the escapes ``\xHH \uHHHH \UHHHHHHHH \t \n
\r \f \v \a \d \D \w \W \s \S`` and escaped punctuation, classes (ranges,
negation, those escapes), ``.``, ``(...)`` / ``(?:...)``, ``|`` and the quantifiers
``* + ? {m} {m,} {m,n} {,n}`` (lazy or not). Anything else (flags, lookaround, anchors,
backreferences, possessive or repeated quantifiers, a lone ``{``, nested-set warnings,
unbalanced parentheses, nesting past ``MAX_NESTING``, placeholders inside a class)
returns None and the caller parses with ``re``, which gives its usual term or error.
Where both accept a text the languages are equal (the terms may differ where ``re``
factors a common prefix out of alternatives).
"""

from __future__ import annotations

import re

try:  # Python >= 3.11
    import re._constants as C
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore[no-redef]

from .definitions import PLACEHOLDER_BASE
from .escape import escape_class_char
from .recipes import export_term, import_term
from .terms import (
    _SPINE_MAX,
    ALT,
    BYTES,
    CONCAT,
    EMPTY,
    EPS,
    INF,
    MAX_DEPTH,
    REPEAT,
    UNTIL,
    byte_range_mask,
)

try:  # optional C extension built by setup.py (csrc/regexlower.c)
    from . import _regexlower as _EXT
except ImportError:  # pragma: no cover - exercised when the extension is missing
    _EXT = None
# the C path hard-codes these (csrc/regexlower.c)
assert (EMPTY, EPS, BYTES, CONCAT, ALT, REPEAT, UNTIL, INF, MAX_DEPTH, _SPINE_MAX) == (
    (0, 1, 2, 3, 4, 5, 6, -1, 100_000, 256)
)
assert PLACEHOLDER_BASE == 0xF0000

__all__ = [
    "fast_lower",
    "plain_tree",
    "HAVE_C_LOWER",
    "use_extension",
    "ascii_class",
    "key_trie_text",
]

HAVE_C_LOWER = _EXT is not None  # the extension is built
_c = _EXT  # the C token loop in use, None: the Python loop (use_extension)


def use_extension(enabled: bool) -> None:
    """Lower in C (the default, where built) or in Python, for the process; ``compile_*``
    applies ``structgen.env``'s ``regexlower`` setting. Raises: never.
    """
    global _c
    _c = _EXT if enabled else None


_MAXREPEAT = 4294967295  # sre's MAXREPEAT: counts at or past it are re's errors
_TOKEN = re.compile(
    r"""
 (\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[^0-9A-Za-z]|[tnrfvadDwWsS]))  # 1 escape
|\[(\^?)(\]?(?:[^\]\\\[]|\\[\s\S])*)\]                       # 2 negate, 3 class body
|(\((?:\?:)?)                                                 # 4 group open
|(\))                                                         # 5 close
|(\|)                                                         # 6 alternation
# quantifier: 7 op, 8 lo, 9 comma, 10 hi, 11 hi-only, 12 lazy
|(?:([*+?])|\{(?:([0-9]+)(?:(,)([0-9]*))?|,([0-9]+))\})(\??)
|(\.)                                                         # 13 any
|([^\\\[()|*+?{.^$]+)                                         # 14 literal run
""",
    re.VERBOSE,
)
_CLASS_ITEM = re.compile(
    r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([^0-9A-Za-z])|([tnrfva])|([dDwWsS]))"
    r"|([^\\])"
)
_CONTROL = {"t": 9, "n": 10, "r": 13, "f": 12, "v": 11, "a": 7}
_CATEGORY_ESCAPES = "dDwWsS"
_NESTED_SET = ("--", "&&", "~~", "||")  # re warns (FutureWarning) on these in a class
_CATEGORIES = {
    "d": C.CATEGORY_DIGIT,
    "D": C.CATEGORY_NOT_DIGIT,
    "w": C.CATEGORY_WORD,
    "W": C.CATEGORY_NOT_WORD,
    "s": C.CATEGORY_SPACE,
    "S": C.CATEGORY_NOT_SPACE,
}
_PLACEHOLDER_CHR = chr(PLACEHOLDER_BASE)
_REPEATS = {"*": (0, INF), "+": (1, INF), "?": (0, 1)}
# escape / class / ``.`` token text -> its term's recipe (``recipes``; EMPTY or EPS as
# such), shared by every compile of the process; emptied when full
_ATOM_RECIPES: dict[str, tuple | int] = {}
_ATOM_RECIPES_MAX = 4096


_ASCII_CLASS_CHARS = tuple(escape_class_char(code) for code in range(0x80))  # ascii_class


def ascii_class(mask: int) -> str:
    r"""The class token of the ASCII bytes in ``mask`` (bit ``b``: byte ``b``, 0..0x7F): its
    runs of set bits as ranges ``a-b`` (a run of one as the code alone), the class's own
    syntax escaped (``\``, ``]``, ``^``, ``-``, ``[``), control codes and 0x7F as ``\xHH``;
    e.g. ``[ -!#-\[\]-\x7f]``.

    The token's term (one byte set) goes into the atom recipes as it is written, so a
    lowering takes the class from there instead of reading the text again
    (``_ascii_class_mask`` reads the same mask back: ``tests/fsm/regex/test_lower.py``).

    Raises:
        ValueError: ``mask`` is empty or has a bit at 0x80 or above.
    """
    if mask <= 0 or mask >> 0x80:
        raise ValueError(f"ascii_class needs a nonempty mask of bytes below 0x80, got {mask:#x}")
    token = _c.ascii_class_text(mask) if _c is not None else _ascii_class_text(mask)
    _keep_class(token, mask)
    return token


def _keep_class(token: str, mask: int) -> None:
    """Keep ``ascii_class``'s ``token`` (of byte set ``mask``) as an atom recipe."""
    if token not in _ATOM_RECIPES:
        if len(_ATOM_RECIPES) >= _ATOM_RECIPES_MAX:
            _ATOM_RECIPES.clear()
        _ATOM_RECIPES[token] = ((BYTES, mask),)  # export_term of arena.byteset(mask)


def key_trie_text(names: tuple[str, ...], tail: str, other: str) -> str | None:
    """``json_schema.objects``' key trie text (the canonically spelled keys other than
    ``names``, ``tail`` after a unit leaving the trie, ``other`` for a non-ASCII unit or an
    escape) written in C (``csrc/regexlower.c``'s ``key_trie_text``), its node classes kept
    as atom recipes in the order ``ascii_class`` keeps them on the Python path; None where
    the C path is off or a name holds a character other than printable ASCII (the quote and
    backslash excluded: units of their own) or is longer than 512 (the caller writes it).
    Raises: never.
    """
    if _c is None:
        return None
    done = _c.key_trie_text(names, tail, other)
    if done is None:
        return None
    text, classes = done
    for token, mask in classes:
        _keep_class(token, mask)
    return text


def _ascii_class_text(mask: int) -> str:
    """``ascii_class``'s token of a nonempty ``mask`` of bytes below 0x80, in Python (the
    reference of ``csrc/regexlower.c``'s ``ascii_class_text``). Raises: never.
    """
    parts, rest = [], mask
    while rest:
        code = (rest & -rest).bit_length() - 1  # the lowest set bit starts a run
        run = rest >> code
        end = code + ((run + 1) & ~run).bit_length() - 2  # its last set bit
        text = _ASCII_CLASS_CHARS[code]
        parts.append(text if end == code else text + "-" + _ASCII_CLASS_CHARS[end])
        rest = run >> (end + 1 - code) << (end + 1)
    return "[" + "".join(parts) + "]"


class _Bail(Exception):
    """The text uses syntax this module leaves to ``re``."""


def fast_lower(
    text: str, lowering, memo: dict[str, int], max_nesting: int, use_c: bool = True
) -> int | None:
    """The term of ``text`` (fullmatch), or None when ``re`` must parse it.

    Args:
        text: the regex (placeholders as in ``parse.lower``).
        lowering: the ``parse._Lowering`` of this text (arena, placeholders, classes, budget).
        memo: text of a group, literal run, escape or class -> term (for a group without ``|``
            not under a quantifier: the tuple of its sequence items, literal bytes or terms),
            shared by every text lowered with the same placeholders (the keys cannot collide:
            each kind starts differently).
        max_nesting: deepest group nesting taken here (deeper: re's path and its error).
        use_c: take the C token loop when it is built (``csrc/regexlower.c``: the same terms,
            in the same order, as the Python loop here); False: the Python loop.

    Raises:
        GrammarTooComplexError: the arena's or the lowering's budget is exceeded.
    """
    if use_c and _c is not None:
        try:
            return _c.lower(
                text,
                _Parser(text, (), {}, lowering, memo),
                memo,
                max_nesting,
                lowering.arena,
                lowering,
                _ATOM_RECIPES,
            )
        except _Bail:
            return None
    toks = list(_TOKEN.finditer(text))
    try:
        close = _match_groups(toks, len(text), max_nesting)
        return _Parser(text, toks, close, lowering, memo).run()
    except _Bail:
        return None


# the plain tokens plus the anchors ``^ $ \A \Z`` (group 15), for ``plain_tree``
_TREE_TOKEN = re.compile(_TOKEN.pattern + r"|(\^|\$|\\[AZ])", re.VERBOSE)
_ANCHORS = {
    "^": C.AT_BEGINNING,
    "$": C.AT_END,
    "\\A": C.AT_BEGINNING_STRING,
    "\\Z": C.AT_END_STRING,
}


def plain_tree(text: str, max_nesting: int) -> list | None:
    r"""``re``'s parse tree of a plain-syntax ``text`` (this module's syntax plus the anchors
    ``^ $ \A \Z`` as ``AT`` items), read without recursion; None where ``re`` must parse it.

    The items have ``re._parser``'s shapes (``LITERAL``, ``ANY``, ``IN``, ``SUBPATTERN``
    ``(None, 0, 0, items)``, ``BRANCH`` ``(None, alternatives)``, ``MAX_REPEAT`` /
    ``MIN_REPEAT`` ``(lo, hi, [item])`` with ``MAXREPEAT`` for no bound, ``AT``), without
    ``re``'s rewrites (common prefixes of alternatives are not factored out, single
    characters are not merged into classes): the same language. It serves texts deeper
    than ``re``'s recursive parser reads (``parse.RE_MAX_NESTING``), up to ``max_nesting``.

    Raises:
        never (None: syntax left to ``re``, unbalanced parentheses, nesting past
        ``max_nesting``).
    """
    toks = list(_TREE_TOKEN.finditer(text))
    try:
        _match_groups(toks, len(text), max_nesting)
        frames: list[tuple[list, list]] = []  # (alternatives, items) of each open group
        alts: list[list] = []
        items: list[tuple] = []
        quantifiable = False
        for m in toks:
            kind = m.lastindex
            if kind == 14:
                items.extend((C.LITERAL, ord(c)) for c in m.group(14))
            elif kind == 4:
                frames.append((alts, items))
                alts, items = [], []
            elif kind == 5:
                inner = [(C.BRANCH, (None, alts + [items]))] if alts else items
                alts, items = frames.pop()
                items.append((C.SUBPATTERN, (None, 0, 0, inner)))
            elif kind == 6:
                alts.append(items)
                items = []
            elif kind == 12:
                if not quantifiable:
                    raise _Bail  # nothing to repeat, or a repeated repeat
                lo, hi = _bounds(m)
                op = C.MIN_REPEAT if m.group(12) else C.MAX_REPEAT
                items.append((op, (lo, _MAXREPEAT if hi == INF else hi, [items.pop()])))
            elif kind == 15:
                items.append((C.AT, _ANCHORS[m.group(15)]))
            elif kind == 13:
                items.append((C.ANY, None))
            elif kind == 1:
                esc = m.group(1)
                if esc[1] in _CATEGORY_ESCAPES:
                    items.append((C.IN, [(C.CATEGORY, _CATEGORIES[esc[1]])]))
                else:
                    items.append((C.LITERAL, _escape_code(esc)))
            else:
                items.append((C.IN, _class_items(m.group(2) == "^", m.group(3))))
            quantifiable = kind in (1, 3, 5, 13, 14)
    except _Bail:
        return None
    return [(C.BRANCH, (None, alts + [items]))] if alts else items


def _match_groups(toks, length: int, max_nesting: int) -> dict[int, int]:
    """Token index of each group's ``(`` -> index of its ``)``.

    Raises:
        _Bail: characters no token takes (syntax for re: the tokens of a text it can take
            cover it end to end), unbalanced parentheses, nesting past ``max_nesting``.
    """
    close: dict[int, int] = {}
    stack: list[int] = []
    pos = 0
    for i, m in enumerate(toks):
        start, end = m.span()
        if start != pos:
            raise _Bail
        pos = end
        kind = m.lastindex
        if kind == 4:
            stack.append(i)
            if len(stack) > max_nesting:
                raise _Bail
        elif kind == 5:
            if not stack:
                raise _Bail
            close[stack.pop()] = i
    if stack or pos != length:
        raise _Bail
    return close


class _Parser:
    """The token loop of one text: a stack of open groups, each with its finished
    alternatives and the items of the current one.
    """

    def __init__(
        self, text: str, toks, close: dict[int, int], lowering, memo: dict[str, int]
    ) -> None:
        self.text, self.toks, self.close = text, toks, close
        self.low, self.arena, self.memo = lowering, lowering.arena, memo

    def run(self) -> int:
        arena, toks, low = self.arena, self.toks, self.low
        frames: list[tuple[list[int], list[int], int]] = []  # (alternatives, items, open index)
        alts: list[int] = []
        items: list[int] = []
        quantifiable = False
        i, n = 0, len(toks)
        while i < n:
            m = toks[i]
            low._tick()
            kind = m.lastindex
            if kind == 14:  # literal run; a quantifier after it takes its last character
                run = m.group(14)
                if i + 1 < n and toks[i + 1].lastindex == 12:
                    if len(run) > 1:
                        items.extend(self._literal_items(run[:-1]))
                    items.append(self._literal(run[-1]))  # the quantifier's atom: a term
                else:
                    items.extend(self._literal_items(run))
                quantifiable = True
            elif kind == 4:
                j = self.close[i]
                key = self.text[m.start() : toks[j].end()]
                hit = self.memo.get(key)
                if hit is not None:
                    quantified = j + 1 < n and toks[j + 1].lastindex == 12
                    if type(hit) is not tuple:
                        items.append(hit)
                    elif quantified:  # a sequence group under a quantifier: its term
                        items.append(self._seq(list(hit)))
                    else:
                        items.extend(hit)
                    quantifiable = quantified
                    i = j + 1
                    continue
                frames.append((alts, items, i))
                alts, items, quantifiable = [], [], False
            elif kind == 5:
                group_alts, group_items = alts, items
                alts, items, start = frames.pop()
                key = self.text[toks[start].start() : m.end()]
                quantified = i + 1 < n and toks[i + 1].lastindex == 12
                if not group_alts and not quantified:
                    # a sequence group: its items join the enclosing sequence, which builds them
                    # once onto what follows (a term here would be re-associated onto each tail)
                    self.memo[key] = tuple(group_items)
                    items.extend(group_items)
                else:
                    term = self.memo[key] = arena.alt(group_alts + [self._seq(group_items)])
                    items.append(term)
                quantifiable = quantified
            elif kind == 6:
                alts.append(self._seq(items))
                items, quantifiable = [], False
            elif kind == 12:  # a quantifier (its lazy-suffix group always takes part)
                if not quantifiable:
                    raise _Bail  # nothing to repeat, or a repeated repeat
                items.append(self._repeat(items.pop(), m))
                quantifiable = False
            else:  # escape, class or ``.``: the same text is the same term
                key = m.group(0)
                hit = self.memo.get(key)
                if hit is None:
                    hit = self.memo[key] = self.atom(key, m)
                items.append(hit)
                quantifiable = True
            i += 1
        return arena.alt(alts + [self._seq(items)])

    def _literal_items(self, run: str) -> list[int | bytes]:
        """A literal run as sequence items: the UTF-8 bytes of each stretch between shared
        definitions (which :meth:`_seq` builds straight onto what follows; the term of a
        stretch with a lone surrogate), and the definition's term for each placeholder.
        """
        if run.isascii():
            return [run.encode("ascii")]
        if max(run) < _PLACEHOLDER_CHR:
            return [self._stretch(run)]
        shared = self.low.shared
        out: list[int | bytes] = []
        start = 0
        for k, c in enumerate(run):
            i = ord(c) - PLACEHOLDER_BASE
            if 0 <= i < len(shared):
                if k > start:
                    out.append(self._stretch(run[start:k]))
                out.append(shared[i])
                start = k + 1
        if start < len(run):
            out.append(self._stretch(run[start:]))
        return out

    def _stretch(self, text: str) -> int | bytes:
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: literal() makes it match nothing
            return self._literal(text)

    def atom(self, text: str, m=None) -> int:
        """The term of one escape, class or ``.`` token (``m``: its match, if at hand), its
        shape kept across compiles in ``_ATOM_RECIPES`` unless it names a shared definition.
        """
        recipe = _ATOM_RECIPES.get(text)
        if recipe is not None:
            return recipe if type(recipe) is int else import_term(self.arena, recipe)
        m = m or _TOKEN.fullmatch(text)
        term = self._atom(m)
        if (
            m.group(1) is None
            or m.group(1)[1] in _CATEGORY_ESCAPES
            or _escape_code(m.group(1)) < PLACEHOLDER_BASE
        ):
            if len(_ATOM_RECIPES) >= _ATOM_RECIPES_MAX:
                _ATOM_RECIPES.clear()
            _ATOM_RECIPES[text] = term if term <= EPS else export_term(self.arena, term)
        return term

    def _seq(self, items: list) -> int:
        """Concatenation of ``items`` (terms, or literal bytes from :meth:`_literal_items`)."""
        arena = self.arena
        result = EPS
        for item in reversed(items):
            result = (
                arena.bytes_then(item, result)
                if type(item) is bytes
                else arena.concat(item, result)
            )
        return result

    def _literal(self, run: str) -> int:
        hit = self.memo.get(run)
        if hit is None:
            hit = self.memo[run] = self.arena.seq([self.low.literal(ord(c)) for c in run])
        return hit

    def _repeat(self, atom: int, m) -> int:
        return self.arena.repeat(atom, *_bounds(m))

    def _atom(self, m) -> int:
        low = self.low
        if m.group(13) is not None:
            return low.chars([(10, 10)], negate=True)
        esc = m.group(1)
        if esc is not None:
            c = esc[1]
            if c in _CATEGORY_ESCAPES:
                return low.charset([(C.CATEGORY, _CATEGORIES[c])])
            return low.literal(_escape_code(esc))
        return self._class(m.group(2) == "^", m.group(3))

    def _class(self, negate: bool, body: str) -> int:
        mask = None if negate else _ascii_class_mask(body)
        if mask is not None:  # one byte set: the term chars() would merge its ranges to
            return self.arena.byteset(mask)
        items = _class_items(negate, body)
        top = max((av for op, av in items if op == C.LITERAL), default=0)
        if top >= PLACEHOLDER_BASE:  # (a range is never a placeholder: large classes stay here)
            raise _Bail  # a placeholder in a class: re's path handles (or refuses) it
        return self.low.charset(items)


def _bounds(m) -> tuple[int, int]:
    """``(lo, hi)`` of a quantifier token (``hi`` INF: unbounded); _Bail where ``re`` errs."""
    op = m.group(7)
    if op is not None:
        lo, hi = _REPEATS[op]
    elif m.group(11) is not None:
        lo, hi = 0, int(m.group(11))
    else:
        lo = int(m.group(8))
        hi = lo if m.group(9) is None else (INF if m.group(10) == "" else int(m.group(10)))
    if lo >= _MAXREPEAT or hi >= _MAXREPEAT or (hi != INF and hi < lo):
        raise _Bail
    return lo, hi


_CLASS_PUNCT = frozenset(" !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # read as themselves after \\
_HEX = frozenset("0123456789abcdefABCDEF")


def _ascii_class_mask(body: str) -> int | None:
    r"""The 128-bit byte mask of a class body made of ASCII characters, escapes ``\xHH``
    below 0x80 or ``\`` + punctuation, and ranges ``a-b`` of them (what the key tries and
    most patterns write), read as ``re`` reads it; None for any other body (``_class_items``
    reads those: other escapes, a ``-`` that is no range's, ``[``, non-ASCII). Raises: never.
    """
    if not body or body[0] == "^" or any(s in body for s in _NESTED_SET):
        return None  # (a leading ^ would negate the class re reads)
    codes: list[int] = []  # -1: a range's dash
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\":
            d = body[i + 1 : i + 2]
            if d == "x" and i + 4 <= n and body[i + 2] in _HEX and body[i + 3] in _HEX:
                code, i = int(body[i + 2 : i + 4], 16), i + 4
                if code >= 0x80:
                    return None
            elif d and d in _CLASS_PUNCT:
                code, i = ord(d), i + 2
            else:
                return None
        elif c == "-":
            if not codes or codes[-1] < 0 or i + 1 == n or (len(codes) > 1 and codes[-2] < 0):
                return None  # a leading, trailing or chained dash: re's other readings
            codes.append(-1)
            i += 1
            continue
        elif " " <= c < "\x7f" and c != "[":
            code, i = ord(c), i + 1
        else:
            return None
        codes.append(code)
    mask, k = 0, 0
    while k < len(codes):
        if k + 2 < len(codes) and codes[k + 1] < 0:
            lo, hi = codes[k], codes[k + 2]
            if hi < lo:
                return None  # re's error
            mask |= byte_range_mask(lo, hi)
            k += 3
        else:
            mask |= 1 << codes[k]
            k += 1
    return mask


def _class_items(negate: bool, body: str) -> list[tuple]:
    """``re``'s class items (``NEGATE``, ``LITERAL``, ``RANGE``, ``CATEGORY``) of a class
    token's body; _Bail for what ``re`` reads otherwise or refuses.
    """
    if any(s in body for s in _NESTED_SET) or not body:
        raise _Bail
    parts = list(_CLASS_ITEM.finditer(body))
    if sum(m.end() - m.start() for m in parts) != len(body):
        raise _Bail  # an escape re reads otherwise (\b, \0, \N{...}, ...)
    items: list[tuple] = [(C.NEGATE, None)] if negate else []
    k = 0
    while k < len(parts):
        cp = _class_code(parts[k])
        if k + 2 < len(parts) and parts[k + 1].group(7) == "-":
            hi = _class_code(parts[k + 2])
            if cp is None or hi is None or hi < cp:
                raise _Bail  # a category in a range, or a reversed range: re's error
            items.append((C.RANGE, (cp, hi)))
            k += 3
            continue
        items.append(
            (C.CATEGORY, _CATEGORIES[parts[k].group(6)]) if cp is None else (C.LITERAL, cp)
        )
        k += 1
    return items


def _escape_code(esc: str) -> int:
    c = esc[1]
    if c in "xuU":
        cp = int(esc[2:], 16)
        if cp > 0x10FFFF:
            raise _Bail
        return cp
    return _CONTROL.get(c, ord(c))


def _class_code(m) -> int | None:
    """Code point of one class item, None for a category escape."""
    for g in (1, 2, 3):
        if m.group(g) is not None:
            cp = int(m.group(g), 16)
            if cp > 0x10FFFF:
                raise _Bail
            return cp
    if m.group(4) is not None:
        return ord(m.group(4))
    if m.group(5) is not None:
        return _CONTROL[m.group(5)]
    if m.group(6) is not None:
        return None
    return ord(m.group(7))
