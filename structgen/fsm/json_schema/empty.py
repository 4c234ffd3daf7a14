"""Why a schema accepts no value: the cause named in the compile error.

A schema whose language is empty (``{"enum": []}``, ``minimum`` above ``maximum``, a
required property whose schema is ``false``) cannot be generated from. The converter
records every subschema that came out empty, in the order it met them (children
before their parents); ``empty_schema_error`` names the first one whose own keywords
explain the emptiness, with its keyword and JSON pointer, and falls back to the root.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema

from ...errors import UnsatisfiableSchemaError

__all__ = ["empty_schema_error", "why_empty"]

# (lower keyword, upper keyword) pairs whose bounds leave no value when lower > upper
_COUNT_BOUNDS = (
    ("minLength", "maxLength"),
    ("minItems", "maxItems"),
    ("minProperties", "maxProperties"),
    ("minContains", "maxContains"),
)
_NUMERIC = (int, float)


def _num(v: Any) -> bool:
    return isinstance(v, _NUMERIC) and not isinstance(v, bool) and math.isfinite(v)


def _numeric_bounds(schema: dict) -> tuple[str, str] | None:
    """A contradiction between the numeric bounds of ``schema``, or None."""
    lows = [(k, schema.get(k), k != "minimum") for k in ("minimum", "exclusiveMinimum")]
    highs = [(k, schema.get(k), k != "maximum") for k in ("maximum", "exclusiveMaximum")]
    for lk, lo, lx in lows:
        if not _num(lo):
            continue  # draft-4 boolean exclusiveMinimum, or absent
        for hk, hi, hx in highs:
            if not _num(hi):
                continue
            if lo > hi:
                return hk, f"{lk!r} {lo} is above {hk!r} {hi}"
            if lo == hi and (lx or hx):
                return hk, f"{lk!r} {lo} is not below {hk!r} {hi}"
    types = schema.get("type")
    if types == "integer" or types == ["integer"]:
        lo = next((v for k, v, _ in lows if k == "minimum" and _num(v)), None)
        hi = next((v for k, v, _ in highs if k == "maximum" and _num(v)), None)
        if lo is not None and hi is not None and math.ceil(lo) > math.floor(hi):
            return "maximum", f"no integer lies between 'minimum' {lo} and 'maximum' {hi}"
    return None


def why_empty(schema: Any) -> tuple[str, str] | None:
    """``(keyword, detail)`` when ``schema``'s own keywords accept no value, else None.

    Checks (in order): ``false``; an empty ``enum``; contradicting numeric bounds (also
    no integer in an integer's range); a ``min*`` count above its ``max*``; more
    ``required`` names than ``maxProperties``; no ``enum`` / ``const`` value valid against
    the schema's other keywords (checked with ``jsonschema``'s latest draft). A schema
    empty only through its subschemas gives None.
    """
    if schema is False:
        return "false", "the schema is false"
    if not isinstance(schema, dict):
        return None
    if schema.get("enum") == []:
        return "enum", "'enum' lists no value"
    found = _numeric_bounds(schema)
    if found is not None:
        return found
    for lo_key, hi_key in _COUNT_BOUNDS:
        lo, hi = schema.get(lo_key), schema.get(hi_key)
        if _num(lo) and _num(hi) and lo > hi:
            return hi_key, f"{lo_key!r} {lo} is above {hi_key!r} {hi}"
    required, most = schema.get("required"), schema.get("maxProperties")
    if isinstance(required, list) and _num(most) and len(set(map(str, required))) > most:
        n = len(set(map(str, required)))
        return "maxProperties", f"'required' lists {n} properties, above 'maxProperties' {most}"
    for key in ("const", "enum"):
        if key not in schema:
            continue
        values = [schema[key]] if key == "const" else schema[key]
        if not isinstance(values, list):
            continue
        rest = {k: v for k, v in schema.items() if k not in ("const", "enum", "$ref")}
        try:
            check = jsonschema.Draft202012Validator(rest)
            if not any(check.is_valid(v) for v in values):
                if key == "const":
                    return key, f"'const' {schema[key]!r} is not valid against the other keywords"
                return key, "no value of 'enum' is valid against the other keywords"
        except Exception:  # noqa: BLE001 - a subschema jsonschema cannot read: no diagnosis
            continue
    return None


def empty_schema_error(empty: list[tuple[str, Any]], root: Any) -> UnsatisfiableSchemaError:
    """The error for a schema that accepts no value.

    Args:
        empty: ``(pointer, subschema)`` of each subschema the conversion found empty, in
            the order it found them (a subschema before the ones containing it).
        root: the root schema (pointer ``""``).

    Returns:
        An ``UnsatisfiableSchemaError`` naming the root's own cause when it has one, else
        the first recorded subschema with one, else the root without a cause.
    """
    for pointer, schema in [("", root), *empty]:
        found = why_empty(schema)
        if found is not None:
            keyword, detail = found
            return UnsatisfiableSchemaError(keyword, pointer, detail)
    return UnsatisfiableSchemaError("false", "", "")
