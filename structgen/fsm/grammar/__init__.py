"""Context-free grammars (Lark, GBNF, EBNF) on a lexer + Earley automaton.

Pipeline, in order: a front end per dialect (``lark.py``, ``bnf.py``; ``front.py`` picks
one) parses text into the IR (``ir.py``); ``lower.py`` writes the regular parts as regex
text and the recursive rules as productions (``CfgGrammar``), or the whole grammar as one
regex when nothing recurses; ``earley.py`` holds the hash-consed Earley chart nodes;
``automaton.py`` combines them with one lazy ``ByteDFA`` per terminal into a deterministic
automaton over configurations that the token layer drives like any ``ByteDFA``;
``compile.py`` is the cached entry point ``compile_grammar``.
"""

from __future__ import annotations

from typing import Any

from .front import detect_syntax, parse_grammar, undecided_syntax

__all__ = ["compile_grammar", "parse_grammar", "detect_syntax", "undecided_syntax", "CompiledCFG"]


def __getattr__(name: str) -> Any:
    """``compile_grammar`` and ``CompiledCFG`` on first use (PEP 562): reading a grammar
    (``parse_grammar``) then imports neither the token layer nor torch.
    """
    if name in ("compile_grammar", "CompiledCFG"):
        from . import compile as _compile

        return getattr(_compile, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
