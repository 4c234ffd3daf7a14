"""Constraint specs: what a request asks for, before it is compiled for a vocabulary.

A spec is an immutable, picklable term holding only what was asked (no model state, no
vocabulary); ``spec.compile(vocab)`` gives a ``BaseCompiledGrammar`` (``structgen.fsm.base``)
whose ``spec`` is again a spec, so a constraint crosses a process boundary as its spec
(``spec_of``) and is compiled again on the other side. ``Engine.generate``, the server and
the language accept the terms below (``to_constraint`` normalises what users pass).

``Regex``, ``JsonSchema``, ``Choice`` and ``Concatenation`` are regex specs (``RegexSpec``):
they lower to one regex with shared definitions (``lower``), compiled and cached by
``structgen.fsm.compiler.compile_spec`` under ``cache_key`` and the vocabulary's
fingerprint. Another grammar implementation subclasses ``BaseSpec`` and returns its own
``BaseCompiledGrammar`` from ``compile``.

Every built-in term takes ``trigger=``: the model then writes free text until that text
first appears (e.g. ``"</think>"`` closing a reasoning block), and the constraint applies to
everything after it. Trigger and constraint are one automaton, so a token that spans the
trigger and the start of the answer is checked as a whole; the free text cannot end the
output (the trigger must come), and with ``max_tokens`` the mask steers the model to write
the trigger and a complete answer in time. The trigger must be ordinary text: special
tokens are never allowed under a constraint.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from ..errors import (
    GrammarTooComplexError,
    InvalidGrammarError,
    InvalidSchemaError,
    RegexError,
    RequestError,
    UnsupportedRegexError,
)
from .base import BaseCompiledGrammar
from .nesting import dumps, loads

# Modules imported at the first call that needs them, not at this module's import (they
# import this module); the module is kept, not an import statement run per call (~1.3 us).


@functools.cache
def _json_schema() -> ModuleType:
    from . import json_schema

    return json_schema


@functools.cache
def _ids() -> ModuleType:
    from .json_schema import ids

    return ids


@functools.cache
def _check() -> ModuleType:
    from .json_schema import check

    return check


@functools.cache
def _schema_rules() -> ModuleType:
    from .grammar import schema_rules

    return schema_rules


__all__ = [
    "BaseSpec",
    "RegexSpec",
    "LoweredRegex",
    "Regex",
    "JsonSchema",
    "Choice",
    "Concatenation",
    "to_constraint",
    "spec_of",
    "schema_for",
    "lower_spec",
    "Grammar",
    "TagStructure",
    "StructuralTag",
]


class BaseSpec(ABC):
    """A constraint spec: immutable, picklable, compiled per vocabulary."""

    @abstractmethod
    def compile(self, vocab: Any) -> BaseCompiledGrammar:
        """The grammar of this spec for ``vocab`` (a ``structgen.fsm.Vocabulary``, or None).

        Raises:
            StructgenError: the spec cannot be compiled (a subclass naming why).
        """


class LoweredRegex(NamedTuple):
    """A spec lowered to regex text.

    Attributes:
        pattern: the regex (Python ``re`` dialect, fullmatch); the raw code point
            ``PLACEHOLDER_BASE + i`` (``regex.definitions``) stands for ``definitions[i]``.
        definitions: shared subpatterns, each referring only to earlier ones.
        warnings: messages about spec parts that were ignored or approximated.
        reusable: indices of ``definitions`` whose language is the same in every spec that
            writes their texts (lowered once per process: ``regex.reused``).
        head_aliases: ``(index, alias, slack)`` per definition with a head alias (a
            string pattern's product state, ``json_schema.string_length``;
            ``regex.terms.TermArena.head_aliases``).
    """

    pattern: str
    definitions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    reusable: frozenset[int] = frozenset()
    head_aliases: tuple[tuple[int, bytes, int], ...] = ()

    def text(self) -> str:
        """The pattern with every definition written out (one regex text).

        Raises:
            GrammarTooComplexError: the written-out text is too large.
        """
        from .regex.definitions import expand_shared

        return expand_shared(self.pattern, list(self.definitions))


class RegexSpec(BaseSpec):
    """A spec that lowers to one regex (``lower``), compiled by ``compile_spec``."""

    trigger: str | None

    @abstractmethod
    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        """The regex of this spec (without its trigger).

        Args:
            max_convert_seconds: CPU-time budget of a JSON Schema's conversion (None: the
                default of ``structgen.fsm.compiler.compile_spec``); other specs ignore it.

        Raises:
            StructgenError: the spec cannot be lowered (as ``compile``).
        """

    @abstractmethod
    def cache_key(self) -> tuple:
        """A hashable key equal for specs that compile to the same grammar."""

    def portable(self) -> RegexSpec:
        """This spec with any pydantic model class replaced by its JSON Schema.

        Returns:
            A spec that pickles without the model's class; ``self`` when it holds none.
        """
        return self

    def compile(self, vocab: Any) -> BaseCompiledGrammar:
        """Compile for ``vocab`` (cached, see ``structgen.fsm.compiler.compile_spec``)."""
        from .compiler import compile_spec

        return compile_spec(self, vocab)


@dataclass(frozen=True)
class Regex(RegexSpec):
    """Output must fully match ``pattern`` (Python ``re`` dialect, no lookaround/backrefs).

    Args:
        pattern: the regex.
        trigger: free text up to and including this string first (module docstring).
        definitions: shared subpatterns ``pattern`` refers to (``LoweredRegex``).

    Raises:
        RegexError: ``pattern`` is not a string (at compile: RegexError,
            UnsupportedRegexError, GrammarTooComplexError).
    """

    pattern: str
    trigger: str | None = None
    definitions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str):
            raise RegexError(f"Regex takes a pattern string, got {type(self.pattern).__name__}")

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        """The pattern and definitions as given."""
        return LoweredRegex(self.pattern, tuple(self.definitions))

    def cache_key(self) -> tuple:
        """``("regex", pattern, trigger, definitions)``."""
        return ("regex", self.pattern, self.trigger, tuple(self.definitions))


@dataclass(frozen=True, eq=False)
class JsonSchema(RegexSpec):
    """Output must be one JSON document valid against ``schema``.

    Args:
        schema: a JSON Schema dict (or bool), a JSON string, or a pydantic model class.
        whitespace: ``"compact"`` (no whitespace), ``"flexible"`` (bounded runs) or the
            longest whitespace run.
        strict: raise UnsupportedSchemaError on keywords that cannot be enforced.
        allow_extra_properties: let objects without ``additionalProperties`` carry
            unlisted keys (the spec's default); False generates only listed keys.
        trigger: free text up to and including this string first (module docstring).
        max_recursion_depth: expansions of one recursive ``$ref`` along a path; None:
            ``compile_json_schema``'s default.

    Raises (at compile): InvalidSchemaError, UnsupportedSchemaError, GrammarTooComplexError.
    """

    schema: Any
    whitespace: str | int = "compact"
    strict: bool = True
    allow_extra_properties: bool = False
    trigger: str | None = None
    max_recursion_depth: int | None = None

    def _depth(self) -> int:
        depth = self.max_recursion_depth
        return _json_schema().DEFAULT_MAX_RECURSION_DEPTH if depth is None else depth

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        """The schema checked against its metaschema, then converted (``json_schema``)."""
        json_schema = _json_schema()
        schema = schema_for(self.schema)
        depth = _ids().check_schema_depth(schema)  # before any walk of it
        if isinstance(schema, dict):
            # jsonschema's verdict; common schemas by a fast table
            _check().check_schema(schema, depth=depth)
        warnings: list[str] = []
        reusable: set[int] = set()
        head_aliases: dict[int, tuple[bytes, int]] = {}
        pattern, definitions = json_schema.json_schema_to_shared(
            schema,
            whitespace=self.whitespace,
            strict=self.strict,
            allow_extra_properties=self.allow_extra_properties,
            max_recursion_depth=self._depth(),
            warnings=warnings,
            max_convert_seconds=json_schema.CONVERT_MAX_SECONDS
            if max_convert_seconds is None
            else max_convert_seconds,
            reusable=reusable,
            head_aliases=head_aliases,
        )
        return LoweredRegex(
            pattern,
            tuple(definitions),
            tuple(warnings),
            frozenset(reusable),
            tuple((i, alias, slack) for i, (alias, slack) in sorted(head_aliases.items())),
        )

    def portable(self) -> JsonSchema:
        """This spec with its schema as a dict or bool (``schema_for``)."""
        if isinstance(self.schema, (dict, bool)):
            return self
        return dataclasses.replace(self, schema=schema_for(self.schema))

    def cache_key(self) -> tuple:
        """``("json", the schema as JSON text, options)``.

        Raises:
            InvalidSchemaError: the schema is not a dict, bool, JSON text or model class.
            GrammarTooComplexError: the schema nests deeper than ``MAX_SCHEMA_DEPTH``
                (arrays/objects, or subschemas counting ``$ref``: ``check_schema_depth``).
        """
        schema = schema_for(self.schema)
        depth = _ids().check_schema_depth(schema)  # before any other walk
        options = (
            self.whitespace,
            self.strict,
            self.allow_extra_properties,
            self.max_recursion_depth,  # None: $ref cycles as grammar rules (fsm.grammar)
            self.trigger,
        )
        return ("json", dumps(schema, depth=depth), options)


@dataclass(frozen=True)
class Choice(RegexSpec):
    """Output must be exactly one of ``options`` (any strings).

    Args:
        options: the strings.
        trigger: free text up to and including this string first (module docstring).

    Raises:
        RequestError: ``options`` empty, one string (not a list of them) or not all strings.
    """

    options: tuple[str, ...]
    trigger: str | None = None

    def __init__(self, options: Any, trigger: str | None = None) -> None:
        if isinstance(options, str):
            raise RequestError(f"Choice takes a list of strings, not one string: [{options!r}]?")
        opts = tuple(options)
        if not opts or not all(isinstance(o, str) for o in opts):
            raise RequestError("Choice needs a non-empty list of strings")
        object.__setattr__(self, "options", opts)
        object.__setattr__(self, "trigger", trigger)

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        """One alternative per distinct option, each written literally."""
        from .regex.escape import escape_literal

        alternatives = (escape_literal(c) for c in dict.fromkeys(self.options))
        return LoweredRegex("(?:" + "|".join(alternatives) + ")")

    def cache_key(self) -> tuple:
        """``("choice", options, trigger)``."""
        return ("choice", self.options, self.trigger)


@dataclass(frozen=True)
class Concatenation(RegexSpec):
    """Output must be the text of ``parts[0]``, then of ``parts[1]``, and so on.

    Token healing uses it: the prompt's removed text (a one-option ``Choice``) followed by
    the gen's constraint.

    Args:
        parts: one or more regex specs (``RegexSpec``), none with a trigger.
        trigger: free text up to and including this string first (module docstring).

    Raises:
        RequestError: no parts, a part that is not a ``RegexSpec``, or a part with a trigger.
    """

    parts: tuple[RegexSpec, ...]
    trigger: str | None = None

    def __init__(self, parts: Any, trigger: str | None = None) -> None:
        parts = tuple(parts)
        if not parts:
            raise RequestError("Concatenation needs at least one part")
        for p in parts:
            if not isinstance(p, RegexSpec):
                raise RequestError(
                    "Concatenation joins Regex, JsonSchema, Choice or "
                    f"Concatenation specs; got {type(p).__name__}"
                )
            if p.trigger is not None:
                raise RequestError(
                    "a part of a Concatenation cannot have a trigger; give it to the Concatenation"
                )
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "trigger", trigger)

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        """The parts' regexes in order, their definitions renumbered into one list.

        Raises:
            UnsupportedRegexError: with shared definitions, a part's text holds a raw code
                point of the placeholder range that is not its own placeholder.
            GrammarTooComplexError: more definitions than placeholders.
        """
        from .regex.definitions import MAX_DEFINITIONS, PLACEHOLDER_BASE
        from .regex.parse import regex_group

        lowered = [p.lower(max_convert_seconds=max_convert_seconds) for p in self.parts]
        total = sum(len(low.definitions) for low in lowered)
        if total > MAX_DEFINITIONS:
            raise GrammarTooComplexError(
                f"a Concatenation shares {total} definitions, more than {MAX_DEFINITIONS}"
            )
        pieces: list[str] = []
        definitions: list[str] = []
        warnings: list[str] = []
        for part, low in zip(self.parts, lowered, strict=True):
            own, offset = len(low.definitions), len(definitions)
            texts = (low.pattern, *low.definitions)
            if own < total and any(
                _has_code_point(t, PLACEHOLDER_BASE + own, PLACEHOLDER_BASE + total) for t in texts
            ):
                raise UnsupportedRegexError(
                    "a raw code point of the shared-definition range in a Concatenation part; "
                    "write it as an escape"
                )
            if offset:  # move this part's placeholders past the earlier parts' definitions
                shift = {PLACEHOLDER_BASE + i: PLACEHOLDER_BASE + offset + i for i in range(own)}
                texts = tuple(t.translate(shift) for t in texts)
            # a user's regex may carry end anchors and global flags: its group keeps them
            # inside (``regex_group``); the other specs' lowered texts have neither
            user = type(part) is Regex
            pieces.append(regex_group(texts[0]) if user else "(?:" + texts[0] + ")")
            definitions.extend(texts[1:])
            warnings.extend(low.warnings)
        return LoweredRegex("".join(pieces), tuple(definitions), tuple(warnings))

    def portable(self) -> Concatenation:
        """This spec with its parts' ``portable`` forms."""
        parts = tuple(p.portable() for p in self.parts)
        same = all(a is b for a, b in zip(parts, self.parts, strict=True))
        return self if same else Concatenation(parts, self.trigger)

    def cache_key(self) -> tuple:
        """``("concat", the parts' keys, trigger)``."""
        return ("concat", tuple(p.cache_key() for p in self.parts), self.trigger)


def _has_code_point(text: str, lo: int, hi: int) -> bool:
    """True when ``text`` holds a raw code point in ``[lo, hi)``."""
    return re.search(f"[{chr(lo)}-{chr(hi - 1)}]", text) is not None


def to_constraint(value: Any) -> BaseSpec | BaseCompiledGrammar | None:
    """Normalise what users pass as ``constraint``.

    Args:
        value: None, a spec, a compiled grammar, a JSON Schema dict, or a pydantic model
            class.

    Returns:
        None, the spec or grammar as given, or a ``JsonSchema`` of a dict or model class.

    Raises:
        RequestError: anything else (names the type).
    """
    if value is None or isinstance(value, (BaseSpec, BaseCompiledGrammar)):
        return value
    if isinstance(value, dict):
        return JsonSchema(value)
    if isinstance(value, type) and hasattr(value, "model_json_schema"):
        return JsonSchema(value)
    if isinstance(value, str):
        raise RequestError(
            "a plain string is ambiguous as a constraint: wrap it as Regex(...) or "
            "JsonSchema(json.loads(...))"
        )
    raise RequestError(f"unsupported constraint type {type(value).__name__}")


def spec_of(value: Any) -> BaseSpec | None:
    """The spec form of a constraint: what crosses a process boundary.

    Args:
        value: anything ``to_constraint`` accepts.

    Returns:
        None, the spec (``to_constraint``'s), or a compiled grammar's ``spec``.

    Raises:
        RequestError: as ``to_constraint``.
    """
    term = to_constraint(value)
    return term.spec if isinstance(term, BaseCompiledGrammar) else term


def schema_for(model_or_schema: Any) -> dict | bool:
    """A JSON Schema from a dict, a bool, a JSON string or a pydantic model class.

    Raises:
        InvalidSchemaError: anything else, or a JSON string that does not parse.
        GrammarTooComplexError: a JSON string nested deeper than ``nesting.MAX_JSON_DEPTH``.
    """
    if isinstance(model_or_schema, (dict, bool)):
        return model_or_schema
    if isinstance(model_or_schema, str):
        try:
            return loads(model_or_schema)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError(f"schema string is not JSON: {exc}") from exc
    if isinstance(model_or_schema, type) and hasattr(model_or_schema, "model_json_schema"):
        return model_or_schema.model_json_schema()
    if isinstance(model_or_schema, type):
        got = f"the class {model_or_schema.__qualname__} (not a pydantic model)"
    else:
        got = f"a value of type {type(model_or_schema).__name__}"
    raise InvalidSchemaError(
        f"expected a JSON Schema dict, a JSON string or a pydantic model class, got {got}"
    )


def lower_spec(spec: RegexSpec, *, max_convert_seconds: float | None = None) -> Any:
    """What ``structgen.fsm.compiler.compile_spec`` compiles for ``spec``, lowered without
    importing torch: a caller checks a spec early (the CLI, before the model loads) and
    hands the result to ``compile_spec(spec, vocab, lowered=...)``, which then does not
    lower it again.

    Args:
        spec: a regex spec.
        max_convert_seconds: CPU-time budget of a JSON Schema's conversion (None: the
            default, ``CONVERT_MAX_SECONDS``); pass ``compile_spec``'s value.

    Returns:
        For a ``JsonSchema`` (not a subclass) with ``max_recursion_depth`` None and a
        ``$ref``: ``lower_recursive_schema``'s ``SchemaRules`` where a ``$ref`` cycle is
        reached, else its ``LoweredRegex``; for any other spec ``spec.lower(...)``.

    Raises:
        StructgenError: the spec cannot be lowered (as ``compile``: InvalidSchemaError,
            UnsupportedSchemaError, GrammarTooComplexError, ...).
    """
    default = _json_schema().CONVERT_MAX_SECONDS
    seconds = default if max_convert_seconds is None else max_convert_seconds
    if type(spec) is JsonSchema and spec.max_recursion_depth is None:
        lower_recursive_schema = _schema_rules().lower_recursive_schema  # $ref cycles: rules
        lowered = lower_recursive_schema(spec.portable(), max_convert_seconds=seconds)
        if lowered is not None:
            return lowered
    return spec.lower(max_convert_seconds=seconds)


@dataclass(frozen=True)
class Grammar(BaseSpec):
    """Output must be a sentence of a context-free grammar (Lark, GBNF or EBNF text).

    Args:
        text: the grammar.
        syntax: ``"auto"`` (``::=`` rules: GBNF, ``name:`` rules: Lark), ``"lark"``,
            ``"gbnf"`` or ``"ebnf"``.
        start: the start rule (default ``start`` for Lark, ``root`` otherwise).
        trigger: free text up to and including this string first (module docstring).
        prefix: literal text before the grammar's sentence (token healing sets it);
            not with ``trigger``.

    Raises:
        InvalidGrammarError: ``text`` is not a string, ``syntax`` is not one of
            ``"auto"``, ``"lark"``, ``"gbnf"``, ``"ebnf"``, or ``start`` / ``trigger`` is
            neither a string nor None (at compile: InvalidGrammarError,
            UnsupportedGrammarError, GrammarTooComplexError; see
            ``structgen.fsm.grammar.compile_grammar``).
    """

    text: str
    syntax: str = "auto"
    start: str | None = None
    trigger: str | None = None
    prefix: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidGrammarError(
                f"Grammar takes the grammar's text, got {type(self.text).__name__}"
            )
        from .grammar.front import SYNTAXES

        if self.syntax not in SYNTAXES:
            raise InvalidGrammarError(
                f"unknown grammar syntax {self.syntax!r}; expected one of {SYNTAXES}"
            )
        for name in ("start", "trigger"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidGrammarError(
                    f"Grammar's {name} must be a string or None, got {type(value).__name__}"
                )

    def compile(self, vocab: Any, **budgets: Any) -> BaseCompiledGrammar:
        """Compile for ``vocab`` (cached, ``structgen.fsm.grammar.compile_grammar``, which
        also takes ``budgets``: ``max_states``, ``max_seconds``, ``max_configs``,
        ``max_items``).
        """
        from .grammar import compile_grammar

        return compile_grammar(
            self.text,
            vocab,
            syntax=self.syntax,
            start=self.start,
            trigger=self.trigger,
            prefix=self.prefix,
            **budgets,
        )

    def cache_key(self) -> tuple:
        """``("grammar", text, syntax, start, trigger, prefix)``."""
        return ("grammar", self.text, self.syntax, self.start, self.trigger, self.prefix)


@dataclass(frozen=True, eq=False)
class TagStructure:
    """One kind of tagged region of a ``StructuralTag``: ``begin``, content, ``end``.

    Args:
        begin: the text that opens the region (starts with one of the tag's triggers).
        end: the text that closes it.
        schema: the content is one JSON document valid against it (a JSON Schema dict,
            bool, JSON text or pydantic model class, read with flexible whitespace; or
            a ``JsonSchema`` spec, with its own options).
        regex: the content fully matches this regex (as ``Regex``).
        grammar: the content is a sentence of this grammar (as ``Grammar``, without
            ``%ignore``; the tag then compiles as one context-free grammar,
            ``structgen.fsm.tags.grammar``).

    Raises:
        RequestError: not exactly one of ``schema``, ``regex``, ``grammar``; a begin or
            end that is not a string.
    """

    begin: str
    end: str
    schema: Any = None
    regex: str | None = None
    grammar: str | None = None

    def __post_init__(self) -> None:
        given = [v is not None for v in (self.schema, self.regex, self.grammar)]
        if sum(given) != 1:
            raise RequestError("a TagStructure takes exactly one of schema=, regex=, grammar=")
        if not isinstance(self.begin, str) or not isinstance(self.end, str):
            raise RequestError("a TagStructure's begin and end are strings")


@dataclass(frozen=True, eq=False)
class StructuralTag(RegexSpec):
    """Free text in which tagged regions follow their own constraints (structural tags,
    as XGrammar, SGLang and vLLM define them).

    The output is free text until one of ``triggers`` first appears; that starts a
    region of a structure whose ``begin`` starts with the trigger: the rest of the begin,
    the content under its schema or regex, its ``end``; then free text again, any number
    of times. Free text holds no trigger and no special token. The whole is one
    automaton (``structgen.fsm.tags.lower``), so jump-forward, speculation and the token
    budget work as for any regex spec.

    Args:
        structures: the ``TagStructure`` s (or dicts with ``begin``, ``end`` and one of
            ``schema``, ``regex``, ``grammar``).
        triggers: texts that start a region; default: the structures' begins.
        at_least_one: the output holds at least one region.
        stop_after_first: the output ends right after the first region's end.
        format: instead of the above, a format tree (``structgen.fsm.tags.format``);
            ``from_dict`` builds one from XGrammar's ``format`` form.

    Raises:
        RequestError: neither or both of ``structures`` and ``format``, or a malformed
            structure. Compiling raises InvalidSchemaError / UnsupportedSchemaError with the
            JSON pointer inside the tag (``/structures/0/schema/properties/x``),
            RegexError, InvalidGrammarError (a begin without a trigger, a content
            grammar's error with the structure's pointer), and UnsupportedGrammarError (a
            content grammar with ``%ignore``).
    """

    structures: tuple = ()
    triggers: tuple[str, ...] = ()
    at_least_one: bool = False
    stop_after_first: bool = False
    format: Any = None
    trigger = None  # a structural tag has its own triggers (RegexSpec's field)

    def __post_init__(self) -> None:
        from .tags.format import FormatNode, RegexContent, Tag, TriggeredTags
        from .tags.parse import json_content

        if self.format is not None:
            if self.structures or self.triggers:
                raise RequestError("a StructuralTag takes structures= or format=, not both")
            if not isinstance(self.format, FormatNode):
                raise RequestError("format= is a structgen.fsm.tags node; see from_dict")
            return
        items = [s if isinstance(s, TagStructure) else _tag_structure(s) for s in self.structures]
        if not items:
            raise RequestError("a StructuralTag needs at least one structure")
        tags = []
        for i, s in enumerate(items):
            where = f"/structures/{i}"
            if s.schema is not None:
                content = json_content(s.schema, f"{where}/schema")
            elif s.regex is not None:
                content = RegexContent(s.regex, f"{where}/regex")
            else:
                from .tags.format import GrammarContent

                content = GrammarContent(s.grammar, "auto", f"{where}/grammar")
            tags.append(Tag(s.begin, content, (s.end,), where))
        triggers = tuple(self.triggers) or tuple(dict.fromkeys(s.begin for s in items))
        tree = TriggeredTags(triggers, tuple(tags), self.at_least_one, self.stop_after_first)
        object.__setattr__(self, "structures", tuple(items))
        object.__setattr__(self, "triggers", triggers)
        object.__setattr__(self, "format", tree)

    @classmethod
    def from_dict(cls, obj: Any) -> StructuralTag:
        """The structural tag a client sent (``structgen.fsm.tags.parse``).

        Args:
            obj: ``{"type": "structural_tag", "structures": [...], "triggers": [...]}``,
                ``{"type": "structural_tag", "format": {...}}``, a bare format node, or
                the JSON text of one of them.

        Raises:
            InvalidGrammarError: a malformed tag (with the JSON pointer).
            UnsupportedGrammarError: a node type structgen does not build (type, pointer).
        """
        from .tags.parse import parse_structural_tag

        return cls(format=parse_structural_tag(obj))

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        """The tag's regex (``structgen.fsm.tags.lower_format``)."""
        from .tags.lower import lower_format

        pattern, definitions, warnings = lower_format(
            self.format, max_convert_seconds=max_convert_seconds
        )
        return LoweredRegex(pattern, definitions, warnings)

    def compile(self, vocab: Any) -> BaseCompiledGrammar:
        """Compile for ``vocab`` (cached; ``structgen.fsm.tags.compile``: a trigger, begin
        or end that is one special token of ``vocab`` is also accepted as that token).
        """
        from .tags.compile import compile_structural_tag

        return compile_structural_tag(self, vocab)

    def portable(self) -> StructuralTag:
        """This tag with every JSON content's schema as a dict or bool."""
        from .tags.format import portable_node

        return StructuralTag(format=portable_node(self.format))

    def cache_key(self) -> tuple:
        """``("structural_tag", the digest of the format tree's key)``
        (``tags.format.node_key``, ``key_digest``): equal for equal trees, so two equal
        tags share a compiled grammar.

        Computed once per tag, at the first call: a schema dict the tag holds must not
        be changed after the tag is first compiled (build a new tag instead).

        Raises:
            InvalidSchemaError, GrammarTooComplexError: a JSON content's schema (as
                ``JsonSchema.cache_key``).
        """
        from .tags.format import key_digest, node_key

        key = self.__dict__.get("_cache_key")
        if key is None:
            key = ("structural_tag", key_digest(node_key(self.format)))
            object.__setattr__(self, "_cache_key", key)
        return key


def _tag_structure(item: Any) -> TagStructure:
    """A ``TagStructure`` of a dict with ``begin``, ``end`` and one content key."""
    if not isinstance(item, dict):
        raise RequestError(f"a structure is a TagStructure or a dict, got {type(item).__name__}")
    known = {"begin", "end", "schema", "regex", "grammar"}
    if set(item) - known:
        raise RequestError(f"unknown structure keys {sorted(set(item) - known)}")
    return TagStructure(**item)
