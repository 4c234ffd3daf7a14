"""Spec -> ``CompiledGrammar`` (the regex implementation), with an in-memory LRU cache.

``compile_spec`` compiles any ``RegexSpec`` (``structgen.fsm.spec``): the spec is lowered
to a regex with shared definitions, then to a lazily built byte DFA mapped onto the
vocabulary. ``compile_regex`` / ``compile_choice`` / ``compile_json_schema`` are its
function forms. Cache key: the spec's ``cache_key()``, the budgets and the vocabulary
fingerprint. Compiled grammars are immutable; matchers made from them are independent.

Every compile reads ``structgen.env``'s ``tokentrie`` and ``regexlower`` settings and
applies them to the grammar's C loops (the token-trie walk and mask writer, the regex
lowering) when they differ from the values last applied, so a loop swapped by hand (tests)
stays until the environment says otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..env import read as read_setting
from ..env import texts as setting_texts
from ..errors import (
    ConfigError,
    NoVocabularyError,
    RegexError,
    UnsatisfiableSchemaError,
)
from ..lru import LRUCache
from .base import BaseCompiledGrammar
from .grammar.schema_rules import SchemaRules, compile_schema_rules
from .index import masks, trie
from .index.token_index import TokenIndex
from .index.vocabulary import Vocabulary
from .json_schema import CONVERT_MAX_SECONDS
from .json_schema.ids import schema_depth_checked
from .matcher import Matcher
from .regex import lower as regex_lower
from .regex import terms as regex_terms
from .regex.definitions import expand_shared
from .regex.dfa import (
    DEFAULT_EAGER_ROWS,
    DEFAULT_MAX_SECONDS,
    DEFAULT_MAX_STATES,
    ByteDFA,
    regex_to_dfa,
)
from .spec import (
    Choice,
    Grammar,
    JsonSchema,
    LoweredRegex,
    Regex,
    RegexSpec,
    lower_spec,
    schema_for,
)

__all__ = [
    "CompiledGrammar",
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
# (the rest are built on demand as the mask walk or decoding reaches them); the choice is
# measured in benchmarks/RESULTS.md ("Moved from docstrings: fsm")
JSON_EAGER_ROWS = 2


class AutomatonGrammar(BaseCompiledGrammar):
    """A grammar whose matchers are the regex layer's ``Matcher`` over a ``TokenIndex`` of a
    byte automaton (``dfa``: a ``ByteDFA`` or anything with its interface).

    Subclasses set ``dfa`` and ``token_index`` (None without a vocabulary).
    """

    dfa: Any
    token_index: TokenIndex | None
    # the grammar matches() reads instead of ``dfa`` (built on first use), or None: a
    # grammar with ``!<X>``, whose automaton holds token edges no text spells
    membership: Callable[[], BaseCompiledGrammar] | None = None

    def matches(self, text: str | bytes) -> bool:
        """Whole-string membership (str is UTF-8 encoded). Works without a vocabulary.

        Raises:
            GrammarTooComplexError: a lazily built automaton exceeds its budget on the way.
        """
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        if self.membership is not None:
            return self.membership().matches(data)
        return self.dfa.accepts(data)

    def matcher(self, max_tokens: int | None = None) -> Matcher:
        """A fresh per-request ``Matcher``.

        Raises:
            NoVocabularyError: the grammar was compiled with ``vocab=None``.
        """
        if self.token_index is None:
            raise NoVocabularyError(
                "this grammar was compiled without a vocabulary; "
                "pass vocab= to compile_* to get a matcher"
            )
        return Matcher(self.token_index, max_tokens=max_tokens)


class CompiledGrammar(AutomatonGrammar):
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

    def __init__(
        self, spec: RegexSpec, lowered: LoweredRegex, dfa: ByteDFA, vocab: Vocabulary | None
    ) -> None:
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
        return (
            f"CompiledGrammar({trig}num_states={self.dfa.num_states}, "
            f"vocab={'none' if self.vocab is None else self.vocab.fingerprint[:12]}, "
            f"warnings={len(self.warnings)})"
        )


_cache: LRUCache[tuple, CompiledGrammar] = LRUCache(CACHE_SIZE)
_lock = threading.Lock()  # the C-loop switches of _apply_env


def clear_cache() -> None:
    """Drop every cached compiled grammar."""
    _cache.clear()


# structgen.env setting -> the switches it sets; and each setting as last applied
_SWITCHES = {
    "tokentrie": (trie.use_extension, masks.use_extension),
    "regexlower": (regex_lower.use_extension, regex_terms.use_extension),
}
_applied = dict.fromkeys(_SWITCHES, True)
_SWITCH_FIELDS = tuple(_SWITCHES)
_texts_applied: list = [None]  # the variables' raw values when last applied (None: never)


def _apply_env() -> None:
    """Switch the grammar's C loops as the environment says (on change only).

    Raises:
        ConfigError: a setting's value does not parse.
    """
    texts = setting_texts(_SWITCH_FIELDS)
    if texts == _texts_applied[0]:
        return  # the variables hold what they held at the last apply
    for name, switches in _SWITCHES.items():
        value = read_setting(name)
        if value != _applied[name]:
            with _lock:
                _applied[name] = value
                for switch in switches:
                    switch(value)
    _texts_applied[0] = texts


def _cached(key: tuple, build) -> CompiledGrammar:
    _apply_env()
    hit = _cache.get(key)
    if hit is not None:
        return hit
    grammar = build()
    _cache.put(key, grammar)
    return grammar


def _fingerprint(vocab: Vocabulary | None) -> str | None:
    return None if vocab is None else vocab.fingerprint


def _set_lexical_cache_bytes(vocab: Vocabulary | None, capacity: object) -> None:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ConfigError(f"grammar_cache_bytes must be None or an int >= 0, got {capacity!r}")
    if vocab is not None:
        vocab.lexical_masks.set_capacity(capacity)


def compile_spec(
    spec: RegexSpec,
    vocab: Vocabulary | None = None,
    *,
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    max_convert_seconds: float = CONVERT_MAX_SECONDS,
    grammar_cache_bytes: int | None = None,
    lowered: LoweredRegex | SchemaRules | None = None,
) -> BaseCompiledGrammar:
    """Compile a ``RegexSpec`` for ``vocab`` (cached by ``spec.cache_key()``, the budgets
    and the vocabulary).

    Args:
        spec: the spec (``Regex``, ``JsonSchema``, ``Choice``, ``Concatenation``,
            ``StructuralTag``; a ``Grammar`` compiles through
            ``structgen.fsm.grammar.compile_grammar`` under the same two budgets, uncached
            here but cached there).
        vocab: the vocabulary (None: only ``CompiledGrammar.matches`` works).
        max_states: budget of automaton states built, at compile and later as masks and
            decoding reach new states (default ``DEFAULT_MAX_STATES``, 200,000).
        max_seconds: CPU-time budget of the compile and of each later exploration, in CPU
            seconds of the thread doing the work (``time.thread_time``: waiting for a core
            or the GIL does not count; default ``DEFAULT_MAX_SECONDS``, 10 CPU s).
        max_convert_seconds: CPU-time budget of a JSON Schema's conversion to a regex
            (default ``CONVERT_MAX_SECONDS``, 10 CPU s).
        grammar_cache_bytes: when not None, the new byte bound of ``vocab``'s shared
            lexical mask cache (``Vocabulary.lexical_masks``, evicting down to it; 0 turns
            sharing off), as ``EngineConfig.grammar_cache_bytes`` sets it for an engine. It
            holds for every later compile of the vocabulary and is not part of the cache
            key (masks are the same with any bound).
        lowered: ``structgen.fsm.spec.lower_spec(spec, max_convert_seconds=...)`` under
            the same ``max_convert_seconds`` when the caller already has it (a torch-free
            precheck): compiled instead of lowering ``spec`` again; None: lowered here.
            Used only on a cache miss.

    Returns:
        The grammar (a ``CompiledGrammar`` for a ``RegexSpec``); its ``spec`` is
        ``spec.portable()`` (picklable). The budgets are
        part of the cache key: a grammar compiled under other budgets is compiled again.

    Raises:
        RegexError, UnsupportedRegexError, GrammarTooComplexError: see ``regex_to_dfa``
            (``GrammarTooComplexError`` also when a budget is exceeded).
        InvalidSchemaError, UnsupportedSchemaError: see ``compile_json_schema``.
        ConfigError: ``grammar_cache_bytes`` is not None or an int >= 0, or ``spec`` is no
            constraint spec.
        InvalidGrammarError, UnsupportedGrammarError: a ``Grammar``'s text (see
            ``compile_grammar``).
    """
    if grammar_cache_bytes is not None:
        _set_lexical_cache_bytes(vocab, grammar_cache_bytes)
    if not isinstance(spec, RegexSpec):
        return _compile_other(spec, vocab, max_states=max_states, max_seconds=max_seconds)

    def build() -> CompiledGrammar:  # a cache hit skips the lowering (and a metaschema check)
        lowering = lowered
        if lowering is None:
            lowering = lower_spec(spec, max_convert_seconds=max_convert_seconds)
        if not isinstance(lowering, LoweredRegex):  # a recursive JsonSchema's rules
            return compile_schema_rules(
                lowering, spec.portable(), vocab, max_states=max_states, max_seconds=max_seconds
            )
        eager_rows = JSON_EAGER_ROWS if isinstance(spec, JsonSchema) else DEFAULT_EAGER_ROWS
        try:
            dfa = regex_to_dfa(
                lowering.pattern,
                trigger=spec.trigger,
                definitions=list(lowering.definitions) or None,
                reusable=lowering.reusable,
                head_aliases=lowering.head_aliases,
                eager_rows=eager_rows,
                max_states=max_states,
                max_seconds=max_seconds,
            )
        except RegexError as exc:  # a schema whose oneOf/not/if leaves no value (#20)
            if not isinstance(spec, JsonSchema) or "matches no string" not in str(exc):
                raise
            raise UnsatisfiableSchemaError(
                "false", "", "its oneOf, not or if/then/else leave no value"
            ) from exc
        return CompiledGrammar(spec.portable(), lowering, dfa, vocab)

    budgets = (max_states, max_seconds, max_convert_seconds)
    if isinstance(spec, JsonSchema) and isinstance(spec.schema, (dict, bool)):
        # the depth check walks the document once, not at each of the compile's four
        # entry points (cache_key, lower_recursive_schema, lower, json_schema_to_shared)
        with schema_depth_checked(spec.schema):
            return _cached((spec.cache_key(), budgets, _fingerprint(vocab)), build)
    return _cached((spec.cache_key(), budgets, _fingerprint(vocab)), build)


def _compile_other(spec: Any, vocab: Vocabulary | None, *, max_states: int, max_seconds: float):
    """``compile_spec`` of a spec that is no ``RegexSpec``: a ``Grammar`` through
    ``compile_grammar`` under the same budgets.

    Raises:
        ConfigError: ``spec`` is not a constraint spec.
    """
    if isinstance(spec, Grammar):
        return spec.compile(vocab, max_states=max_states, max_seconds=max_seconds)
    raise ConfigError(
        "compile_spec takes a constraint spec (Regex, JsonSchema, Choice, Concatenation, "
        f"StructuralTag, Grammar), got {type(spec).__name__}"
    )


def compile_regex(
    pattern: str,
    vocab: Vocabulary | None = None,
    *,
    trigger: str | None = None,
    definitions: list[str] | tuple[str, ...] = (),
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    grammar_cache_bytes: int | None = None,
) -> CompiledGrammar:
    r"""Compile a Python regex (fullmatch semantics) for ``vocab``.

    Args:
        pattern: the regex; ``^``/``\A`` at its start and ``$``/``\Z`` at its end (or at
            those of a top-level alternative) are accepted as the no-ops they are.
        vocab: the vocabulary (None: only ``CompiledGrammar.matches`` works).
        trigger: free text up to and including the first ``trigger``, then ``pattern``
            (e.g. ``"</think>"`` lets a reasoning model think before it answers).
        definitions: shared subpatterns ``pattern`` refers to (a compiled JSON Schema's
            ``CompiledGrammar.definitions`` with its ``source_pattern``).
        max_states: the automaton's state budget, as in ``compile_spec``.
        max_seconds: the automaton's CPU-time budget, as in ``compile_spec``.
        grammar_cache_bytes: the vocabulary's shared lexical mask cache bound, as in
            ``compile_spec``.

    Raises:
        RegexError, UnsupportedRegexError, GrammarTooComplexError: see ``regex_to_dfa``.
        ConfigError: a bad ``grammar_cache_bytes``.
    """
    return compile_spec(
        Regex(pattern, trigger, tuple(definitions)),
        vocab,
        max_states=max_states,
        max_seconds=max_seconds,
        grammar_cache_bytes=grammar_cache_bytes,
    )


def compile_choice(
    choices: list[str],
    vocab: Vocabulary | None = None,
    *,
    trigger: str | None = None,
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    grammar_cache_bytes: int | None = None,
) -> CompiledGrammar:
    """Exactly one of ``choices`` (literal strings); ``trigger`` and the budgets as in
    ``compile_regex``, ``grammar_cache_bytes`` as in ``compile_spec``.

    Raises:
        ValueError: ``choices`` is empty (``RequestError``, a ValueError: not all strings).
        GrammarTooComplexError: a budget is exceeded.
    """
    if not choices:
        raise ValueError("compile_choice needs at least one choice")
    return compile_spec(
        Choice(choices, trigger),
        vocab,
        max_states=max_states,
        max_seconds=max_seconds,
        grammar_cache_bytes=grammar_cache_bytes,
    )


def compile_json_schema(
    schema: Any,
    vocab: Vocabulary | None = None,
    *,
    whitespace: str | int = "compact",
    strict: bool = True,
    allow_extra_properties: bool = False,
    max_recursion_depth: int | None = None,
    trigger: str | None = None,
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    max_convert_seconds: float = CONVERT_MAX_SECONDS,
    grammar_cache_bytes: int | None = None,
) -> CompiledGrammar:
    """Compile a JSON Schema (dict, JSON string, or pydantic model class).

    See ``json_schema_to_regex`` for the supported subset and options; ``trigger`` as in
    ``compile_regex`` (free text, then the JSON document); the budgets and
    ``grammar_cache_bytes`` (the vocabulary's shared lexical mask cache bound) as in
    ``compile_spec``.

    Raises:
        InvalidSchemaError: the schema fails its metaschema.
        UnsupportedSchemaError: a keyword that cannot be enforced (with ``strict``).
        GrammarTooComplexError: a budget (states, time, conversion time) is exceeded.
    """
    return compile_spec(
        JsonSchema(
            schema_for(schema),
            whitespace,
            strict,
            allow_extra_properties,
            trigger,
            max_recursion_depth,
        ),
        vocab,
        max_states=max_states,
        max_seconds=max_seconds,
        max_convert_seconds=max_convert_seconds,
        grammar_cache_bytes=grammar_cache_bytes,
    )
