"""Constraint terms accepted by ``Engine.generate``: immutable specs, compiled per vocabulary.

Each term holds only its spec (no model state); ``compile(vocab)`` lowers it through
``structgen.fsm`` into a ``CompiledGrammar`` (compiles are cached there by spec and
vocabulary fingerprint).

Every term takes ``trigger=``: the model then writes free text until that text first
appears (e.g. ``"</think>"`` closing a reasoning block), and the constraint applies to
everything after it. Trigger and constraint are one automaton, so a token that spans the
trigger and the start of the answer is checked as a whole; the free text cannot end the
output (the trigger must come), and with ``max_tokens`` the mask steers the model to
write the trigger and a complete answer in time. The trigger must be ordinary text:
special tokens are never allowed under a constraint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from structgen.errors import RequestError

__all__ = ["Constraint", "Regex", "JsonSchema", "Choice", "to_constraint"]


class Constraint:
    """Base of the constraint terms."""

    def compile(self, vocab: Any) -> Any:  # pragma: no cover - abstract
        """Compile for ``vocab`` (a ``structgen.fsm.Vocabulary``) into a CompiledGrammar."""
        raise NotImplementedError


@dataclass(frozen=True)
class Regex(Constraint):
    """Output must fully match ``pattern`` (Python ``re`` dialect, no lookaround/backrefs).

    Args:
        pattern: the regex.
        trigger: free text up to and including this string first (module docstring).
        definitions: shared subpatterns ``pattern`` refers to (only for a compiled
            grammar's ``source_pattern``/``definitions``; see ``compile_regex``).

    Raises (at compile): RegexError, UnsupportedRegexError, GrammarTooComplexError.
    """

    pattern: str
    trigger: str | None = None
    definitions: tuple[str, ...] = ()

    def compile(self, vocab: Any) -> Any:
        """Compile for ``vocab``."""
        from structgen.fsm import compile_regex

        return compile_regex(self.pattern, vocab, trigger=self.trigger, definitions=self.definitions)


@dataclass(frozen=True, eq=False)
class JsonSchema(Constraint):
    """Output must be one JSON document valid against ``schema``.

    Args:
        schema: a JSON Schema dict, a JSON string, or a pydantic model class.
        whitespace: ``"compact"`` (no whitespace) or ``"flexible"`` (bounded runs).
        strict: raise UnsupportedSchemaError on keywords that cannot be enforced.
        allow_extra_properties: let objects without ``additionalProperties`` carry
            unlisted keys (the spec's default); False generates only listed keys.
        trigger: free text up to and including this string first (module docstring).

    Raises (at compile): InvalidSchemaError, UnsupportedSchemaError.
    """

    schema: Any
    whitespace: str = "compact"
    strict: bool = True
    allow_extra_properties: bool = False
    trigger: str | None = None

    def compile(self, vocab: Any) -> Any:
        """Compile for ``vocab``."""
        from structgen.fsm import compile_json_schema

        return compile_json_schema(
            self.schema,
            vocab,
            whitespace=self.whitespace,
            strict=self.strict,
            allow_extra_properties=self.allow_extra_properties,
            trigger=self.trigger,
        )


@dataclass(frozen=True)
class Choice(Constraint):
    """Output must be exactly one of ``options`` (any strings).

    Args:
        options: the strings.
        trigger: free text up to and including this string first (module docstring).

    Raises:
        RequestError: ``options`` empty or not all strings.
    """

    options: tuple[str, ...]
    trigger: str | None = None

    def __init__(self, options: Any, trigger: str | None = None) -> None:
        opts = tuple(options)
        if not opts or not all(isinstance(o, str) for o in opts):
            raise RequestError("Choice needs a non-empty list of strings")
        object.__setattr__(self, "options", opts)
        object.__setattr__(self, "trigger", trigger)

    def compile(self, vocab: Any) -> Any:
        """Compile for ``vocab``."""
        from structgen.fsm import compile_choice

        return compile_choice(list(self.options), vocab, trigger=self.trigger)


def to_constraint(value: Any) -> Constraint | Any | None:
    """Normalise what users pass as ``constraint``.

    Accepts None, a Constraint, a compiled grammar (anything with ``matcher``), a JSON
    Schema dict, or a pydantic model class.

    Raises:
        RequestError: anything else (names the type).
    """
    if value is None or isinstance(value, Constraint) or hasattr(value, "matcher"):
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


def schema_dict(schema: Any) -> dict:
    """The JSON Schema dict of a dict, JSON string or pydantic model class."""
    if isinstance(schema, dict):
        return schema
    if isinstance(schema, str):
        return json.loads(schema)
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    raise RequestError(f"expected a JSON Schema dict or pydantic model, got {type(schema).__name__}")
