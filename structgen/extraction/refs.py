"""Local ``$ref`` resolution for the extraction passes that walk a JSON Schema.

The choice scorer (``choices``), the evidence pass (``evidence``), the array-item rule
(``items``) and the prompt's field list and example (``prompt``) read a schema's
properties through its local references (``#/...``, JSON Pointer escapes ``~1`` and
``~0``). They never compile the schema (``structgen.fsm`` does,
with full ``$id`` resolution); a reference they cannot follow reads as ``{}`` (no facts).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_REF_DEPTH", "resolve"]

MAX_REF_DEPTH = 32  # references followed in a chain, and object levels walked


def resolve(root: Any, sub: Any) -> Any:
    """``sub`` with local ``$ref`` s followed.

    Args:
        root: the whole schema the pointers are read in.
        sub: a subschema (any JSON value).

    Returns:
        The first subschema of the chain that is not a reference; ``{}`` for a reference
        that is not local (no leading ``#``), does not resolve to an object, or is part of a
        chain longer than ``MAX_REF_DEPTH``. A non-reference ``sub`` is returned as it is.
    """
    for _ in range(MAX_REF_DEPTH):
        if not (isinstance(sub, dict) and isinstance(sub.get("$ref"), str)):
            return sub
        ref = sub["$ref"]
        if not ref.startswith("#"):
            return {}
        node: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node.get(part) if isinstance(node, dict) else None
        sub = node if isinstance(node, dict) else {}
    return {}
