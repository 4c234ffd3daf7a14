"""The format tree of a structural tag: immutable nodes, one per kind of region.

XGrammar's structural tags describe the output as a tree (``{"type": "structural_tag",
"format": {...}}``); ``StructuralTag`` (``structgen.fsm.spec``) holds one such tree, built
either from Python (``StructuralTag(structures=..., triggers=...)`` becomes one
``TriggeredTags`` node) or from a dict (``tags.parse``). Node kinds, with the language
each stands for:

* ``ConstString(value)``: exactly ``value``;
* ``JsonContent(spec)``: one JSON document valid against ``spec`` (a ``JsonSchema``);
* ``RegexContent(pattern)``: a full match of ``pattern`` (the fsm's regex dialect);
* ``GrammarContent(text, syntax)``: a sentence of a context-free grammar;
* ``AnyText()``: any text; as a tag's content, any text not containing the tag's end;
* ``Sequence(elements)``: the elements' texts one after the other;
* ``Or(elements)``: one of the elements' texts;
* ``Tag(begin, content, end)``: ``begin``, the content, then one of ``end``;
* ``TriggeredTags(triggers, tags, ...)``: free text until a trigger first appears, then a
  tag whose begin starts with that trigger, then free text again, any number of times
  (``at_least_one``: at least one tag; ``stop_after_first``: the text ends after the
  first tag's end);
* ``TagsWithSeparator(tags, separator, ...)``: tags, ``separator`` between consecutive
  ones (``at_least_one``, ``stop_after_first`` as above).

Every node carries ``where``: the JSON pointer of the node in the structural tag as
written (``/structures/0`` or ``/format/tags/1``), which errors name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FormatNode",
    "ConstString",
    "JsonContent",
    "RegexContent",
    "GrammarContent",
    "AnyText",
    "Sequence",
    "Or",
    "Tag",
    "TriggeredTags",
    "TagsWithSeparator",
    "node_key",
    "key_digest",
    "portable_node",
]


class FormatNode:
    """Base of the format tree's nodes (frozen dataclasses with a ``where`` pointer)."""

    where: str


@dataclass(frozen=True)
class ConstString(FormatNode):
    """Exactly ``value``."""

    value: str
    where: str = ""


@dataclass(frozen=True, eq=False)
class JsonContent(FormatNode):
    """One JSON document valid against ``spec`` (a ``structgen.fsm.spec.JsonSchema``)."""

    spec: Any
    where: str = ""


@dataclass(frozen=True)
class RegexContent(FormatNode):
    """A full match of ``pattern`` (Python ``re`` dialect, as ``Regex``)."""

    pattern: str
    where: str = ""


@dataclass(frozen=True)
class GrammarContent(FormatNode):
    """A sentence of a context-free grammar (``text`` in ``syntax``, as ``Grammar``)."""

    text: str
    syntax: str = "auto"
    where: str = ""


@dataclass(frozen=True)
class AnyText(FormatNode):
    """Any text (inside a ``Tag``: any text without the tag's end)."""

    where: str = ""


@dataclass(frozen=True)
class Sequence(FormatNode):
    """The elements one after the other."""

    elements: tuple[FormatNode, ...]
    where: str = ""


@dataclass(frozen=True)
class Or(FormatNode):
    """One of the elements."""

    elements: tuple[FormatNode, ...]
    where: str = ""


@dataclass(frozen=True)
class Tag(FormatNode):
    """``begin``, then ``content``, then one of the strings of ``end``."""

    begin: str
    content: FormatNode
    end: tuple[str, ...]
    where: str = ""


@dataclass(frozen=True)
class TriggeredTags(FormatNode):
    """Free text with tags, each started where a trigger first appears (module docstring)."""

    triggers: tuple[str, ...]
    tags: tuple[Tag, ...]
    at_least_one: bool = False
    stop_after_first: bool = False
    where: str = ""


@dataclass(frozen=True)
class TagsWithSeparator(FormatNode):
    """Tags with ``separator`` between consecutive ones (module docstring)."""

    tags: tuple[Tag, ...]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False
    where: str = ""


def node_key(node: FormatNode) -> tuple:
    """A hashable key equal for trees that compile to the same grammar.

    Raises:
        InvalidSchemaError, GrammarTooComplexError: a JSON content's schema (as
            ``JsonSchema.cache_key``).
    """
    if isinstance(node, JsonContent):
        return ("json", node.spec.cache_key())
    if isinstance(node, (Sequence, Or)):
        return (type(node).__name__, tuple(node_key(e) for e in node.elements))
    if isinstance(node, Tag):
        return ("tag", node.begin, node_key(node.content), node.end)
    if isinstance(node, TriggeredTags):
        tags = tuple(node_key(t) for t in node.tags)
        return ("triggered", node.triggers, tags, node.at_least_one, node.stop_after_first)
    if isinstance(node, TagsWithSeparator):
        tags = tuple(node_key(t) for t in node.tags)
        return ("separated", tags, node.separator, node.at_least_one, node.stop_after_first)
    return (type(node).__name__, *(getattr(node, f) for f in node.__dataclass_fields__))


_PLAIN = (str, int, float, bool, type(None))


def key_digest(key: tuple) -> str | tuple:
    """A short stand-in for a ``node_key``: equal keys give equal digests.

    A structural tag's key holds every schema's JSON text, so hashing it (the compile
    caches do on every lookup: a tuple's hash is not kept) walks every tool again; its
    digest is a string whose hash Python keeps. The digest is the 32-byte BLAKE2b of the
    key's ``repr``, which is exact for keys of strings, numbers, booleans, None and
    tuples of them; a key holding anything else (whose ``repr`` may not tell values
    apart) is returned as it is. Raises: never.
    """
    stack: list[Any] = [key]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(item)
        elif not isinstance(item, _PLAIN):
            return key
    return "blake2b:" + hashlib.blake2b(repr(key).encode("utf-8", "surrogatepass")).hexdigest()


def portable_node(node: FormatNode) -> FormatNode:
    """``node`` with every JSON content's spec ``portable`` (no pydantic classes)."""
    if isinstance(node, JsonContent):
        spec = node.spec.portable()
        return node if spec is node.spec else JsonContent(spec, node.where)
    if isinstance(node, (Sequence, Or)):
        return type(node)(tuple(portable_node(e) for e in node.elements), node.where)
    if isinstance(node, Tag):
        return Tag(node.begin, portable_node(node.content), node.end, node.where)
    if isinstance(node, TriggeredTags):
        tags = tuple(portable_node(t) for t in node.tags)
        return TriggeredTags(
            node.triggers, tags, node.at_least_one, node.stop_after_first, node.where
        )
    if isinstance(node, TagsWithSeparator):
        tags = tuple(portable_node(t) for t in node.tags)
        return TagsWithSeparator(
            tags, node.separator, node.at_least_one, node.stop_after_first, node.where
        )
    return node
