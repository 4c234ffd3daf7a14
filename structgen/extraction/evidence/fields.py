"""What the evidence rules read of a field's subschema (local ``$ref`` resolved).

Its kind (``field_kind``: boolean, number or string enum, and the non-null branch), whether it
takes null (``is_nullable``), whether its type and bounds accept a number (``accepts_number``) or
the whole subschema, formats checked, a value (``schema_accepts``), and the numbers one
object holds (``node_numbers``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import jsonschema

from structgen.extraction.refs import resolve as _resolve


def is_scalar(value: Any) -> bool:
    """Whether ``value`` is a string or a number (a bool is not). Raises: never."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def is_nullable(root: Any, sub: Any) -> bool:
    """Whether a property's subschema accepts null (type, enum or an anyOf/oneOf branch).

    Args:
        root: the whole schema (a ``$ref`` in ``sub`` resolves against it).
        sub: the property's subschema (any JSON value; not a dict: False).

    Returns:
        True when ``type`` is or lists ``"null"``, ``enum`` holds null, or an ``anyOf`` /
        ``oneOf`` branch is nullable. Raises nothing for a malformed subschema.
    """
    sub = _resolve(root, sub)
    if not isinstance(sub, dict):
        return False
    types = sub.get("type")
    if types == "null" or isinstance(types, list) and "null" in types:
        return True
    if isinstance(sub.get("enum"), list) and None in sub["enum"]:
        return True
    branches = [b for key in ("anyOf", "oneOf") for b in sub.get(key) or ()]
    return any(is_nullable(root, b) for b in branches)


def string_schema(root: Any, prop: Any) -> dict | None:
    """A property's subschema when it is a string field that is not a choice, else None:
    type ``string`` (maybe with ``null``), no ``enum`` or ``const`` (``format``, ``pattern``
    and lengths allowed).

    Args:
        root: the whole schema (a ``$ref`` in ``prop`` resolves against it).
        prop: the property's subschema (any JSON value; not a dict: None).

    Returns:
        The resolved subschema (a dict), or None. Raises nothing.
    """
    sub = _resolve(root, prop)
    if not isinstance(sub, dict) or "enum" in sub or "const" in sub:
        return None
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    return sub if types - {"null"} == {"string"} else None


def free_string_schema(root: Any, prop: Any) -> dict | None:
    """A property's subschema when it is a free string, else None.

    A free string is a :func:`string_schema` with neither ``format`` nor ``pattern``: its
    value may be any span of the text. Args and returns as :func:`string_schema`.
    """
    sub = string_schema(root, prop)
    return None if sub is None or "format" in sub or "pattern" in sub else sub


def accepts_number(sub: dict, value: Decimal) -> bool:
    """Whether a number subschema (resolved, a dict) allows ``value``: its ``type``
    (an integer type refuses a fraction), ``minimum``/``maximum`` and numeric
    ``exclusiveMinimum``/``exclusiveMaximum``; other keywords are not read. Raises: never.
    """
    types = sub.get("type")
    types = [types] if isinstance(types, str) else list(types or ())
    if "integer" in types and "number" not in types and value != value.to_integral_value():
        return False
    lo, hi = sub.get("minimum"), sub.get("maximum")
    if lo is not None and value < Decimal(str(lo)) or hi is not None and value > Decimal(str(hi)):
        return False
    xlo, xhi = sub.get("exclusiveMinimum"), sub.get("exclusiveMaximum")
    if isinstance(xlo, (int, float)) and not isinstance(xlo, bool) and value <= Decimal(str(xlo)):
        return False
    return not (
        isinstance(xhi, (int, float)) and not isinstance(xhi, bool) and value >= Decimal(str(xhi))
    )


def schema_accepts(root: Any, sub: Any, value: Any) -> bool:
    """Whether ``sub`` (a property's subschema, ``$ref`` resolved) accepts ``value``,
    formats checked; False for a subschema that does not stand alone.

    Args:
        root: the whole schema (picks the validator class by its ``$schema``).
        sub: the subschema to validate against.
        value: the JSON value.

    Returns:
        ``jsonschema``'s verdict with its format checker; False where validation raises
        (a ``$ref`` that only resolves inside ``root``). Raises nothing.
    """
    try:
        cls = jsonschema.validators.validator_for(root)
        return cls(sub, format_checker=cls.FORMAT_CHECKER).is_valid(value)
    except Exception:  # a subschema that does not stand alone (a $ref inside)
        return False


def node_numbers(node: dict) -> list[Decimal]:
    """The number values (not booleans) directly in one object."""
    return [
        Decimal(str(v))
        for v in node.values()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]


def field_kind(root: Any, sub: Any) -> tuple[str | None, dict]:
    """``("boolean" | "number" | "enum" | None, the non-null branch)`` of a property's
    subschema; "enum" is an ``enum`` with at least two string options.
    """
    sub = _resolve(root, sub)
    if isinstance(sub, dict) and isinstance(sub.get("enum"), list) and "const" not in sub:
        strings = [o for o in sub["enum"] if isinstance(o, str)]
        return ("enum", sub) if len(set(strings)) >= 2 else (None, {})
    if not isinstance(sub, dict) or "enum" in sub or "const" in sub:
        return None, {}
    for key in ("anyOf", "oneOf"):
        branches = sub.get(key)
        if isinstance(branches, list):
            rest = [b for b in (_resolve(root, b) for b in branches) if b != {"type": "null"}]
            if len(rest) != 1 or not isinstance(rest[0], dict):
                return None, {}
            return field_kind(root, rest[0])
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    main = types - {"null"}
    if main == {"boolean"}:
        return "boolean", sub
    if main and main <= {"integer", "number"}:
        return "number", sub
    return None, {}
