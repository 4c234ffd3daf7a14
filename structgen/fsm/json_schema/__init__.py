"""JSON Schema (or a pydantic model) -> regex over the serialized JSON document.

The rule: a keyword of the document's draft is enforced exactly, or (``strict=True``) the
conversion raises ``UnsupportedSchemaError(keyword, pointer)``; with ``strict=False`` it is
ignored and a warning recorded. Annotations are dropped; keys outside the draft's
vocabulary are ignored with a warning, ``x-structgen-*`` keys refused (``vocabulary``).
Generated documents never violate the schema; some valid spellings are not generated (see
each module). This package's face is the entry points
and options here; ``convert.JsonSchemaConverter`` dispatches, the types are lowered in
``scalars`` (string/integer/number, with ``pattern``, ``string_length``, ``formats``,
``numeric``), ``arrays``, ``objects`` (with ``dependencies``); ``allOf``/``oneOf`` are
combined in ``combine``, ``oneOf``/``not``/``if`` beyond its shortcuts are built by
intersection and complement in ``boolean_ops``, ``enum``/``const`` in ``values``;
``$ref`` is resolved in ``ids`` and shared in ``refs``; the metaschema check is
``check``.

Enforced: ``type`` (one or a list; absent = every type, each lowered with its own
keywords), ``enum``/``const`` of any JSON value (filtered by the sibling keywords),
``anyOf``, ``oneOf`` (disjoint branches as ``anyOf``, others by automata:
``boolean_ops``), ``allOf``
(merged), ``$ref`` within the document (JSON pointers, ``$id`` bases, ``$anchor``: see
``ids``; siblings are merged as ``allOf`` in 2019-09+, ignored in drafts 3-7),
``not`` next to ``const``/``enum`` (values filtered), or of ``type``/``not``/booleans
(the types left; ``not: {type: integer}`` leaves numbers with a nonzero fraction digit),
other ``not`` and ``if``/``then``/``else`` by intersection and complement over one
canonical serialization (``boolean_ops``),
``dependentRequired``/``dependentSchemas`` (2019-09+) and ``dependencies`` (drafts 3-7)
as branches per combination of trigger keys (``dependencies``).

Recursive ``$ref`` is unrolled to ``max_recursion_depth`` (default 10) expansions of
the same reference along a path, each distinct expansion converted once and shared
(``refs``: linear size in the depth, whatever the branching); deeper, the recursive
branch is dropped where the schema allows (optional property, empty array, other
``anyOf`` branch) and a warning is recorded; where it cannot be dropped,
``UnsupportedSchemaError("$ref", pointer)``.

Values with no schema (``{}``, ``true``, array ``items`` absent) are any JSON value
nested at most ``ANY_VALUE_DEPTH`` (10, as deep as recursive ``$ref``) containers deep;
each depth is one shared definition, so the pattern is linear in the depth and the lazy
DFA only builds the nestings an instance visits (real payloads under
``additionalProperties: true`` nest 3+ deep: MaskBench Github_trivial o45018). In a schema
compiled as grammar rules (a recursive ``$ref`` under ``max_recursion_depth=None``) they
nest to any depth instead (``fsm.grammar.schema_rules``).

Whitespace: ``"compact"`` writes none (``json.dumps(x, separators=(",", ":"))``);
``"flexible"`` allows runs of at most ``FLEXIBLE_WS_MAX`` of space, tab, CR, LF
around structural characters, one run between two tokens (``[`` and ``]`` of an empty
array included); an int sets that maximum run.
"""

from __future__ import annotations

from typing import Any

from ..regex.definitions import expand_shared
from ..spec import schema_for
from .convert import ANY_VALUE_DEPTH, CONVERT_MAX_SECONDS, FLEXIBLE_WS_MAX, JsonSchemaConverter
from .ids import check_schema_depth

__all__ = [
    "json_schema_to_regex",
    "json_schema_to_shared",
    "DEFAULT_MAX_RECURSION_DEPTH",
    "CONVERT_MAX_SECONDS",
    "FLEXIBLE_WS_MAX",
]

DEFAULT_MAX_RECURSION_DEPTH = ANY_VALUE_DEPTH  # untyped values nest as deep as $ref unrolls


def json_schema_to_regex(
    schema: Any,
    *,
    whitespace: str | int = "compact",
    strict: bool = True,
    allow_extra_properties: bool = False,
    max_recursion_depth: int = DEFAULT_MAX_RECURSION_DEPTH,
    warnings: list[str] | None = None,
    max_convert_seconds: float = CONVERT_MAX_SECONDS,
) -> str:
    """Regex (Python syntax, fullmatch) for the JSON documents valid under ``schema``.

    Args:
        schema: dict / bool schema, pydantic model class, or JSON string.
        whitespace: ``"compact"``, ``"flexible"`` or the maximum whitespace run.
        strict: raise on keywords that cannot be enforced; else ignore them and
            append a message to ``warnings``.
        allow_extra_properties: generate extra keys where the schema permits them
            (only for objects without declared properties).
        max_recursion_depth: expansions of one recursive ``$ref`` along a path.
        warnings: list that receives warning strings (mutated).
        max_convert_seconds: CPU-time budget of the conversion, in CPU seconds of the
            converting thread (default ``CONVERT_MAX_SECONDS``, 10 CPU s).

    Raises:
        UnsupportedSchemaError: a keyword that cannot be enforced (``keyword``, ``pointer``).
        InvalidSchemaError: malformed schema parts (e.g. an unresolvable ``$ref``).
        GrammarTooComplexError: the recursion written out as one text is too large
            (``compile_json_schema`` shares it instead, see ``json_schema_to_shared``); the
            conversion ran past ``max_convert_seconds``; the schema nests deeper than
            ``nesting.MAX_SCHEMA_DEPTH`` arrays/objects.
    """
    pattern, definitions = json_schema_to_shared(
        schema,
        whitespace=whitespace,
        strict=strict,
        allow_extra_properties=allow_extra_properties,
        max_recursion_depth=max_recursion_depth,
        warnings=warnings,
        max_convert_seconds=max_convert_seconds,
    )
    return expand_shared(pattern, definitions)


def json_schema_to_shared(
    schema: Any,
    *,
    whitespace: str | int = "compact",
    strict: bool = True,
    allow_extra_properties: bool = False,
    max_recursion_depth: int = DEFAULT_MAX_RECURSION_DEPTH,
    warnings: list[str] | None = None,
    max_convert_seconds: float = CONVERT_MAX_SECONDS,
    reusable: set[int] | None = None,
    head_aliases: dict[int, tuple[bytes, int]] | None = None,
) -> tuple[str, list[str]]:
    """Like ``json_schema_to_regex``, with ``$ref`` expansions kept as shared definitions.

    ``reusable`` (mutated) receives the indices of the definitions whose language is the
    same in every schema (the "any JSON value" chain: ``regex_to_dfa(..., reusable=...)``
    lowers them once per process, ``regex.reused``). ``head_aliases`` (mutated) receives
    definition index -> ``(alias, slack)`` of the product states of a string pattern or
    format with a length (``string_length``; ``regex.terms.TermArena.head_aliases``).

    Returns:
        ``(pattern, definitions)``: regex texts in which the raw code point
        ``regex.definitions.PLACEHOLDER_BASE + i`` stands for ``definitions[i]`` (which only
        refers to earlier definitions). ``regex_to_dfa(pattern, definitions=...)``
        compiles them; ``regex.definitions.expand_shared`` writes them out as one regex.

    Raises:
        UnsupportedSchemaError, InvalidSchemaError: as ``json_schema_to_regex``.
        GrammarTooComplexError: the conversion ran past ``max_convert_seconds``; the schema
            nests deeper than ``nesting.MAX_SCHEMA_DEPTH`` arrays/objects, or subschemas
            counting ``$ref`` (``ids.check_schema_depth``).
    """
    if max_recursion_depth < 1:
        raise ValueError(f"max_recursion_depth must be >= 1, got {max_recursion_depth}")
    schema = schema_for(schema)
    check_schema_depth(schema)
    conv = JsonSchemaConverter(
        schema,
        whitespace=whitespace,
        strict=strict,
        allow_extra_properties=allow_extra_properties,
        max_recursion_depth=max_recursion_depth,
        max_seconds=max_convert_seconds,
    )
    regex = conv.convert_root()
    if warnings is not None:
        warnings.extend(conv.warnings)
    if reusable is not None:
        reusable.update(conv.sharing.reusable)
    if head_aliases is not None:
        head_aliases.update(conv.sharing.head_aliases)
    return regex, conv.sharing.definitions
