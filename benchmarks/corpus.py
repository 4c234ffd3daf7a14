"""Helpers shared by the corpus tests and the MaskBench benchmarks (one copy, imported by
both as ``benchmarks.corpus``): canonical serialization and per-schema outcomes."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import jsonschema

from structgen.errors import (
    GrammarTooComplexError,
    InvalidSchemaError,
    StructgenError,
    UnsupportedSchemaError,
)
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.ids import RefIndex

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
EXPECTED_ERRORS = (UnsupportedSchemaError, GrammarTooComplexError, InvalidSchemaError)
_INDEXES: dict[int, tuple[Any, RefIndex]] = {}  # id(document or its rewrite) -> index


def _index(root: Any) -> RefIndex:
    """The ``RefIndex`` of a schema document (cached while the document lives in the cache)."""
    hit = _INDEXES.get(id(root))
    if hit is not None and (hit[0] is root or hit[1].root is root):
        return hit[1]
    if len(_INDEXES) > 64:
        _INDEXES.clear()
    index = RefIndex(root)
    _INDEXES[id(root)] = (root, index)
    _INDEXES[id(index.root)] = (root, index)
    return index


def _resolve(schema: Any, index: RefIndex) -> Any:
    """``schema`` with its ``$ref`` chain followed as the compiler resolves it (every
    in-document reference of ``index.root`` is one canonical JSON pointer); None when a
    reference cannot be followed."""
    for _ in range(20):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            return schema
        try:
            schema = index.resolve(schema["$ref"], "")
        except StructgenError:
            return None
    return schema


def _valid_under(instance: Any, schema: Any, root: Any) -> bool:
    """``jsonschema`` validity of ``instance`` under a subschema of ``root`` (its
    ``$defs``/``definitions`` in scope); False when that cannot be decided."""
    if isinstance(schema, dict) and isinstance(root, dict):
        schema = {**{k: root[k] for k in ("$defs", "definitions") if k in root}, **schema}
    try:
        return jsonschema.validators.validator_for(root if isinstance(root, dict) else {})(
            schema
        ).is_valid(instance)
    except Exception:  # noqa: BLE001 - an unresolvable reference decides nothing
        return False


def _branches(schema: Any, index: RefIndex, depth: int = 0, instance: Any = None) -> list[dict]:
    """``schema`` and the subschemas merged into it, in the order the compiler merges them:
    a ``$ref``'s target, then the schema's own keywords, then its ``allOf``; of ``anyOf``/
    ``oneOf`` the first branch ``instance`` is valid under (the order the compiler writes
    for that branch; all branches when none can be shown valid)."""
    if not isinstance(schema, dict) or depth > 8:
        return []
    out = []
    if "$ref" in schema:
        target = _resolve({"$ref": schema["$ref"]}, index)
        out += _branches(target, index, depth + 1, instance)
    out.append(schema)
    for key in ("allOf", "anyOf", "oneOf"):
        subs = schema.get(key)
        subs = subs if isinstance(subs, list) else []
        if key != "allOf":
            hit = next((sub for sub in subs if _valid_under(instance, sub, index.root)), None)
            subs = subs if hit is None else [hit]
        for sub in subs:
            out += _branches(sub, index, depth + 1, instance)
    return out


def canonical(instance: Any, schema: Any, root: Any) -> Any:
    """``instance`` in the one serialization every grammar writes: object keys in schema
    order and integer-valued numbers as integers.

    Keys of ``properties`` come first (all merged branches, in order), then ``required``
    keys, then the others as they come; applied recursively (an undeclared key's value
    under its ``patternProperties`` entry, else ``additionalProperties``). An integer-valued float
    (``7.0``, ``-0.0``, ``1e3``) becomes the int of the same value (``7``, ``0``, ``1000``)
    wherever the document's draft counts it as an integer (draft 6 and later, as
    ``jsonschema`` reads ``$schema``): there the two are the same instance for every
    keyword, so the rewrite keeps the instance's validity; under drafts 3 and 4 ``7.0`` is
    not an integer and is kept as a float. Non-finite floats, bools and other values are
    returned as they are. ``root`` is the schema document (``schema`` is it or one of its
    subschemas, as given or as its ``RefIndex`` rewrote it)."""
    index = _index(root)
    ints = integer_valued_floats_are_integers(root)
    return _canonical(instance, index.root if schema is root else schema, index, ints)


def integer_valued_floats_are_integers(root: Any) -> bool:
    """Whether the draft of schema document ``root`` (``jsonschema``'s choice from its
    ``$schema``; the latest draft when absent or unknown) types ``7.0`` as ``integer``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unknown $schema: jsonschema warns, uses latest
            cls = jsonschema.validators.validator_for(root if isinstance(root, dict) else {})
    except Exception:  # noqa: BLE001 - a non-string $schema: the latest draft, as the compiler
        cls = jsonschema.validators.validator_for({})
    return bool(cls.TYPE_CHECKER.is_type(1.0, "integer"))


def canonical_number(value: Any, ints: bool = True) -> Any:
    """``value`` as the int of the same value when it is an integer-valued finite float and
    ``ints`` (the document's draft counts such floats as integers); otherwise unchanged."""
    if ints and type(value) is float and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


DEPENDENCY_KEYWORDS = ("dependentRequired", "dependentSchemas", "dependencies")


def _present_dependencies(
    instance: dict, branches: list[dict], index: RefIndex
) -> list[tuple[str, dict]]:
    """``(trigger, dependent schema)`` of each dependency whose trigger key ``instance``
    has, in the order the compiler merges them (``json_schema.dependencies``: the object schema,
    then per trigger its key, then the keys and properties its dependent schema adds);
    an array of keys is ``{"required": keys}``."""
    out = []
    for kw in DEPENDENCY_KEYWORDS:
        for b in branches:
            deps = b.get(kw)
            for trigger, dep in deps.items() if isinstance(deps, dict) else []:
                if trigger not in instance:
                    continue
                dep = [dep] if isinstance(dep, str) else dep
                dep = {"required": dep} if isinstance(dep, list) else _resolve(dep, index)
                if isinstance(dep, dict):
                    out.append((trigger, dep))
    return out


_CONSTRUCTS = ("not", "if", "oneOf")  # where the compiler may write canonical mode


def _construct_levels(branches: list[dict], index: RefIndex) -> tuple[tuple[str, ...], ...]:
    """``K`` per nesting level (0..10) below a ``not``/``if``/``oneOf`` among ``branches`` (the
    subschemas merged at one place), as the compiler orders keys in that construct's canonical
    mode (``boolean_ops.canonical_key_levels``, here over all of ``branches``); empty without
    one."""
    from structgen.fsm.json_schema.boolean_ops import canonical_key_levels

    for b in branches:
        if any(k in b for k in _CONSTRUCTS):
            return canonical_key_levels(branches, index.resolve, 10)
    return ()


_KEY_KEYWORDS = (
    "properties",
    "patternProperties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    *_CONSTRUCTS,
    "anyOf",
)


def _orders_keys(schema: dict) -> bool:
    """Whether ``schema`` says anything about an object's keys (else the compiler's grammar
    for it takes the keys in any order outside a construct's canonical mode)."""
    return any(k in schema for k in _KEY_KEYWORDS)


def _canonical(
    instance: Any, schema: Any, index: RefIndex, ints: bool, levels: tuple = (), level: int = 0
) -> Any:
    """``canonical`` below ``schema``; ``levels``: the key order per nesting level of the
    enclosing ``not``/``if``/``oneOf`` (``level`` containers below it), which orders the keys
    of objects whose schemas say nothing about keys (none, or ``{"type": "object"}``): inside
    the construct's canonical mode the compiler writes such an object's keys of that level
    in that order, then the others; elsewhere it takes them in any order."""
    branches = _branches(schema, index, 0, instance)
    if not levels:
        levels, level = _construct_levels(branches, index), 0
    if isinstance(instance, dict) and levels and not any(_orders_keys(b) for b in branches):
        known = levels[min(level, len(levels) - 1)]
        keys = [k for k in known if k in instance] + [k for k in instance if k not in known]
        return {k: _canonical(instance[k], None, index, ints, levels, level + 1) for k in keys}
    if isinstance(instance, dict):
        order: list[str] = []
        props: dict[str, Any] = {}
        deps = _present_dependencies(instance, branches, index)
        for b in branches + [d for _, d in deps]:
            for k, v in (b.get("properties") or {}).items():
                if k not in props:
                    props[k] = v
                    order.append(k)
        for b in branches + [{"required": [t] + d.get("required", [])} for t, d in deps]:
            req = b.get("required")
            for k in req if isinstance(req, list) else []:
                if k not in order:
                    order.append(k)
        for k in _construct_keys(branches, index):
            if k not in order:
                order.append(k)
        keys = [k for k in order if k in instance] + [k for k in instance if k not in order]
        return {
            k: _canonical(
                instance[k],
                props[k] if k in props else _extra(k, branches),
                index,
                ints,
                levels,
                level + 1,
            )
            for k in keys
        }
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
            out.append(_canonical(item, sub, index, ints, levels, level + 1))
        return out
    return canonical_number(instance, ints)


def _construct_keys(branches: list[dict], index: RefIndex) -> list[str]:
    """The keys the ``not``/``if``/``then``/``else`` operands of ``branches`` declare for
    the same object (``properties``, then ``required``; through ``$ref``, ``allOf``,
    ``anyOf``, ``oneOf`` and nested operands): inside those constructs the compiler writes
    the declared keys before undeclared ones (``json_schema.boolean_ops``)."""
    out: dict[str, None] = {}
    todo = [b[k] for b in reversed(branches) for k in ("else", "then", "if", "not") if k in b]
    seen = 0
    while todo and seen < 256:
        seen += 1
        cur = _resolve(todo.pop(), index)
        if not isinstance(cur, dict):
            continue
        props = cur.get("properties")
        out.update(dict.fromkeys(props if isinstance(props, dict) else ()))
        req = cur.get("required")
        out.update(
            dict.fromkeys(k for k in req if isinstance(k, str)) if isinstance(req, list) else {}
        )
        for k in ("else", "then", "if", "not"):
            if k in cur:
                todo.append(cur[k])
        for k in ("oneOf", "anyOf", "allOf"):
            if isinstance(cur.get(k), list):
                todo.extend(reversed(cur[k]))
    return list(out)


def _extra(key: str, branches: list[dict]) -> Any:
    """The subschema of an undeclared key: the first ``patternProperties`` entry whose
    pattern it matches, else the first ``additionalProperties`` schema (None: none)."""
    import re

    for b in branches:
        for pattern, sub in (b.get("patternProperties") or {}).items():
            try:
                if re.search(pattern, key):
                    return sub
            except re.error:
                continue
    for b in branches:
        if isinstance(b.get("additionalProperties"), dict):
            return b["additionalProperties"]
    return None


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
