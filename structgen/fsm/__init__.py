"""Constraints -> byte DFA -> token index -> per-request matcher.

``compile_regex`` / ``compile_json_schema`` / ``compile_choice`` return a cached
``CompiledGrammar``; ``CompiledGrammar.matcher()`` gives the per-request ``Matcher``
the runtime drives (see ``matcher.py`` for the decoding loop).
"""

from __future__ import annotations

from .compiler import (
    CompiledGrammar,
    clear_cache,
    compile_choice,
    compile_json_schema,
    compile_regex,
)
from .dfa import ByteDFA, regex_to_dfa
from .json_schema import json_schema_to_regex, schema_for
from .matcher import Matcher
from .token_index import TokenIndex
from .vocabulary import Vocabulary

__all__ = [
    "Vocabulary",
    "ByteDFA",
    "TokenIndex",
    "Matcher",
    "CompiledGrammar",
    "compile_regex",
    "compile_json_schema",
    "compile_choice",
    "clear_cache",
    "json_schema_to_regex",
    "regex_to_dfa",
    "schema_for",
]
