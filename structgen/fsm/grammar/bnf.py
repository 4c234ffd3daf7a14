r"""GBNF (llama.cpp) and EBNF (XGrammar) front ends: ``name ::= ...`` rules, start ``root``.

The dialect read (llama.cpp's ``grammars/README.md``; XGrammar's EBNF is the same core):

* ``name ::= alternatives``; names are letters, digits, ``-`` and ``_``;
* ``"literal"`` strings with ``\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH`` escapes,
  ``[...]`` / ``[^...]`` character classes (code points, ranges), ``.`` any character;
* ``( ... )`` groups, ``|``, postfix ``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{m,n}``,
  ``{,n}``;
* special tokens ``<[id]>``, ``<name>``, ``<|name|>``, ``!<...>`` (any one token but
  that one) and llguidance's ``<[^1,5-7]>`` (any one token but those), ``<[*]>`` (any
  one token) and ``<[1,5-7]>`` (one token among those) (``special``);
* ``#`` comments to the end of the line; EBNF also ``/* ... */`` comments and
  ``'single-quoted'`` strings.

A rule ends where the next ``name ::=`` begins (newlines are plain whitespace, so this
reader accepts a superset of llama.cpp's line rules); a string or a character class ends on
its own line (a raw new line inside one is an unterminated string or class, as XGrammar
reads it; llama.cpp reads on, into the next rules). EBNF, as XGrammar, refuses an empty
alternative (``"a" |``, an empty rule body: write ``""``); GBNF allows it, as llama.cpp.
A repetition count is ``{m}``, ``{m,}``, ``{m,n}`` or ``{,n}`` of ASCII digits below
``MAXREPEAT``. XGrammar's lookahead assertions ``(= ...)`` and tag dispatch are refused
with ``UnsupportedGrammarError``. Every error names what is wrong and its line:column (an
unterminated string, class or group at its start; ``tests/fsm/grammar/test_malformed.py``).

Against llama.cpp's own reader (every ``grammars/*.gbnf`` of llama.cpp reads the same
here: ``tests/fixtures/gbnf``; case by case in ``test_malformed.py``): names may also hold
``_``, escapes also ``\- \^ \/ \0 \'``, ``{,n}`` is read (llama.cpp needs the minimum),
and left recursion is parsed (llama.cpp refuses it, and ``"a"**``); a rule defined twice,
a range out of order (``[z-a]``) and a raw new line in a string or class are
``InvalidGrammarError`` (llama.cpp keeps the last definition, reads an empty range, reads
across the line); ``!<token>`` allows only the ordinary tokens and the special tokens the
grammar names (llama.cpp: every token but that one).
"""

from __future__ import annotations

import bisect
import re

from ...errors import InvalidGrammarError, UnsupportedGrammarError
from ..regex.escape import escape_class_char
from ..regex.parse import MAXREPEAT
from .ir import Alt, Expr, GrammarDef, Literal, Pattern, Ref, Repeat, Seq
from .special import SPECIAL_TOKEN, special_token_node

__all__ = ["parse_bnf", "MAX_NESTING"]

MAX_NESTING = 200  # nested groups in one rule; repetition operators on one item
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "[": "[", "]": "]"}
_ESCAPES.update({"-": "-", "^": "^", "/": "/", "0": "\0"})
_COUNT = re.compile(r"\{[ \t]*([0-9]*)[ \t]*(?:(,)[ \t]*([0-9]*)[ \t]*)?\}")


class _Reader:
    def __init__(self, text: str, syntax: str) -> None:
        self.text = text
        self.pos = 0
        self.syntax = syntax
        self._newlines: list[int] | None = None  # offsets of the text's "\n", on first use

    def where(self, pos: int | None = None) -> str:
        line, col = self.line_col(self.pos if pos is None else pos)
        return f"{line}:{col}"

    def line_col(self, pos: int) -> tuple[int, int]:
        """1-based line and column of offset ``pos`` (a binary search over the text's line
        breaks: every reference is located, so a rescan per call would be quadratic).
        """
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_left(self._newlines, pos)
        return line + 1, pos - (self._newlines[line - 1] + 1 if line else 0) + 1

    def error(self, message: str, pos: int | None = None) -> InvalidGrammarError:
        pos = self.pos if pos is None else pos
        snippet = self.text[pos : pos + 20].split("\n")[0]
        return InvalidGrammarError(
            f"{self.syntax.upper()} syntax error at {self.where(pos)}: {message} (at {snippet!r})"
        )

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            elif self.syntax == "ebnf" and text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def name(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _NAME_CHARS:
            self.pos += 1
        return self.text[start : self.pos]

    def at_definition(self) -> bool:
        """True when a ``name ::=`` starts here (after whitespace)."""
        self.skip()
        save = self.pos
        ok = bool(self.name()) and (self.skip() or self.text.startswith("::=", self.pos))
        self.pos = save
        return ok

    # ---- characters ---------------------------------------------------------------

    def char(self, what: str, start: int) -> int:
        """One possibly escaped code point of a literal or class (``what``, begun at
        ``start``: the text ending, or a raw new line, leaves it unterminated).
        """
        text = self.text
        if self.pos >= len(text) or text[self.pos] == "\n":
            raise self.unterminated(what, start)
        c = text[self.pos]
        if c != "\\":
            self.pos += 1
            return ord(c)
        if self.pos + 1 >= len(text) or text[self.pos + 1] == "\n":
            raise self.unterminated(what, start)
        e = text[self.pos + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width is not None:
            digits = text[self.pos + 2 : self.pos + 2 + width]
            try:
                if len(digits) != width:
                    raise ValueError
                cp = int(digits, 16)
            except ValueError:
                raise self.error(f"bad \\{e} escape") from None
            if cp > 0x10FFFF:
                raise self.error(f"\\{e} escape past U+10FFFF")
            self.pos += 2 + width
            return cp
        if e not in _ESCAPES:
            raise self.error(f"unknown escape \\{e}")
        self.pos += 2
        return ord(_ESCAPES[e])

    def unterminated(self, what: str, start: int) -> InvalidGrammarError:
        """The error of a string or class begun at ``start`` that its line does not close."""
        close = "]" if what == "character class" else self.text[start]
        end = "the text ends" if "\n" not in self.text[start:] else "its line ends"
        return self.error(f"unterminated {what}: {end} before the closing {close!r}", start)

    def literal(self, quote: str) -> Literal:
        start = self.pos
        self.pos += 1
        out = []
        while True:
            if self.pos < len(self.text) and self.text[self.pos] == quote:
                self.pos += 1
                return Literal("".join(out))
            out.append(chr(self.char("string", start)))

    def char_class(self) -> Pattern:
        start = self.pos
        self.pos += 1
        negated = self.text.startswith("^", self.pos)
        self.pos += negated
        parts = []
        while True:
            if self.text.startswith("]", self.pos):
                self.pos += 1
                break
            lo = self.char("character class", start)
            hi = lo
            if self.text.startswith("-", self.pos) and not self.text.startswith("-]", self.pos):
                self.pos += 1
                hi = self.char("character class", start)
                if hi < lo:
                    raise self.error(
                        f"character range {chr(lo)!r}-{chr(hi)!r} is out of order "
                        f"(U+{lo:04X} > U+{hi:04X})",
                        start,
                    )
            parts.append(
                escape_class_char(lo)
                if lo == hi
                else f"{escape_class_char(lo)}-{escape_class_char(hi)}"
            )
        if not parts:
            if negated:
                return Pattern("(?:.|\\n)")
            raise self.error("empty character class", start)
        return Pattern(("[^" if negated else "[") + "".join(parts) + "]")

    # ---- expressions ------------------------------------------------------------------

    def alternatives(self, depth: int) -> Expr:
        if depth > MAX_NESTING:
            raise self.error(f"groups nest deeper than {MAX_NESTING}")
        alts = [self.sequence(depth, None)]
        while self.peek() == "|":
            bar = self.pos
            self.pos += 1
            alts.append(self.sequence(depth, bar))
        return alts[0] if len(alts) == 1 else Alt(tuple(alts))

    def empty_alternative(self, bar: int | None) -> InvalidGrammarError:
        """EBNF's error for an alternative with no element (``bar``: the ``|`` before it)."""
        where = "after '|'" if bar is not None else "in the rule body"
        return self.error(
            f'empty alternative {where}: EBNF needs an element (write "" for the empty string)',
            self.pos if bar is None else bar,
        )

    def sequence(self, depth: int, bar: int | None) -> Expr:
        items: list[Expr] = []
        while True:
            c = self.peek()
            if c in ("", "|", ")") or (c in _NAME_CHARS and self.at_definition()):
                break
            items.append(self.postfix(self.atom(depth)))
        if not items and self.syntax == "ebnf" and (bar is not None or c != ")"):  # "()" is allowed
            raise self.empty_alternative(bar)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def atom(self, depth: int) -> Expr:
        c = self.peek()
        start = self.pos
        if c == '"' or (c == "'" and self.syntax == "ebnf"):
            return self.literal(c)
        if c == "[":
            return self.char_class()
        if c == "(":
            self.pos += 1
            if self.peek() == "=" or self.text.startswith("?=", self.pos):
                line, col = self.line_col(start)
                raise UnsupportedGrammarError(
                    f"lookahead assertion at {line}:{col} is not supported"
                )
            inner = self.alternatives(depth + 1)
            if self.peek() != ")":  # the text ends, or the next rule begins
                before = "the text ends" if not self.peek() else "the next rule begins"
                raise self.error(
                    f"unbalanced '(': {before} at {self.where()} before its ')'", start
                )
            self.pos += 1
            return inner
        if c == ".":
            self.pos += 1
            return Pattern("(?:.|\\n)")
        if c in ("<", "!") and (m := SPECIAL_TOKEN.match(self.text, self.pos)) is not None:
            self.pos = m.end()  # a special token (``special``); a quoted string is characters
            return special_token_node(m.group(), *self.line_col(start))
        if c and c in _NAME_CHARS:
            name = self.name()
            line, col = self.line_col(start)
            return Ref(name, line, col)
        if c == "'":
            raise self.error("a GBNF string is written in double quotes ('...' is EBNF's)")
        if self.text.startswith("::=", self.pos):
            raise self.error("'::=' without a rule name before it")
        if c == "=":
            raise self.error("unexpected '=': a rule is defined with '::='")
        if c in "*+?{":
            raise self.error(f"{c!r} repeats nothing: it follows no string, class, name or ')'")
        raise self.error(f"unexpected {c!r}: expected a string, a character class, a name or '('")

    def postfix(self, item: Expr) -> Expr:
        num_ops = 0
        while True:
            c = self.peek()
            if not c or c not in "*+?{":
                return item
            num_ops += 1
            if num_ops > MAX_NESTING:
                raise self.error(f"more than {MAX_NESTING} repetition operators on one item")
            if c == "{":
                item = self.braces(item)
                continue
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            item = Repeat(item, lo, hi)
            self.pos += 1

    def braces(self, item: Expr) -> Expr:
        start = self.pos
        m = _COUNT.match(self.text, start)
        if m is None:
            if self.text.find("}", start) < 0:
                raise self.error("unterminated '{': no '}' closes the repetition count")
            raise self.error("bad repetition count: expected {m}, {m,}, {m,n} or {,n}")
        lo_text, comma, hi_text = m.groups()
        if not lo_text and not hi_text:
            raise self.error("repetition count without a number", start)
        lo = int(lo_text) if lo_text else 0
        hi = (int(hi_text) if hi_text else None) if comma else lo
        if max(lo, hi or 0) >= MAXREPEAT:
            raise self.error(f"repetition count too large (the limit is {MAXREPEAT - 1})", start)
        if hi is not None and hi < lo:
            raise self.error(f"repetition {m.group()} has max < min", start)
        self.pos = m.end()
        return Repeat(item, lo, hi)


def parse_bnf(text: str, syntax: str = "gbnf", start: str | None = None) -> GrammarDef:
    """Parse GBNF or EBNF text (module docstring) into a ``GrammarDef``.

    Args:
        text: the grammar.
        syntax: ``"gbnf"`` or ``"ebnf"``.
        start: the start rule (default ``"root"``).

    Raises:
        InvalidGrammarError: a syntax error or a rule defined twice (with line:column and
            the text there).
        UnsupportedGrammarError: a construct not implemented (lookahead).
    """
    reader = _Reader(text, syntax)
    gdef = GrammarDef(start=start or "root", syntax=syntax)
    while reader.peek():
        pos = reader.pos
        name = reader.name()
        if not name:
            raise reader.error(
                f"expected a rule name (letters, digits, '-', '_'), not {text[reader.pos]!r}"
            )
        reader.skip()
        if not text.startswith("::=", reader.pos):
            raise reader.error(f"expected '::=' after the rule name {name!r}")
        reader.pos += 3
        if name in gdef.rules:
            raise reader.error(f"rule {name!r} defined twice", pos)
        gdef.rules[name] = reader.alternatives(0)
        if reader.peek() == ")":
            raise reader.error("unbalanced ')': no '(' is open")
        gdef.positions[name] = reader.line_col(pos)
    if not gdef.rules:
        raise InvalidGrammarError(f"the {syntax.upper()} grammar defines no rule")
    return gdef
