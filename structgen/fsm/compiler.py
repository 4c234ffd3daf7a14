"""Spec -> ``CompiledGrammar`` (regex, JSON Schema, choices), with an in-memory LRU cache.

Cache key: (kind, canonical spec, options and budgets, vocabulary fingerprint). Compiled
grammars are immutable; matchers made from them are independent.

Every ``compile_*`` call reads ``structgen.env``'s ``tokentrie`` and ``regexlower`` settings
and applies them to the grammar's C loops (the token-trie walk and mask writer, the regex
lowering) when they differ from the values last applied, so a loop swapped by hand (tests)
stays until the environment says otherwise.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from ..env import read as read_setting
from ..errors import NoVocabularyError
from . import _fast_lower, _mask_write, _token_trie
from ._json_pattern import escape_literal
from ._schema_check import check_schema
from .dfa import DEFAULT_EAGER_ROWS, DEFAULT_MAX_SECONDS, DEFAULT_MAX_STATES, ByteDFA, regex_to_dfa
from ._schema_refs import expand_shared
from .json_schema import (CONVERT_MAX_SECONDS, DEFAULT_MAX_RECURSION_DEPTH, json_schema_to_shared,
                          schema_for)
from .matcher import Matcher
from .token_index import TokenIndex
from .vocabulary import Vocabulary

__all__ = [
    "CompiledGrammar",
    "compile_regex",
    "compile_json_schema",
    "compile_choice",
    "clear_cache",
    "CACHE_SIZE",
]

CACHE_SIZE = 128
# rows a JSON Schema compile builds breadth-first (regex_to_dfa's eager_rows): a schema's
# automaton is never small enough to complete at compile, and a first mask reads 2-3 rows
# (the rest are built on demand as the mask walk or decoding reaches them). In paired runs on
# bench_grammar's sample, 2 rows gave the lowest compile + first-mask time at the median
# (16 rows: 2.49 ms, 4: 2.25, 2: 2.09, 1: 2.30; first mask 0.071 ms with 16, 0.080 with 2)
JSON_EAGER_ROWS = 2


class CompiledGrammar:
    """A constraint compiled to a ``ByteDFA``, optionally mapped onto a vocabulary.

    Attributes:
        pattern: the regex the grammar was compiled from (for a JSON Schema with shared
            ``$ref`` expansions, written out on first access; may raise
            ``GrammarTooComplexError`` when deep recursion makes that text huge).
        definitions: the shared subpatterns the compiled pattern refers to
            (``json_schema_to_shared``), empty for other grammars.
        dfa: the minimal trimmed byte automaton.
        vocab: the vocabulary, or None (then only ``matches`` works).
        token_index: the ``TokenIndex`` (None without a vocabulary).
        warnings: messages about schema parts that were ignored or approximated.
        trigger: the text after which ``pattern`` starts to apply (free text before it,
            see ``regex_to_dfa``), or None: ``pattern`` applies from the first byte.
    """

    def __init__(self, pattern: str, dfa: ByteDFA, vocab: Vocabulary | None,
                 warnings: list[str] | None = None, trigger: str | None = None,
                 definitions: list[str] | None = None) -> None:
        self._pattern = pattern
        self.definitions = list(definitions or [])
        self.trigger = trigger
        self.dfa = dfa
        self.vocab = vocab
        self.token_index = TokenIndex(dfa, vocab) if vocab is not None else None
        self.warnings = list(warnings or [])

    @property
    def source_pattern(self) -> str:
        """The pattern as compiled: may refer to :attr:`definitions` (never expanded)."""
        return self._pattern

    @property
    def pattern(self) -> str:
        """The regex text (shared definitions written out, see the class docstring)."""
        return expand_shared(self._pattern, self.definitions)

    def __repr__(self) -> str:
        trig = "" if self.trigger is None else f"trigger={self.trigger!r}, "
        return (f"CompiledGrammar({trig}num_states={self.dfa.num_states}, "
                f"vocab={'none' if self.vocab is None else self.vocab.fingerprint[:12]}, "
                f"warnings={len(self.warnings)})")

    def matches(self, text: str | bytes) -> bool:
        """Whole-string membership (str is UTF-8 encoded). Works without a vocabulary."""
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        return self.dfa.accepts(data)

    def matcher(self, max_tokens: int | None = None) -> Matcher:
        """A fresh per-request ``Matcher``.

        Raises:
            NoVocabularyError: the grammar was compiled with ``vocab=None``.
        """
        if self.token_index is None:
            raise NoVocabularyError("this grammar was compiled without a vocabulary; "
                                    "pass vocab= to compile_* to get a matcher")
        return Matcher(self.token_index, max_tokens=max_tokens)


_cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
_lock = threading.Lock()


def clear_cache() -> None:
    """Drop every cached compiled grammar."""
    with _lock:
        _cache.clear()


# structgen.env setting -> the switches it sets; and each setting as last applied
_SWITCHES = {"tokentrie": (_token_trie.use_extension, _mask_write.use_extension),
             "regexlower": (_fast_lower.use_extension,)}
_applied = dict.fromkeys(_SWITCHES, True)


def _apply_env() -> None:
    """Switch the grammar's C loops as the environment says (on change only).

    Raises:
        ConfigError: a setting's value does not parse.
    """
    for name, switches in _SWITCHES.items():
        value = read_setting(name)
        if value != _applied[name]:
            with _lock:
                _applied[name] = value
                for switch in switches:
                    switch(value)


def _cached(key: tuple, build) -> CompiledGrammar:
    _apply_env()
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    grammar = build()
    with _lock:
        _cache[key] = grammar
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return grammar


def _fingerprint(vocab: Vocabulary | None) -> str | None:
    return None if vocab is None else vocab.fingerprint


def _build(pattern: str, vocab: Vocabulary | None, warnings: list[str] | None = None,
           trigger: str | None = None, definitions: list[str] | None = None,
           eager_rows: int = DEFAULT_EAGER_ROWS, budgets: tuple[int, float] = (DEFAULT_MAX_STATES,
                                                                            DEFAULT_MAX_SECONDS)):
    def build() -> CompiledGrammar:
        dfa = regex_to_dfa(pattern, trigger=trigger, definitions=definitions, eager_rows=eager_rows,
                           max_states=budgets[0], max_seconds=budgets[1])
        return CompiledGrammar(pattern, dfa, vocab, warnings, trigger, definitions)
    return build


def compile_regex(pattern: str, vocab: Vocabulary | None = None, *,
                  trigger: str | None = None, definitions: list[str] | tuple[str, ...] = (),
                  max_states: int = DEFAULT_MAX_STATES,
                  max_seconds: float = DEFAULT_MAX_SECONDS) -> CompiledGrammar:
    """Compile a Python regex (fullmatch semantics) for ``vocab``.

    Args:
        pattern: the regex.
        vocab: the vocabulary (None: only ``CompiledGrammar.matches`` works).
        trigger: free text up to and including the first ``trigger``, then ``pattern``
            (e.g. ``"</think>"`` lets a reasoning model think before it answers).
        definitions: shared subpatterns ``pattern`` refers to (a compiled JSON Schema's
            ``CompiledGrammar.definitions`` with its ``source_pattern``: how a grammar is
            sent to another process and compiled there again, e.g. a data-parallel replica).
        max_states: budget of automaton states built, at compile and later as masks and
            decoding reach new states (default ``DEFAULT_MAX_STATES``, 200,000).
        max_seconds: time budget of the compile and of each later exploration (default
            ``DEFAULT_MAX_SECONDS``, 10 s).

    The budgets are part of the cache key: a grammar compiled under other budgets is
    compiled again.

    Raises:
        RegexError, UnsupportedRegexError, GrammarTooComplexError: see ``regex_to_dfa``.
    """
    defs = list(definitions)
    budgets = (max_states, max_seconds)
    return _cached(("regex", pattern, trigger, tuple(defs), budgets, _fingerprint(vocab)),
                   _build(pattern, vocab, None, trigger, defs or None, budgets=budgets))


def compile_choice(choices: list[str], vocab: Vocabulary | None = None, *,
                   trigger: str | None = None, max_states: int = DEFAULT_MAX_STATES,
                   max_seconds: float = DEFAULT_MAX_SECONDS) -> CompiledGrammar:
    """Exactly one of ``choices`` (literal strings); ``trigger`` and the budgets as in
    ``compile_regex``.

    Raises:
        ValueError: ``choices`` is empty.
        GrammarTooComplexError: a budget is exceeded.
    """
    if not choices:
        raise ValueError("compile_choice needs at least one choice")
    pattern = "(?:" + "|".join(escape_literal(c) for c in dict.fromkeys(choices)) + ")"
    budgets = (max_states, max_seconds)
    return _cached(("choice", tuple(choices), trigger, budgets, _fingerprint(vocab)),
                   _build(pattern, vocab, None, trigger, budgets=budgets))


def compile_json_schema(
    schema: Any,
    vocab: Vocabulary | None = None,
    *,
    whitespace: str | int = "compact",
    strict: bool = True,
    allow_extra_properties: bool = False,
    max_recursion_depth: int = DEFAULT_MAX_RECURSION_DEPTH,
    trigger: str | None = None,
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    max_convert_seconds: float = CONVERT_MAX_SECONDS,
) -> CompiledGrammar:
    """Compile a JSON Schema (dict, JSON string, or pydantic model class).

    See ``json_schema_to_regex`` for the supported subset and options; ``trigger``,
    ``max_states`` and ``max_seconds`` as in ``compile_regex`` (free text, then the JSON
    document); ``max_convert_seconds``: time budget of the schema-to-regex conversion
    (default ``CONVERT_MAX_SECONDS``, 10 s). The budgets are part of the cache key.

    Raises:
        InvalidSchemaError: the schema fails its metaschema.
        UnsupportedSchemaError: a keyword that cannot be enforced (with ``strict``).
        GrammarTooComplexError: a budget (states, time, conversion time) is exceeded.
    """
    schema = schema_for(schema)
    options = (whitespace, strict, allow_extra_properties, max_recursion_depth, trigger)
    budgets = (max_states, max_seconds)
    key = ("json", json.dumps(schema, sort_keys=False), options, budgets + (max_convert_seconds,),
           _fingerprint(vocab))

    def build() -> CompiledGrammar:  # a cache hit skips the metaschema check too
        if isinstance(schema, dict):
            check_schema(schema)  # jsonschema's verdict; common schemas by a fast table
        warnings: list[str] = []
        pattern, definitions = json_schema_to_shared(
            schema, whitespace=whitespace, strict=strict,
            allow_extra_properties=allow_extra_properties,
            max_recursion_depth=max_recursion_depth, warnings=warnings,
            max_convert_seconds=max_convert_seconds,
        )
        return _build(pattern, vocab, warnings, trigger, definitions, JSON_EAGER_ROWS, budgets)()

    return _cached(key, build)
