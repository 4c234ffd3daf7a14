"""The dialect front ends' entry point: grammar text -> ``GrammarDef``, without compiling.

``syntax="auto"``: text with ``::=`` rules is GBNF (start ``root``; EBNF is read by the
same parser), text with ``name:`` rules at line starts is Lark (start ``start``); text
with both, or neither, raises ``InvalidGrammarError`` asking for ``syntax=``.

Kept apart from ``compile.py`` so that reading a grammar (the CLI checks a grammar file
before it loads a model) imports neither the token layer nor torch.
"""

from __future__ import annotations

import re

from ...errors import InvalidGrammarError
from .bnf import parse_bnf
from .ir import GrammarDef
from .lark import parse_lark

__all__ = ["SYNTAXES", "detect_syntax", "parse_grammar", "undecided_syntax"]

SYNTAXES = ("auto", "lark", "gbnf", "ebnf")
_BNF_RULE = re.compile(r"^[ \t]*[A-Za-z_][A-Za-z0-9_-]*[ \t]*::=", re.MULTILINE)
_LARK_RULE = re.compile(r"^[?!]?[A-Za-z_][A-Za-z0-9_]*(?:\.\d+)?[ \t]*:(?!:)", re.MULTILINE)


def undecided_syntax(text: str) -> str | None:
    """Why ``syntax="auto"`` cannot tell the syntax of ``text`` (``"cannot tell the
    grammar's syntax (it has ...)"``: both kinds of rule or neither), or None when it can;
    the caller adds how its user names a syntax (a keyword, a flag, a request field).
    Raises: never.
    """
    bnf, lark = bool(_BNF_RULE.search(text)), bool(_LARK_RULE.search(text))
    if bnf != lark:
        return None
    what = "both '::=' rules and 'name:' rules" if bnf else "no 'name ::=' or 'name:' rule"
    return f"cannot tell the grammar's syntax (it has {what})"


def detect_syntax(text: str) -> str:
    """``"gbnf"`` or ``"lark"`` for ``syntax="auto"`` (module docstring).

    Raises:
        InvalidGrammarError: both or neither kind of rule is present
            (:func:`undecided_syntax`).
    """
    reason = undecided_syntax(text)
    if reason is not None:
        raise InvalidGrammarError(f"{reason}; pass syntax='lark', 'gbnf' or 'ebnf'")
    return "gbnf" if _BNF_RULE.search(text) else "lark"


def parse_grammar(text: str, syntax: str = "auto", start: str | None = None) -> GrammarDef:
    """The ``GrammarDef`` of ``text`` read as ``syntax``.

    Raises:
        InvalidGrammarError: an unknown ``syntax``, a syntax error (line:column), or an
            ambiguous ``"auto"``.
        UnsupportedGrammarError: a construct the dialect's reader refuses.
    """
    if not isinstance(text, str):
        raise InvalidGrammarError(f"grammar text must be a str, got {type(text).__name__}")
    if syntax not in SYNTAXES:
        raise InvalidGrammarError(f"unknown grammar syntax {syntax!r}; expected one of {SYNTAXES}")
    if syntax == "auto":
        syntax = detect_syntax(text)
    if syntax == "lark":
        return parse_lark(text, start)
    return parse_bnf(text, syntax, start)
