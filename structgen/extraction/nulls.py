"""Nullable properties written, not left out: the grammar an extraction is generated under.

Under a schema's own grammar an optional property may be left out, and greedy decoding
of a small model leaves some out whatever the text says (a contact card's ``job_title``
never written although the text gives "Title: Data Engineer"): leaving a field out is
decided at the comma before it, by the likeliest next key, not by the value.
``nullable_required`` gives the schema with every property that accepts ``null`` made
required, so the model reaches each such field and decides between its value and
``null`` there. Every object valid under the result is valid under the original (only
``required`` grows), and null and absent mean the same to an extraction.
"""

from __future__ import annotations

import json
from typing import Any

from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve

__all__ = ["accepts_null", "nullable_required"]

_BRANCHES = ("anyOf", "oneOf", "allOf")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("prefixItems", "anyOf", "oneOf", "allOf")


def accepts_null(root: Any, sub: Any, depth: int = 0) -> bool:
    """Whether a subschema accepts ``null`` by its ``type``, ``enum``, ``const`` or an
    ``anyOf`` / ``oneOf`` branch (local ``$ref`` followed; ``true`` and ``{}`` do).

    Args:
        root: the whole schema (for ``$ref``).
        sub: the subschema.
        depth: branches followed so far (stops at ``MAX_REF_DEPTH``).
    """
    sub = _resolve(root, sub)
    if sub is True or sub == {}:
        return True
    if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
        return False
    types = sub.get("type")
    if types is not None:
        if not (types == "null" or isinstance(types, list) and "null" in types):
            return False
    if isinstance(sub.get("enum"), list) and None not in sub["enum"]:
        return False
    if "const" in sub and sub["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
        if isinstance(sub.get(key), list):
            if not any(accepts_null(root, b, depth + 1) for b in sub[key]):
                return False
    return (
        types is not None or "enum" in sub or "const" in sub or "anyOf" in sub or ("oneOf" in sub)
    )


def nullable_required(schema: Any) -> Any:
    """``schema`` with every object's properties that accept ``null`` added to its
    ``required`` (module docstring); a new schema, the argument is not changed.

    Args:
        schema: a JSON Schema (a dict; anything else is returned as it is).

    Returns:
        The schema to generate under.
    """
    if not isinstance(schema, dict):
        return schema
    out = json.loads(json.dumps(schema))

    def walk(sub: Any, depth: int) -> None:
        if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
            return
        props = sub.get("properties")
        if isinstance(props, dict):
            required = list(sub.get("required") or [])
            extra = [k for k, p in props.items() if k not in required and accepts_null(out, p)]
            if extra:
                sub["required"] = required + extra
        for key in _SCHEMA_MAPS:
            if isinstance(sub.get(key), dict):
                for child in sub[key].values():
                    walk(child, depth + 1)
        for key in _SCHEMA_LISTS:
            if isinstance(sub.get(key), list):
                for child in sub[key]:
                    walk(child, depth + 1)
        for key in ("items", "additionalProperties", "not", "if", "then", "else"):
            walk(sub.get(key), depth + 1)

    walk(out, 0)
    return out
