"""An independent GBNF reader for the tests: llama.cpp GBNF text -> Lark text.

It shares no code with ``structgen.fsm.grammar.bnf`` (its own tokenizer and escapes, per
llama.cpp's ``grammars/README.md``), so the ``lark`` package read with
``parser="earley", lexer="dynamic_complete"`` is a reference for GBNF membership. Every
terminal it writes is a fixed string or one character, so Lark's lexer adds no semantics
of its own: the Lark grammar is GBNF's character-level context-free language.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+|\#[^\n]*)
      |(?P<define>::=)
      |(?P<name>[A-Za-z0-9_-]+)
      |(?P<string>"(?:\\.|[^"\\\n])*")
      |(?P<cls>\[\^?(?:\\.|[^\]\\])*\])
      |(?P<count>\{\s*\d*\s*(?:,\s*\d*\s*)?\})
      |(?P<op>[()|*+?.])""",
    re.X | re.S,
)
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}


def _chars(body: str) -> list[str]:
    """Decode the escapes of a string or class body into code points (as strings)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width:
            out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        else:
            out.append(_SIMPLE[e])
            i += 2
    return out


def _re_char(c: str) -> str:
    """``c`` in a Lark regex (Lark decodes ``\\uXXXX`` itself; metacharacters get a backslash)."""
    if c.isascii() and c.isalnum():
        return c
    if c.isascii() and c.isprintable():
        return "\\" + c
    return f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def _rule(name: str) -> str:
    """A Lark rule name for GBNF ``name`` (one-to-one: Lark rule names are lower case)."""
    return "r_" + "".join(
        "__" if c == "_" else "_d" if c == "-" else f"_u{c.lower()}" if c.isupper() else c
        for c in name
    )


def _class(text: str) -> str:
    negated = text.startswith("[^")
    chars = _chars(text[2 if negated else 1 : -1])
    parts, i = [], 0
    while i < len(chars):  # a '-' between two characters is a range (escapes decoded)
        if i + 2 < len(chars) and chars[i + 1] == "-":
            parts.append(f"{_re_char(chars[i])}-{_re_char(chars[i + 2])}")
            i += 3
        else:
            parts.append(_re_char(chars[i]))
            i += 1
    return "/[" + ("^" if negated else "") + "".join(parts) + "]/"


def gbnf_to_lark(text: str) -> str:
    """Lark text for GBNF ``text`` (start rule ``root``; rule names through ``_rule``)."""
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"GBNF reader: cannot read {text[pos : pos + 20]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            tokens.append((m.lastgroup, m.group()))
    rules: list[tuple[str, list]] = []
    for i, (kind, value) in enumerate(tokens):
        if kind == "define":
            continue
        if i + 1 < len(tokens) and tokens[i + 1][0] == "define":
            rules.append((value, []))
        else:
            rules[-1][1].append((kind, value))
    lines = ["start: r_root", "_empty: "]
    for name, body in rules:
        lines.append(f"{_rule(name)}: {_expr(body)}")
    return "\n".join(lines) + "\n"


def _expr(body: list) -> str:
    out: list[str] = []
    for kind, value in body:
        if kind == "name":
            out.append(_rule(value))
        elif kind == "string":
            chars = _chars(value[1:-1])
            out.append("/" + "".join(_re_char(c) for c in chars) + "/" if chars else "_empty")
        elif kind == "cls":
            out.append(_class(value))
        elif kind == "count":
            lo_s, comma, hi_s = value[1:-1].replace(" ", "").partition(",")
            lo = int(lo_s or 0)
            hi = (int(hi_s) if hi_s else None) if comma else lo
            item = _last_item(out)
            if item.startswith("/") and item.endswith("/") and hi != 0:
                # one terminal: one counted regex (dynamic_complete tries every length;
                # nested optionals would make Lark's grammar analysis slow)
                body, top = item[1:-1], "" if hi is None else hi
                counted = f"/(?:{body}){{{max(lo, 1)},{top}}}/"
                out.append(counted if lo else f"[ {counted} ]")
                continue
            rest = f"{item}*" if hi is None else ""
            for _ in range((hi or lo) - lo):  # x{0,n}: [x [x [...]]]
                rest = f"[ {item} {rest} ]"
            out.append("( " + " ".join([item] * lo + [rest, "_empty"]) + " )")
        elif value == ".":
            out.append(r"/[\U00000000-\U0010ffff]/")
        elif value in "*+?" and value:
            out[-1] += value
        elif value == "|":
            out.append("|")
        else:  # ( )
            out.append(value)
    text = " ".join(out)
    return re.sub(r"\(\s*\)", "_empty", re.sub(r"(^|\|)\s*(?=\||$)", r"\1 _empty ", text))


def _last_item(out: list[str]) -> str:
    """Pop the last complete item (a group is popped whole) and return its text."""
    if out[-1] != ")":
        return out.pop()
    depth, i = 0, len(out) - 1
    while True:
        depth += out[i] == ")"
        depth -= out[i] == "("
        if depth == 0:
            break
        i -= 1
    item = " ".join(out[i:])
    del out[i:]
    return item
