"""Spec -> ``CompiledGrammar`` (the regex implementation), with an in-memory LRU cache.

``compile_spec`` compiles any ``RegexSpec`` (``structgen.fsm.spec``): the spec is lowered
to a regex with shared definitions, then to a lazily built byte DFA mapped onto the
vocabulary. ``compile_regex`` / ``compile_choice`` / ``compile_json_schema`` are its
function forms. Cache key: the spec's ``cache_key()`` and the vocabulary fingerprint.
Compiled grammars are immutable; matchers made from them are independent.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ..errors import StructgenError
from ._schema_refs import expand_shared
from .base import BaseCompiledGrammar
from .dfa import DEFAULT_EAGER_ROWS, ByteDFA, regex_to_dfa
from .json_schema import DEFAULT_MAX_RECURSION_DEPTH
from .matcher import Matcher
from .spec import Choice, JsonSchema, LoweredRegex, Regex, RegexSpec, schema_for
from .token_index import TokenIndex
from .vocabulary import Vocabulary

__all__ = [
    "CompiledGrammar",
    "NoVocabularyError",
    "compile_spec",
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


class CompiledGrammar(BaseCompiledGrammar):
    """A ``RegexSpec`` compiled to a ``ByteDFA``, optionally mapped onto a vocabulary.

    Args:
        spec: the spec compiled (kept as ``spec``).
        lowered: the spec's regex (``spec.lower()``).
        dfa: the automaton of ``lowered`` after ``spec.trigger``.
        vocab: the vocabulary, or None.

    Attributes:
        spec: the spec the grammar was compiled from (``BaseCompiledGrammar``).
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

    def __init__(self, spec: RegexSpec, lowered: LoweredRegex, dfa: ByteDFA,
                 vocab: Vocabulary | None) -> None:
        self.spec = spec
        self._pattern = lowered.pattern
        self.definitions = list(lowered.definitions)
        self.trigger = spec.trigger
        self.dfa = dfa
        self.vocab = vocab
        self.token_index = TokenIndex(dfa, vocab) if vocab is not None else None
        self.warnings = list(lowered.warnings)

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


def compile_spec(spec: RegexSpec, vocab: Vocabulary | None = None) -> CompiledGrammar:
    """Compile a ``RegexSpec`` for ``vocab`` (cached by ``spec.cache_key()`` and vocabulary).

    Args:
        spec: the spec (``Regex``, ``JsonSchema``, ``Choice``, ``Concatenation``).
        vocab: the vocabulary (None: only ``CompiledGrammar.matches`` works).

    Returns:
        The grammar; its ``spec`` is ``spec.portable()`` (picklable).

    Raises:
        RegexError, UnsupportedRegexError, GrammarTooComplexError: see ``regex_to_dfa``.
        InvalidSchemaError, UnsupportedSchemaError: see ``compile_json_schema``.
    """
    def build() -> CompiledGrammar:  # a cache hit skips the lowering (and a metaschema check)
        lowered = spec.lower()
        eager_rows = JSON_EAGER_ROWS if isinstance(spec, JsonSchema) else DEFAULT_EAGER_ROWS
        dfa = regex_to_dfa(lowered.pattern, trigger=spec.trigger,
                           definitions=list(lowered.definitions) or None, eager_rows=eager_rows)
        return CompiledGrammar(spec.portable(), lowered, dfa, vocab)

    return _cached((spec.cache_key(), _fingerprint(vocab)), build)


def compile_regex(pattern: str, vocab: Vocabulary | None = None, *,
                  trigger: str | None = None, definitions: list[str] | tuple[str, ...] = ()) -> CompiledGrammar:
    """Compile a Python regex (fullmatch semantics) for ``vocab``.

    Args:
        pattern: the regex.
        vocab: the vocabulary (None: only ``CompiledGrammar.matches`` works).
        trigger: free text up to and including the first ``trigger``, then ``pattern``
            (e.g. ``"</think>"`` lets a reasoning model think before it answers).
        definitions: shared subpatterns ``pattern`` refers to (a compiled JSON Schema's
            ``CompiledGrammar.definitions`` with its ``source_pattern``).

    Raises:
        RegexError, UnsupportedRegexError, GrammarTooComplexError: see ``regex_to_dfa``.
    """
    return compile_spec(Regex(pattern, trigger, tuple(definitions)), vocab)


def compile_choice(choices: list[str], vocab: Vocabulary | None = None, *,
                   trigger: str | None = None) -> CompiledGrammar:
    """Exactly one of ``choices`` (literal strings); ``trigger`` as in ``compile_regex``.

    Raises:
        ValueError: ``choices`` is empty (``RequestError``, a ValueError: not all strings).
    """
    if not choices:
        raise ValueError("compile_choice needs at least one choice")
    return compile_spec(Choice(choices, trigger), vocab)


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
    return compile_spec(JsonSchema(schema_for(schema), whitespace, strict, allow_extra_properties,
                                   trigger, max_recursion_depth), vocab)
