"""Helpers shared by the corpus tests: canonical serialization and per-schema outcomes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from structgen.errors import GrammarTooComplexError, InvalidSchemaError, UnsupportedSchemaError
from structgen.fsm import compile_json_schema

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
EXPECTED_ERRORS = (UnsupportedSchemaError, GrammarTooComplexError, InvalidSchemaError)


def _resolve(schema: Any, root: Any) -> Any:
    for _ in range(20):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)
                and schema["$ref"].startswith("#")):
            return schema
        target = root
        for part in [p for p in schema["$ref"][1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return None
        schema = target
    return schema


def _valid_under(instance: Any, schema: Any, root: Any) -> bool:
    """``jsonschema`` validity of ``instance`` under a subschema of ``root`` (its
    ``$defs``/``definitions`` in scope); False when that cannot be decided."""
    if isinstance(schema, dict) and isinstance(root, dict):
        schema = {**{k: root[k] for k in ("$defs", "definitions") if k in root}, **schema}
    try:
        return jsonschema.validators.validator_for(root if isinstance(root, dict) else {})(
            schema).is_valid(instance)
    except Exception:  # noqa: BLE001 - an unresolvable reference decides nothing
        return False


def _branches(schema: Any, root: Any, depth: int = 0, instance: Any = None) -> list[dict]:
    """``schema`` and the subschemas merged into it (``$ref``, ``allOf``, and of ``anyOf``/
    ``oneOf`` the first branch ``instance`` is valid under: the order the compiler writes
    for that branch; all branches when none can be shown valid)."""
    target = _resolve(schema, root)
    if not isinstance(target, dict) or depth > 8:
        return []
    out = [target]
    for key in ("allOf", "anyOf", "oneOf"):
        subs = target.get(key)
        subs = subs if isinstance(subs, list) else []
        if key != "allOf":
            hit = next((sub for sub in subs if _valid_under(instance, sub, root)), None)
            subs = subs if hit is None else [hit]
        for sub in subs:
            out += _branches(sub, root, depth + 1, instance)
    return out


def canonical(instance: Any, schema: Any, root: Any) -> Any:
    """``instance`` with object keys in schema order: ``properties`` (all merged branches, in order),
    then ``required`` keys, then the others as they come; applied recursively."""
    branches = _branches(schema, root, 0, instance)
    if isinstance(instance, dict):
        order: list[str] = []
        props: dict[str, Any] = {}
        for b in branches:
            for k, v in (b.get("properties") or {}).items():
                if k not in props:
                    props[k] = v
                    order.append(k)
        for b in branches:
            req = b.get("required")
            for k in req if isinstance(req, list) else []:
                if k not in order:
                    order.append(k)
        keys = [k for k in order if k in instance] + [k for k in instance if k not in order]
        return {k: canonical(instance[k], props.get(k), root) for k in keys}
    if isinstance(instance, list):
        out = []
        for i, item in enumerate(instance):
            sub = None
            for b in branches:
                prefix = b.get("prefixItems", b.get("items"))
                if isinstance(prefix, list) and i < len(prefix):
                    sub = prefix[i]
                elif isinstance(b.get("items"), dict):
                    sub = b["items"]
                if sub is not None:
                    break
            out.append(canonical(item, sub, root))
        return out
    return instance


def dump(instance: Any) -> str:
    """Compact canonical JSON text, as ``json.dumps`` writes it for structgen's compact mode."""
    return json.dumps(instance, separators=(",", ":"), ensure_ascii=False)


def outcome(schema: Any, tests: list[tuple[Any, bool]], **options: Any) -> tuple[str, int, int]:
    """``("pass" | reason, num_rejected_valid, num_accepted_invalid)`` for one schema.

    Raises whatever the compiler raises besides the expected typed errors (a bug).
    """
    try:
        grammar = compile_json_schema(schema, allow_extra_properties=True, **options)
    except EXPECTED_ERRORS as exc:
        return f"compile: {type(exc).__name__}: {str(exc)[:160]}", 0, 0
    rejected = accepted = 0
    for data, valid in tests:
        ok = grammar.matches(dump(canonical(data, schema, schema)))
        rejected += valid and not ok
        accepted += ok and not valid
    if accepted:
        return f"accepts {accepted} invalid instance(s)", rejected, accepted
    if rejected:
        return f"rejects {rejected} valid instance(s)", rejected, accepted
    return "pass", 0, 0
