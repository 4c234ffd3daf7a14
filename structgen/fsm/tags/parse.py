"""Structural tags as clients send them (dicts or JSON text) -> a format tree.

Two forms are read, following XGrammar's documentation (which SGLang and vLLM pass on):

* the structures form ``{"type": "structural_tag", "structures": [{"begin", "schema",
  "end"}], "triggers": [...]}`` (also with ``at_least_one`` / ``stop_after_first``),
  read as one ``TriggeredTags`` node;
* the format tree ``{"type": "structural_tag", "format": {...}}`` with the node types
  ``const_string``, ``json_schema``, ``regex``, ``grammar``, ``any_text``, ``sequence``,
  ``or``, ``tag``, ``triggered_tags`` and ``tags_with_separator`` (``tags.format``); a
  bare node (a dict whose ``type`` is one of those) is read as the tree itself.

Every error names the JSON pointer of the node at fault.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import InvalidGrammarError, UnsupportedGrammarError
from .format import (
    AnyText,
    ConstString,
    FormatNode,
    GrammarContent,
    JsonContent,
    Or,
    RegexContent,
    Sequence,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
)

__all__ = ["parse_structural_tag", "NODE_TYPES", "json_content"]

NODE_TYPES = (
    "const_string",
    "json_schema",
    "regex",
    "grammar",
    "any_text",
    "sequence",
    "or",
    "tag",
    "triggered_tags",
    "tags_with_separator",
)
STRUCTURE_WHITESPACE = "flexible"  # JSON contents given as a bare schema


def json_content(schema: Any, where: str) -> JsonContent:
    """A JSON content node of ``schema`` (a ``JsonSchema`` spec, or a schema given bare:
    then flexible whitespace, models write ``{"a": 1}`` as often as ``{"a":1}``).
    """
    from ..spec import JsonSchema

    spec = schema if isinstance(schema, JsonSchema) else JsonSchema(schema, STRUCTURE_WHITESPACE)
    return JsonContent(spec, where)


def parse_structural_tag(obj: Any) -> FormatNode:
    """The format tree of a structural tag as a client sends it.

    Args:
        obj: a dict (either form, module docstring) or its JSON text.

    Returns:
        The root node.

    Raises:
        InvalidGrammarError: not an object, a missing or mistyped field (with its pointer).
        UnsupportedGrammarError: a node type structgen does not build (type and pointer).
    """
    if isinstance(obj, (str, bytes)):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise InvalidGrammarError(f"structural tag is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InvalidGrammarError(
            f"a structural tag is a JSON object, got {type(obj).__name__} (at #)"
        )
    kind = obj.get("type", "structural_tag")
    if kind in NODE_TYPES:
        return _node(obj, "")
    if kind != "structural_tag":
        raise UnsupportedGrammarError(f"structural tag node type {kind!r} (at /type)")
    if "format" in obj:
        if "structures" in obj:
            raise InvalidGrammarError("a structural tag has format or structures, not both (at #)")
        return _node(obj["format"], "/format")
    structures = _field(obj, "structures", list, "")
    tags = []
    for i, item in enumerate(structures):
        where = f"/structures/{i}"
        if not isinstance(item, dict):
            raise InvalidGrammarError(f"structural tag: a structure is an object (at {where})")
        content = _structure_content(item, where)
        tags.append(
            Tag(_string(item, "begin", where), content, (_string(item, "end", where),), where)
        )
    triggers = _strings(obj.get("triggers"), "/triggers") if "triggers" in obj else ()
    return TriggeredTags(
        triggers or tuple(dict.fromkeys(t.begin for t in tags)),
        tuple(tags),
        _flag(obj, "at_least_one", ""),
        _flag(obj, "stop_after_first", ""),
        "",
    )


def _structure_content(item: dict, where: str) -> FormatNode:
    """The content of one structure: ``schema`` (or ``parameters``, SGLang's name)."""
    given = [k for k in ("schema", "parameters", "regex", "grammar") if k in item]
    if len(given) != 1:
        raise InvalidGrammarError(
            "structural tag: a structure gives exactly one of schema, regex or grammar "
            f"(at {where})"
        )
    key = given[0]
    if key == "regex":
        return RegexContent(_string(item, "regex", where), f"{where}/regex")
    if key == "grammar":
        return GrammarContent(_string(item, "grammar", where), "auto", f"{where}/grammar")
    return json_content(item[key], f"{where}/{key}")


def _node(obj: Any, where: str) -> FormatNode:
    if not isinstance(obj, dict):
        raise InvalidGrammarError(f"structural tag: a format node is an object (at {where or '#'})")
    kind = obj.get("type")
    if kind == "const_string":
        return ConstString(_string(obj, "value", where), where)
    if kind == "json_schema":
        if "json_schema" not in obj:
            raise InvalidGrammarError(f"structural tag: json_schema is missing (at {where})")
        return json_content(obj["json_schema"], f"{where}/json_schema")
    if kind == "regex":
        return RegexContent(_string(obj, "pattern", where), f"{where}/pattern")
    if kind == "grammar":
        return GrammarContent(_string(obj, "grammar", where), "auto", f"{where}/grammar")
    if kind == "any_text":
        return AnyText(where)
    if kind in ("sequence", "or"):
        items = _field(obj, "elements", list, where)
        if not items:
            raise InvalidGrammarError(f"structural tag: {kind} needs elements (at {where})")
        nodes = tuple(_node(e, f"{where}/elements/{i}") for i, e in enumerate(items))
        return (Sequence if kind == "sequence" else Or)(nodes, where)
    if kind == "tag":
        return _tag(obj, where)
    if kind in ("triggered_tags", "tags_with_separator"):
        items = _field(obj, "tags", list, where)
        tags = tuple(_tag(t, f"{where}/tags/{i}") for i, t in enumerate(items))
        at_least_one, stop = (
            _flag(obj, "at_least_one", where),
            _flag(obj, "stop_after_first", where),
        )
        if kind == "triggered_tags":
            triggers = _strings(obj.get("triggers"), f"{where}/triggers")
            return TriggeredTags(triggers, tags, at_least_one, stop, where)
        separator = _string(obj, "separator", where)
        return TagsWithSeparator(tags, separator, at_least_one, stop, where)
    raise UnsupportedGrammarError(
        f"structural tag node type {kind!r} is not supported (at {where}/type); supported: "
        + ", ".join(NODE_TYPES)
    )


def _tag(obj: Any, where: str) -> Tag:
    if not isinstance(obj, dict) or obj.get("type", "tag") != "tag":
        raise InvalidGrammarError(f"structural tag: expected a tag node (at {where or '#'})")
    if "content" not in obj:
        raise InvalidGrammarError(f"structural tag: a tag needs content (at {where})")
    end = obj.get("end")
    ends = (end,) if isinstance(end, str) else _strings(end, f"{where}/end")
    return Tag(_string(obj, "begin", where), _node(obj["content"], f"{where}/content"), ends, where)


def _field(obj: dict, key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise InvalidGrammarError(
            f"structural tag: {key} must be a {kind.__name__} (at {where}/{key})"
        )
    return value


def _string(obj: dict, key: str, where: str) -> str:
    return _field(obj, key, str, where)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise InvalidGrammarError(
            f"structural tag: expected a non-empty list of strings (at {where})"
        )
    return tuple(value)


def _flag(obj: dict, key: str, where: str) -> bool:
    value = obj.get(key, False)
    if not isinstance(value, bool):
        raise InvalidGrammarError(f"structural tag: {key} must be a boolean (at {where}/{key})")
    return value
