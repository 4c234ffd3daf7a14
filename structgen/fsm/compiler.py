"""Spec -> ``CompiledGrammar`` (regex, JSON Schema, choices), with an in-memory LRU cache.

Cache key: (kind, canonical spec, options, vocabulary fingerprint). Compiled
grammars are immutable; matchers made from them are independent.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from ..errors import StructgenError
from ._schema_check import check_schema
from .dfa import DEFAULT_EAGER_ROWS, ByteDFA, regex_to_dfa
from ._schema_refs import expand_shared
from .json_schema import DEFAULT_MAX_RECURSION_DEPTH, json_schema_to_shared, schema_for
from .matcher import Matcher
from .regex_escape import escape_literal
from .token_index import TokenIndex
from .vocabulary import Vocabulary

__all__ = [
    "CompiledGrammar",
    "NoVocabularyError",
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


class NoVocabularyError(StructgenError, ValueError):
    """``CompiledGrammar.matcher()`` was called on a grammar compiled without a vocabulary."""


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


def _cached(key: tuple, build) -> CompiledGrammar:
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
           eager_rows: int = DEFAULT_EAGER_ROWS):
    def build() -> CompiledGrammar:
        dfa = regex_to_dfa(pattern, trigger=trigger, definitions=definitions, eager_rows=eager_rows)
        return CompiledGrammar(pattern, dfa, vocab, warnings, trigger, definitions)
    return build


def compile_regex(pattern: str, vocab: Vocabulary | None = None, *,
                  trigger: str | None = None, definitions: list[str] | tuple[str, ...] = ()) -> CompiledGrammar:
    """Compile a Python regex (fullmatch semantics) for ``vocab``.

    Args:
        pattern: the regex.
        vocab: the vocabulary (None: only ``CompiledGrammar.matches`` works).
        trigger: free text up to and including the first ``trigger``, then ``pattern``
            (e.g. ``"</think>"`` lets a reasoning model think before it answers).
        definitions: shared subpatterns ``pattern`` refers to (a compiled JSON Schema's
            ``CompiledGrammar.definitions`` with its ``source_pattern``: how a grammar is
            sent to another process and compiled there again, e.g. a data-parallel replica).

    Raises:
        RegexError, UnsupportedRegexError, GrammarTooComplexError: see ``regex_to_dfa``.
    """
    defs = list(definitions)
    return _cached(("regex", pattern, trigger, tuple(defs), _fingerprint(vocab)),
                   _build(pattern, vocab, None, trigger, defs or None))


def compile_choice(choices: list[str], vocab: Vocabulary | None = None, *,
                   trigger: str | None = None) -> CompiledGrammar:
    """Exactly one of ``choices`` (literal strings); ``trigger`` as in ``compile_regex``.

    Raises:
        ValueError: ``choices`` is empty.
    """
    if not choices:
        raise ValueError("compile_choice needs at least one choice")
    pattern = "(?:" + "|".join(escape_literal(c) for c in dict.fromkeys(choices)) + ")"
    return _cached(("choice", tuple(choices), trigger, _fingerprint(vocab)),
                   _build(pattern, vocab, None, trigger))


def compile_json_schema(
    schema: Any,
    vocab: Vocabulary | None = None,
    *,
    whitespace: str | int = "compact",
    strict: bool = True,
    allow_extra_properties: bool = False,
    max_recursion_depth: int = DEFAULT_MAX_RECURSION_DEPTH,
    trigger: str | None = None,
) -> CompiledGrammar:
    """Compile a JSON Schema (dict, JSON string, or pydantic model class).

    See ``json_schema_to_regex`` for the supported subset and options; ``trigger`` as in
    ``compile_regex`` (free text, then the JSON document).

    Raises:
        InvalidSchemaError: the schema fails its metaschema.
        UnsupportedSchemaError: a keyword that cannot be enforced (with ``strict``).
        GrammarTooComplexError: the automaton exceeds the state budget.
    """
    schema = schema_for(schema)
    options = (whitespace, strict, allow_extra_properties, max_recursion_depth, trigger)
    key = ("json", json.dumps(schema, sort_keys=False), options, _fingerprint(vocab))

    def build() -> CompiledGrammar:  # a cache hit skips the metaschema check too
        if isinstance(schema, dict):
            check_schema(schema)  # jsonschema's verdict; common schemas by a fast table
        warnings: list[str] = []
        pattern, definitions = json_schema_to_shared(
            schema, whitespace=whitespace, strict=strict,
            allow_extra_properties=allow_extra_properties,
            max_recursion_depth=max_recursion_depth, warnings=warnings,
        )
        return _build(pattern, vocab, warnings, trigger, definitions, JSON_EAGER_ROWS)()

    return _cached(key, build)
