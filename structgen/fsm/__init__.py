"""Constraint specs -> byte DFA -> token index -> per-request matcher.

A spec (``spec.py``: ``Regex``, ``JsonSchema``, ``Choice``, ``Concatenation``) compiles to a
``BaseCompiledGrammar`` whose ``matcher()`` gives the per-request ``BaseMatcher`` the
runtime drives (``base.py``: the interfaces and the decoding loop). ``compile_spec``,
``compile_regex`` / ``compile_json_schema`` / ``compile_choice`` return the regex
implementation's cached ``CompiledGrammar`` and ``Matcher``.

Layout, in pipeline order:

* ``spec.py``: constraint specs; ``base.py``: the grammar interfaces;
* ``regex/``: regex text -> hash-consed byte terms -> lazily built ``ByteDFA``;
* ``json_schema/``: JSON Schema -> regex text with shared definitions, one module per
  keyword family;
* ``index/``: a DFA meets a ``Vocabulary``: token trie, ``TokenIndex`` masks, mask writing,
  completion budget;
* ``grammar/``: context-free grammars (Lark, GBNF, EBNF) -> a lexer + Earley automaton
  behind the same interfaces (``compile_grammar``);
* ``compiler.py``: ``CompiledGrammar`` and the cached ``compile_*`` entry points;
  ``matcher.py``: the per-request ``Matcher``; ``jump_forward.py``: forced-text planning;
  ``grammar_pool.py``: the thread pool that fills a batch's bitmask rows in parallel.
"""

from __future__ import annotations

from .base import BaseCompiledGrammar, BaseMatcher
from .compiler import (
    CompiledGrammar,
    compile_choice,
    compile_json_schema,
    compile_regex,
    compile_spec,
)
from .compiler import clear_cache as _clear_compiled
from .grammar import compile_grammar
from .grammar.compile import clear_cache as _clear_cfg
from .grammar.union import clear_cache as _clear_alternatives
from .index.token_index import TokenIndex
from .index.vocabulary import Vocabulary
from .json_schema import json_schema_to_regex
from .matcher import Matcher
from .regex.dfa import ByteDFA, regex_to_dfa
from .spec import schema_for
from .tags.grammar import clear_cache as _clear_tags

__all__ = [
    "Vocabulary",
    "ByteDFA",
    "TokenIndex",
    "BaseMatcher",
    "BaseCompiledGrammar",
    "Matcher",
    "CompiledGrammar",
    "compile_spec",
    "compile_regex",
    "compile_json_schema",
    "compile_choice",
    "compile_grammar",
    "clear_cache",
    "json_schema_to_regex",
    "regex_to_dfa",
    "schema_for",
]


def clear_cache() -> None:
    """Drop every cached compiled grammar.

    Clears the regex / JSON Schema / choice compile cache, the context-free grammar cache
    (``compile_grammar``), the structural-tag grammar cache and the cache of ``select``
    alternatives. The vocabulary's shared lexical mask cache is not a compile cache and
    stays (bound it with ``grammar_cache_bytes``).
    """
    _clear_compiled()
    _clear_cfg()
    _clear_alternatives()
    _clear_tags()
