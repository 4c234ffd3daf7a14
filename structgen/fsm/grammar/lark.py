r"""Lark front end (the dialect as llguidance reads it): ``name: ...`` rules, start ``start``.

Read: rules (lowercase names, optional ``?`` / ``!`` prefix, ``_`` names) and terminals
(uppercase names, may use terminals only), priorities ``.N`` (ignored: the language does
not depend on them, a warning says so), ``|`` (also leading a continuation line),
``-> alias`` (ignored), ``( )``, ``[ ]`` (optional), postfix ``?``, ``*``, ``+``,
``~ n`` and ``~ n..m``; ``"strings"`` (``i`` flag: case-insensitive), ``"a".."z"``
ranges, ``/regex/`` with flags ``i`` and ``s``; ``%ignore``; ``%import common.NAME``
(``-> ALIAS``) and ``%import common (A, B)`` for the usual terminals (``COMMON``, written
here); ``%json { schema }`` embeds a JSON Schema (structgen's ``JsonSchema`` with its
defaults: compact whitespace) as a regular sub-language; special tokens ``<[id]>``,
``<name>``, ``<|name|>``, ``!<...>`` (any one token but that one) and llguidance's
``<[^1,5-7]>`` (any one token but those), ``<[*]>`` (any one token) and ``<[1,5-7]>``
(one token among those) (``special``); ``//`` comments.

Refused with ``UnsupportedGrammarError`` (construct and line:column): templates
(``name{x}:``), ``%declare``, ``%override``, ``%extend``, imports from other modules,
regex flags other than ``i``/``s``.
"""

from __future__ import annotations

import json
import re

from ...errors import InvalidGrammarError, StructgenError, UnsupportedGrammarError
from ..regex.escape import escape_class_char, escape_literal
from ..regex.parse import MAXREPEAT
from .ir import Alt, Embedded, Expr, GrammarDef, Literal, Pattern, Ref, Repeat, Seq
from .special import SPECIAL_TOKEN_TEXT, special_token_node

__all__ = ["parse_lark", "COMMON", "MAX_NESTING"]

MAX_NESTING = 200  # ( and [ groups nested in one rule (the reader recurses per level)

# lark's common.lark terminals, as regexes of structgen's dialect (written here)
_INT = r"[0-9]+"
_EXP = r"[eE][+-]?[0-9]+"
_DECIMAL = rf"(?:{_INT}\.(?:{_INT})?|\.{_INT})"
_FLOAT = rf"(?:{_INT}{_EXP}|{_DECIMAL}(?:{_EXP})?)"
_NUMBER = rf"(?:{_FLOAT}|{_INT})"
COMMON: dict[str, str] = {
    "DIGIT": r"[0-9]",
    "HEXDIGIT": r"[a-fA-F0-9]",
    "INT": _INT,
    "SIGNED_INT": rf"[+-]?{_INT}",
    "DECIMAL": _DECIMAL,
    "FLOAT": _FLOAT,
    "SIGNED_FLOAT": rf"[+-]?{_FLOAT}",
    "NUMBER": _NUMBER,
    "SIGNED_NUMBER": rf"[+-]?{_NUMBER}",
    "ESCAPED_STRING": r'"(?:[^"\\\n]|\\[^\n])*"',
    "LCASE_LETTER": r"[a-z]",
    "UCASE_LETTER": r"[A-Z]",
    "LETTER": r"[A-Za-z]",
    "WORD": r"[A-Za-z]+",
    "CNAME": r"[A-Za-z_][A-Za-z0-9_]*",
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r"\r",
    "LF": r"\n",
    "NEWLINE": r"(?:\r?\n)+",
    "SH_COMMENT": r"#[^\n]*",
    "CPP_COMMENT": r"//[^\n]*",
    "C_COMMENT": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    "SQL_COMMENT": r"--[^\n]*",
}

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r]+|//[^\n]*)
    |(?P<nl>\n)
    |(?P<directive>%[a-z]+)
    |(?P<string>"(?:\\.|[^"\\\n])*"i?)
    |(?P<regexp>/(?!/)(?:\\.|[^/\\\n])+/[a-z]*)
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<number>[0-9]+)
    |(?P<special>{special})
    |(?P<op>->|\.\.|[:|()\[\]?*+~.,{}!])""".replace("{special}", SPECIAL_TOKEN_TEXT),
    re.VERBOSE,
)


class _Token:
    __slots__ = ("kind", "text", "pos", "line", "col", "first")

    def __init__(self, kind: str, text: str, pos: int, line: int, col: int, first: bool):
        self.kind, self.text, self.pos, self.line, self.col, self.first = (
            kind,
            text,
            pos,
            line,
            col,
            first,
        )


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[_Token] = []
        self.i = 0
        self.gdef = GrammarDef(syntax="lark")
        self.num_anonymous = 0
        self.ignored: list[tuple[Ref, _Token]] = []  # %ignore NAME, checked after parsing
        self.open_groups: list[_Token] = []  # ( and [ open around the item, innermost last
        self._tokenize()

    def _tokenize(self) -> None:
        text, pos, line, line_start, first = self.text, 0, 1, 0, True
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error_at(pos, line, pos - line_start + 1, _no_token(text, pos))
            kind = m.lastgroup
            if kind == "nl":
                line, line_start, first = line + 1, m.end(), True
            elif kind != "ws":
                if kind == "directive" and m.group() == "%json":
                    start = m.end()
                    while start < len(text) and text[start] in " \t":
                        start += 1
                    try:
                        _, end = json.JSONDecoder().raw_decode(text, start)
                    except json.JSONDecodeError as exc:
                        raise self.error_at(
                            pos, line, pos - line_start + 1, f"%json needs a JSON value ({exc})"
                        ) from None
                    self.tokens.append(
                        _Token("json", text[start:end], pos, line, pos - line_start + 1, first)
                    )
                    line += text.count("\n", start, end)
                    if "\n" in text[start:end]:
                        line_start = text.rfind("\n", start, end) + 1
                    pos, first = end, False
                    continue
                self.tokens.append(_Token(kind, m.group(), pos, line, pos - line_start + 1, first))
                first = False
            pos = m.end()

    # ---- helpers -------------------------------------------------------------------

    def error_at(self, pos: int, line: int, col: int, message: str) -> InvalidGrammarError:
        snippet = self.text[pos : pos + 20].split("\n")[0]
        where = ""
        if self.open_groups:  # an unclosed group is the likelier mistake than the token
            g = self.open_groups[-1]
            where = f"; the {g.text!r} opened at {g.line}:{g.col} is not closed before it"
        return InvalidGrammarError(
            f"Lark syntax error at {line}:{col}: {message} (at {snippet!r}){where}"
        )

    def error(self, message: str, tok: _Token | None = None) -> InvalidGrammarError:
        tok = tok or self.peek()
        if tok is None:
            return InvalidGrammarError(
                f"Lark syntax error at {self.end_of_text()}: {message} (at the end of the text)"
            )
        return self.error_at(tok.pos, tok.line, tok.col, message)

    def end_of_text(self) -> str:
        """``line:column`` just past the text's last character."""
        line = self.text.count("\n") + 1
        return f"{line}:{len(self.text) - (self.text.rfind(chr(10)) + 1) + 1}"

    def unsupported(self, what: str, tok: _Token) -> UnsupportedGrammarError:
        return UnsupportedGrammarError(f"{what} at {tok.line}:{tok.col} is not supported")

    def peek(self, k: int = 0) -> _Token | None:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else None

    def take(self, text: str | None = None, kind: str | None = None) -> _Token:
        tok = self.peek()
        if tok is None or (text is not None and tok.text != text) or (kind and tok.kind != kind):
            raise self.error(f"expected {text!r}" if text else f"expected a {kind}")
        self.i += 1
        return tok

    def at_end_of_body(self) -> bool:
        tok = self.peek()
        return tok is None or (tok.first and tok.text != "|")

    # ---- definitions ---------------------------------------------------------------------

    def parse(self) -> GrammarDef:
        while self.peek() is not None:
            tok = self.peek()
            if tok.text in (")", "]"):
                opener = "(" if tok.text == ")" else "["
                raise self.error(f"unbalanced {tok.text!r}: no {opener!r} is open", tok)
            if not tok.first:
                raise self.error("expected a definition at the start of a line")
            if tok.kind == "directive":
                self.directive()
            else:
                self.definition()
        for ref, tok in self.ignored:
            if ref.name in self.gdef.rules:
                raise self.error(f"%ignore takes a terminal; {ref.name} is a rule", tok)
            if ref.name not in self.gdef.terminals:
                raise self.error(f"%ignore names undefined terminal {ref.name!r}", tok)
        return self.gdef

    def definition(self) -> None:
        tok = self.peek()
        if tok.text in ("?", "!"):
            self.i += 1
        name_tok = self.peek()
        if name_tok is None or name_tok.kind != "name":
            what = "'|' may start a continuation line" if tok.kind != "name" else ""
            raise self.error(
                "expected a rule or terminal name at the start of a line"
                + (f" ({what})" if what else "")
            )
        self.i += 1
        name = name_tok.text
        if self.peek() is not None and self.peek().text == "{":
            raise self.unsupported("a template rule (a rule per use)", name_tok)
        if self.peek() is not None and self.peek().text == ".":
            self.i += 1
            self.take(kind="number")
            self.gdef.warnings.append(f"priority of {name} ignored (the language is the same)")
        self.take(":")
        body = self.expansions()
        is_terminal = name.lstrip("_")[:1].isupper()
        table = self.gdef.terminals if is_terminal else self.gdef.rules
        if name in table:
            raise self.error(f"{name} defined twice", name_tok)
        table[name] = body
        self.gdef.positions[name] = (name_tok.line, name_tok.col)

    def directive(self) -> None:
        tok = self.take(kind="directive")
        if tok.text == "%ignore":
            item_tok = self.peek()
            if item_tok is None or item_tok.first:
                raise self.error("%ignore needs a terminal or a pattern after it", tok)
            item = self.expansions()
            if isinstance(item, Ref):
                self.gdef.ignore.append(item.name)
                self.ignored.append((item, item_tok))
            else:
                self.num_anonymous += 1
                name = f"__IGNORE_{self.num_anonymous}"
                self.gdef.terminals[name] = item
                self.gdef.ignore.append(name)
        elif tok.text == "%import":
            self.import_()
        elif tok.text in ("%declare", "%override", "%extend"):
            raise self.unsupported(tok.text, tok)
        else:
            raise self.error(f"unknown directive {tok.text}", tok)

    def import_(self) -> None:
        module = self.take(kind="name")
        names: list[tuple[str, str]] = []
        if module.text != "common":
            raise self.unsupported(f"%import from {module.text!r} (only common)", module)
        if self.peek() is not None and self.peek().text == "." and not self.peek().first:
            self.i += 1
            name = self.take(kind="name").text
            alias = name
            if self.peek() is not None and self.peek().text == "->" and not self.peek().first:
                self.i += 1
                alias = self.take(kind="name").text
            names.append((name, alias))
        else:
            self.take("(")
            while True:
                name = self.take(kind="name").text
                names.append((name, name))
                if self.peek() is not None and self.peek().text == ",":
                    self.i += 1
                    continue
                self.take(")")
                break
        for name, alias in names:
            regex = COMMON.get(name)
            if regex is None:
                raise self.unsupported(f"common terminal {name}", module)
            self.gdef.terminals[alias] = Pattern(regex)
            self.gdef.positions[alias] = (module.line, module.col)

    # ---- expressions ---------------------------------------------------------------------

    def expansions(self, nested: bool = False) -> Expr:
        alts = [self.expansion(nested)]
        while self.peek() is not None and self.peek().text == "|":  # "|" may start a line
            self.i += 1
            alts.append(self.expansion(nested))
        return alts[0] if len(alts) == 1 else Alt(tuple(alts))

    def expansion(self, nested: bool) -> Expr:
        items: list[Expr] = []
        while True:
            tok = self.peek()
            if tok is None or tok.text in ("|", ")", "]"):
                break
            if tok.first and not nested:
                break
            if tok.text == "->":
                self.i += 1
                self.take(kind="name")
                continue
            items.append(self.item())
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def item(self) -> Expr:
        atom = self.atom()
        tok = self.peek()
        if tok is None or tok.first:
            return atom
        if tok.text in ("?", "*", "+"):
            self.i += 1
            lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[tok.text]
            return Repeat(atom, lo, hi)
        if tok.text == "~":
            self.i += 1
            lo = int(self.take(kind="number").text)
            hi = lo
            if self.peek() is not None and self.peek().text == "..":
                self.i += 1
                hi = int(self.take(kind="number").text)
            if hi >= MAXREPEAT:
                raise self.error(f"repetition count too large (the limit is {MAXREPEAT - 1})", tok)
            if hi < lo:
                raise self.error(f"repetition ~ {lo}..{hi} has max < min", tok)
            return Repeat(atom, lo, hi)
        return atom

    def atom(self) -> Expr:
        tok = self.peek()
        if tok is None:
            raise self.error("expected an item")
        self.i += 1
        if tok.text in ("(", "["):
            if len(self.open_groups) >= MAX_NESTING:
                raise self.error(f"groups nest deeper than {MAX_NESTING}", tok)
            self.open_groups.append(tok)
            inner = self.expansions(nested=True)
            self.open_groups.pop()
            close = ")" if tok.text == "(" else "]"
            end = self.peek()
            if end is None or end.text != close:
                got = (
                    f"the text ends at {self.end_of_text()}"
                    if end is None
                    else (f"{end.text!r} at {end.line}:{end.col}")
                )
                raise self.error(f"unbalanced {tok.text!r}: {got} before its {close!r}", tok)
            self.i += 1
            return inner if close == ")" else Repeat(inner, 0, 1)
        if tok.kind == "string":
            nxt = self.peek()
            if nxt is not None and nxt.text == "..":
                self.i += 1
                hi_tok = self.take(kind="string")
                lo, hi = self.string(tok), self.string(hi_tok)
                if len(lo) != 1 or len(hi) != 1 or ord(hi) < ord(lo):
                    raise self.error("a range needs two single characters in order", tok)
                return Pattern(f"[{escape_class_char(ord(lo))}-{escape_class_char(ord(hi))}]")
            text = self.string(tok)
            if tok.text.endswith("i"):
                return Pattern("(?i:" + escape_literal(text) + ")")
            return Literal(text)
        if tok.kind == "regexp":
            return self.regexp(tok)
        if tok.kind == "name":
            nxt = self.peek()
            if nxt is not None and nxt.text == "{":
                raise self.unsupported(f"a template use {tok.text}{{...}} (a rule per use)", tok)
            return Ref(tok.text, tok.line, tok.col)
        if tok.kind == "json":
            return self.embedded_json(tok)
        if tok.kind == "special":  # ``special``: a special token of the vocabulary
            return special_token_node(tok.text, tok.line, tok.col)
        raise self.error("expected a string, a regex, a name, '(' or '['", tok)

    def string(self, tok: _Token) -> str:
        body = tok.text[1:].rstrip("i")[:-1]
        try:
            return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            raise self.error("bad escape in string", tok) from None

    def regexp(self, tok: _Token) -> Pattern:
        end = tok.text.rfind("/")
        body, flags = tok.text[1:end].replace("\\/", "/"), tok.text[end + 1 :]
        bad = set(flags) - {"i", "s"}
        if bad:
            raise self.unsupported(f"regex flag {''.join(sorted(bad))!r}", tok)
        if flags:
            body = f"(?{''.join(sorted(flags))}:{body})"
        return Pattern(body, tok.line, tok.col)

    def embedded_json(self, tok: _Token) -> Embedded:
        from ..spec import JsonSchema

        where = f"%json at {tok.line}:{tok.col}"
        try:
            lowered = JsonSchema(json.loads(tok.text)).lower()
        except StructgenError as exc:
            raise InvalidGrammarError(f"{where}: {exc}") from exc
        return Embedded(lowered.pattern, lowered.definitions, where)


def _no_token(text: str, pos: int) -> str:
    """Why no token of the grammar's syntax starts at ``pos``."""
    c = text[pos]
    if c == '"':
        return "unterminated string: its line ends before the closing '\"'"
    if c == "/":
        return "unterminated regex: its line ends before the closing '/'"
    if c == "%":
        return "a directive needs a lowercase name after '%'"
    return f"unexpected character {c!r}"


def parse_lark(text: str, start: str | None = None) -> GrammarDef:
    """Parse Lark grammar text (module docstring) into a ``GrammarDef``.

    Args:
        text: the grammar.
        start: the start rule (default ``"start"``).

    Raises:
        InvalidGrammarError: a syntax error (line:column and the text there), a name
            defined twice, an invalid ``%json`` schema.
        UnsupportedGrammarError: a construct listed in the module docstring.
    """
    gdef = _Parser(text).parse()
    gdef.start = start or "start"
    if not gdef.rules:
        raise InvalidGrammarError("the Lark grammar defines no rule")
    return gdef
