"""``allOf`` merging and ``oneOf`` disjointness for the JSON Schema lowering.

``merge_all_of`` folds subschemas into one schema whose instances are exactly those
valid under all of them (types intersected, bounds tightened, properties merged
recursively via nested ``allOf``, ``required`` united, enums intersected, dependency
maps joined per trigger key, each subschema's ``if``/``then``/``else`` as its
``anyOf: [I & T, !I & E]``, two ``not``
joined as ``not: {anyOf: [A, B]}``, two ``anyOf``/``oneOf`` multiplied out into the
branch pairs, up to ``MAX_BRANCH_PRODUCT``); a pair of
keywords it cannot combine exactly raises ``UnsupportedSchemaError("allOf", pointer)``.
``provably_disjoint`` decides whether two ``oneOf`` branches can share an instance
(by type, ``const``/``enum`` values, a required discriminator property, or a key
one branch requires and the other forbids); only then is ``oneOf`` the same as ``anyOf``.
``objects_one_of`` reads the common untyped form (branches that constrain objects only,
e.g. ``{"properties": {"kind": {"const": "a"}}, "required": ["kind"]}`` without
``"type": "object"``): every other value is valid under all of them, so ``oneOf`` is
``anyOf`` over the branches restricted to objects when those are disjoint.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any, Callable

from ...errors import UnsupportedSchemaError
from .vocabulary import ANNOTATIONS

__all__ = [
    "merge_all_of",
    "negated_required",
    "objects_one_of",
    "provably_disjoint",
    "types_of",
    "TYPES",
    "value_key",
]

TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
_LOWER = ("minimum", "minLength", "minItems", "minProperties", "minContains")
_UPPER = ("maximum", "maxLength", "maxItems", "maxProperties", "maxContains")
_IGNORED = ANNOTATIONS
Resolver = Callable[[str, str], Any]


def value_key(value: Any) -> str:
    """A canonical key for JSON equality (``1 == 1.0``, ``True != 1``)."""
    return json.dumps(_norm(value), ensure_ascii=False)


def _norm(v: Any) -> Any:
    """``value_key``'s canonical form (module level: a recursive closure is a reference
    cycle only the collector frees).
    """
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return [type(v).__name__, v]
    if isinstance(v, (int, float)):
        return ["num", str(Fraction(str(v)))]
    if isinstance(v, list):
        return ["list", [_norm(x) for x in v]]
    return ["obj", sorted((k, _norm(x)) for k, x in v.items())]


def _intersect_types(a: Any, b: Any) -> list[str]:
    def expand(t: Any) -> set[str]:
        ts = {t} if isinstance(t, str) else set(t)
        return ts | ({"integer"} if "number" in ts else set())

    both = expand(a) & expand(b)
    if "number" in both:
        both.discard("integer")
    return [t for t in TYPES if t in both]


MAX_BRANCH_PRODUCT = 64  # anyOf/oneOf of two allOf subschemas: branches multiplied out
MAX_ABSENT_BRANCHES = 16  # negated_required: the most key sets its answer may list


def _merge_key(out: dict, key: str, val: Any, pointer: str) -> bool:
    """Fold ``key: val`` into ``out``; False when the result is unsatisfiable."""
    if key not in out or out[key] == val:
        out[key] = val
        return True
    old = out[key]
    if key == "type":
        out[key] = _intersect_types(old, val)
        return bool(out[key])
    if key in ("properties", "patternProperties"):
        merged = dict(old)
        for name, sub in val.items():
            merged[name] = {"allOf": [merged[name], sub]} if name in merged else sub
        out[key] = merged
    elif key == "required":
        out[key] = list(dict.fromkeys(list(old) + list(val)))
    elif key in ("dependentRequired", "dependentSchemas", "dependencies"):
        out[key] = _merge_dependencies(old, val)
    elif (
        key in ("items", "additionalProperties", "propertyNames", "additionalItems")
        and not isinstance(val, list)
        and not isinstance(old, list)
    ):
        out[key] = {"allOf": [old, val]}
    elif key in _LOWER or (key == "exclusiveMinimum" and not isinstance(val, bool)):
        out[key] = max(old, val)
    elif key in _UPPER or (key == "exclusiveMaximum" and not isinstance(val, bool)):
        out[key] = min(old, val)
    elif key == "enum":
        keep = {value_key(v) for v in val}
        out[key] = [v for v in old if value_key(v) in keep]
        return bool(out[key])
    elif key == "const":
        return value_key(old) == value_key(val)
    elif key == "multipleOf" and isinstance(old, int) and isinstance(val, int):
        out[key] = old * val // math.gcd(old, val)
    elif key == "uniqueItems":
        out[key] = bool(old or val)
    elif key == "not":  # not A and not B == not (A or B)
        out[key] = {"anyOf": [old, val]}
    elif key in ("anyOf", "oneOf") and len(old) * len(val) <= MAX_BRANCH_PRODUCT:
        # (A1 | A2) & (B1 | B2) == (A1 & B1) | (A1 & B2) | ...; for oneOf too: exactly one
        # pair matches iff exactly one A and exactly one B match
        out[key] = [{"allOf": [a, b]} for a in old for b in val]
    else:
        raise UnsupportedSchemaError("allOf", pointer, f"cannot combine two different {key!r}")
    return True


def _merge_dependencies(old: dict, val: dict) -> dict:
    """Two dependency maps as one: per trigger key, required keys united (both arrays),
    else both dependent schemas (an array as ``{"required": array}``) under ``allOf``.
    """

    def as_list(d: Any) -> Any:
        return [d] if isinstance(d, str) else d  # draft 3: one required key

    merged = {name: as_list(d) for name, d in old.items()}
    for name, dep in val.items():
        dep = as_list(dep)
        if name not in merged:
            merged[name] = dep
        elif isinstance(dep, list) and isinstance(merged[name], list):
            merged[name] = list(dict.fromkeys(merged[name] + dep))
        else:
            merged[name] = {
                "allOf": [
                    {"required": d} if isinstance(d, list) else d for d in (merged[name], dep)
                ]
            }
    return merged


def merge_all_of(
    schemas: list[Any],
    pointer: str,
    resolve: Resolver,
    seen: tuple[str, ...] = (),
    keywords: Callable[[dict, str], dict] | None = None,
    base: bool = False,
) -> dict | bool:
    """One schema equivalent to ``allOf: schemas`` (False when unsatisfiable).

    With ``base``, ``schemas[0]`` is the schema at ``pointer`` and the others its
    ``allOf`` (they are merged after its own keywords, as its subschemas).

    ``$ref`` subschemas are resolved with ``resolve(ref, pointer)``; a reference seen
    twice (recursion through ``allOf``) raises ``UnsupportedSchemaError("allOf", ...)``.
    ``keywords(subschema, pointer)``, when given, keeps the keywords of each subschema
    that take part (the converter's: annotations and unknown keywords dropped); without
    it, the annotations are dropped.
    """
    flat: list[dict] = []
    ends: dict[int, int] = {}  # id(flat entry) -> end of the flat entries of its allOf
    # pre-order walk with an explicit stack (allOf and $ref chains nest as deep as the
    # schema): a subschema's $ref target first, then its own keywords, then its allOf
    todo: list[tuple[Any, str, tuple[str, ...]]] = [
        (sub, f"{pointer}/allOf/{i}", seen) for i, sub in reversed(list(enumerate(schemas)))
    ]
    if base and isinstance(schemas[0], dict):
        todo = [({**schemas[0], "allOf": list(schemas[1:])}, pointer, seen)]
    while todo:
        s, ptr, path = todo.pop()
        if s is True:
            continue
        if s is False:
            return False
        if type(s) is _End:
            ends[id(s.keywords)] = len(flat)
            continue
        if type(s) is _Own:
            flat.append(s.keywords)
            continue
        s = keywords(s, ptr) if keywords is not None else dict(s)
        subs = s.pop("allOf", [])
        if {"if", "then", "else"} & set(s):  # its own condition: never paired with another's
            s = _conditional_as_any_of(s)
            subs = list(subs) + s.pop("allOf", [])
        later = [(sub, f"{ptr}/allOf/{i}", path) for i, sub in enumerate(subs)]
        if "$ref" in s:
            ref = s.pop("$ref")
            if ref in path:
                raise UnsupportedSchemaError("allOf", ptr, f"recursive $ref {ref} inside allOf")
            own = _Own({k: v for k, v in s.items() if k not in _IGNORED})
            later = [(resolve(ref, ptr), ref[1:], path + (ref,)), (own, ptr, path)] + later
            later.append((_End(own.keywords), ptr, path))
        else:
            flat.append({k: v for k, v in s.items() if k not in _IGNORED})  # before its allOf
            later.append((_End(flat[-1]), ptr, path))
        todo.extend(reversed(later))
    tuples = [s for s in flat if "prefixItems" in s or isinstance(s.get("items"), list)]
    arrays = [s for s in flat if {"prefixItems", "items", "additionalItems"} & set(s)]
    if tuples and len(arrays) > 1:
        raise UnsupportedSchemaError("allOf", pointer, "tuple items in more than one subschema")
    if sum("contains" in s for s in flat) > 1:
        raise UnsupportedSchemaError("allOf", pointer, "contains in more than one subschema")
    _properties_after_branches(flat, [ends.get(id(f), i + 1) for i, f in enumerate(flat)])
    out: dict = {}
    for s in flat:
        if len(flat) > 1 and ("additionalProperties" in s or "patternProperties" in s):
            _close_properties(s, flat, pointer)
        for key, val in s.items():
            if not _merge_key(out, key, val, pointer):
                return False
    return out


def _properties_after_branches(flat: list[dict], ends: list[int]) -> None:
    """Keep the key order of ``allOf: [.., {anyOf: [B1, ..]}, {properties: P}, ..]``: the
    ``properties`` of the subschemas after the one holding ``anyOf``/``oneOf`` move into
    its branches (``Bi`` becomes ``allOf: [Bi, {properties: P}]``), so that a branch's keys
    come before ``P``'s, as the subschemas are written (the merged ``anyOf`` is converted
    after its siblings). The holder's own ``allOf`` (``flat[i + 1 : ends[i]]``, what it
    merges in) stays before the branches, as for any schema: its own keywords, then its
    ``allOf``, then its ``anyOf``. Exact: ``P`` holds for every instance, so it holds in
    every branch. Done only where it changes nothing else: one subschema with ``anyOf`` or
    ``oneOf`` (not both), and no ``additionalProperties``/``patternProperties`` (which read
    the sibling subschemas' properties) in any subschema. Edits ``flat`` in place.
    """
    holders = [i for i, s in enumerate(flat) if "anyOf" in s or "oneOf" in s]
    if len(holders) != 1 or any(
        "additionalProperties" in s or "patternProperties" in s for s in flat
    ):
        return
    i = holders[0]
    key = "anyOf" if "anyOf" in flat[i] else "oneOf"
    if "anyOf" in flat[i] and "oneOf" in flat[i] or not isinstance(flat[i][key], list):
        return
    start = max(ends[i], i + 1)
    later = [s for s in flat[start:] if isinstance(s.get("properties"), dict)]
    if not later:
        return
    moved = [{"properties": s["properties"]} for s in later]
    for j in range(start, len(flat)):
        if isinstance(flat[j].get("properties"), dict):
            flat[j] = {k: v for k, v in flat[j].items() if k != "properties"}
    flat[i] = {**flat[i], key: [{"allOf": [b, *moved]} for b in flat[i][key]]}


def _conditional_as_any_of(s: dict) -> dict:
    """``s`` with ``if``/``then``/``else`` as the equivalent ``anyOf: [I & T, !I & E]`` (a
    lone ``then``/``else``, or ``if`` without either, has no effect and is dropped), so
    that merging subschemas never pairs one subschema's ``if`` with another's ``then``.
    """
    rest = {k: v for k, v in s.items() if k not in ("if", "then", "else")}
    if "if" not in s or ("then" not in s and "else" not in s):
        return rest
    cond = s["if"]
    branches = [
        {"allOf": [cond, s.get("then", True)]},
        {"allOf": [{"not": cond}, s.get("else", True)]},
    ]
    if "anyOf" in rest:
        return {**rest, "allOf": [{"anyOf": branches}]}
    return {**rest, "anyOf": branches}


class _Own:
    """A subschema's own keywords, queued behind its ``$ref`` target (``merge_all_of``)."""

    __slots__ = ("keywords",)

    def __init__(self, keywords: dict) -> None:
        self.keywords = keywords


def _close_properties(s: dict, flat: list[dict], pointer: str) -> None:
    """Keys listed by sibling subschemas but not by ``s``: under ``s``'s additionalProperties."""
    if "patternProperties" in s:
        if any(t is not s and "properties" in t for t in flat):
            raise UnsupportedSchemaError(
                "allOf", pointer, "patternProperties next to other subschemas' properties"
            )
        return
    extra = s["additionalProperties"]
    own = s.get("properties", {})
    added = {}
    for t in flat:
        for name in t.get("properties", {}):
            if name not in own and name not in added:
                added[name] = extra
    for name in (r for t in flat for r in t.get("required", [])):
        if name not in own and name not in added:
            added[name] = extra
    if added:
        s["properties"] = {**own, **added}


def types_of(schema: Any) -> set[str]:
    """The JSON types an instance of ``schema`` may have ("integer" folded into "number")."""
    if schema is False:
        return set()
    if schema is True or not isinstance(schema, dict):
        return {t for t in TYPES if t != "integer"}
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    t = schema.get("type")
    ts = (
        {x for x in TYPES if x != "integer"}
        if t is None
        else {"number" if x == "integer" else x for x in ({t} if isinstance(t, str) else set(t))}
    )
    if values is not None:  # both: a value must also have one of the types
        return {_json_type(v) for v in values} & ts
    return ts


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(v)]


def _values(schema: Any, depth: int = 0) -> list | None:
    """Values that include every value valid under ``schema``: its ``const`` / ``enum``,
    else those of an ``allOf`` member (a merged property's ``allOf: [{type}, {enum}]``);
    None when no such list is found (no reference is followed). Enough for disjointness:
    two schemas whose lists do not meet share no value.
    """
    if not isinstance(schema, dict) or depth > 16:
        return None
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return schema["enum"]
    for sub in schema.get("allOf", ()) if isinstance(schema.get("allOf"), list) else ():
        found = _values(sub, depth + 1)
        if found is not None:
            return found
    return None


def provably_disjoint(a: Any, b: Any, is_valid: Callable[[Any, Any], bool]) -> bool:
    """True only if no JSON value is valid under both ``a`` and ``b`` (refs already resolved)."""
    if not (types_of(a) & types_of(b)):
        return True
    va, vb = _values(a), _values(b)
    if va is not None and vb is not None:
        return not ({value_key(v) for v in va} & {value_key(v) for v in vb})
    if va is not None:
        return not any(is_valid(v, b) for v in va)
    if vb is not None:
        return not any(is_valid(v, a) for v in vb)
    if types_of(a) | types_of(b) != {"object"}:
        return False
    return _objects_disjoint(a, b) or _objects_disjoint(b, a)


OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
    }
)


def objects_one_of(branches: list[Any], is_valid: Callable[[Any, Any], bool]) -> list[Any] | None:
    """``oneOf: branches`` as ``anyOf`` of the returned schemas, or None when this reading
    does not apply.

    It applies when every branch (keywords only, references resolved) either constrains
    objects alone (no ``type``/``const``/``enum``, only ``OBJECT_KEYWORDS``: every value
    that is not an object is valid under it) or admits objects only (``types_of`` is
    ``{"object"}`` or empty), and the branches restricted to objects
    (``"type": "object"`` added) are pairwise ``provably_disjoint``. A value that is not
    an object is then valid under ``oneOf`` exactly when one branch constrains objects
    alone: that branch is returned whole, the others restricted to objects.
    """
    open_branches = []
    for i, b in enumerate(branches):
        if b is False or b is True or not isinstance(b, dict):
            return None
        kinds = types_of(b)
        if kinds <= {"object"}:
            continue
        if "type" in b or "const" in b or "enum" in b or not set(b) <= OBJECT_KEYWORDS:
            return None
        open_branches.append(i)
    restricted = [b if types_of(b) <= {"object"} else {**b, "type": "object"} for b in branches]
    for i in range(len(restricted)):
        for j in range(i + 1, len(restricted)):
            if not provably_disjoint(restricted[i], restricted[j], is_valid):
                return None
    if len(open_branches) == 1:
        restricted[open_branches[0]] = branches[open_branches[0]]
    return restricted


def _objects_disjoint(a: dict, b: dict) -> bool:
    pa, pb = a.get("properties", {}), b.get("properties", {})
    ra, rb = set(a.get("required", [])), set(b.get("required", []))
    for name in ra & rb:
        va, vb = _values(pa.get(name)), _values(pb.get(name))
        if va is not None and vb is not None:
            if not ({value_key(v) for v in va} & {value_key(v) for v in vb}):
                return True
    if a.get("additionalProperties") is False and "patternProperties" not in a:
        if rb - set(pa):
            return True
    return any(pa.get(name) is False for name in rb)


_KINDS = frozenset({"object", "array", "string", "boolean", "null", "integer", "fraction"})
NON_INTEGER = (
    r"-?(?:0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"  # a nonzero fraction digit: never an integer
)
# drafts 3 and 4 type a number written with a fraction or an exponent (7.0, 1e3) as a
# number that is not an integer (jsonschema: the parsed float is not an int)
NON_INTEGER_DRAFT4 = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)"


def _kinds(schema: Any, resolve: Resolver, depth: int = 0) -> frozenset[str] | None:
    """The kinds of value (JSON types, numbers split into integers and the rest) a schema
    made only of ``type``/``not``/``$ref`` (or a boolean) accepts; None for any other.
    """
    if depth > 16:
        return None
    if schema is True or schema is False:
        return _KINDS if schema else frozenset()
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - _IGNORED
    if keys == {"$ref"}:
        return _kinds(resolve(schema["$ref"], ""), resolve, depth + 1)
    if not keys <= {"type", "not"}:
        return None
    kinds = _KINDS
    if "type" in schema:
        t = schema["type"]
        ts = {t} if isinstance(t, str) else set(t)
        kinds = frozenset(ts & _KINDS | ({"integer", "fraction"} if "number" in ts else set()))
    if "not" in schema:
        inner = _kinds(schema["not"], resolve, depth + 1)
        if inner is None:
            return None
        kinds = kinds - inner
    return kinds


def negated_types(
    negated: Any, resolve: Resolver, within: Any = None
) -> tuple[list[str], bool] | None:
    """What ``not: negated`` leaves of the values of ``type: within`` (None: any type),
    when ``negated`` is a boolean or is made only of ``type``/``not``/``$ref``:
    ``(types, fraction)``: the JSON types left (``"integer"`` alone: the integers only),
    and whether the numbers that are not integers are left too while the integers are
    not (the caller writes ``NON_INTEGER`` for them). None for other schemas.
    """
    kinds = _kinds(negated, resolve)
    if kinds is None:
        return None
    left = _KINDS - kinds
    if within is not None:
        left = left & (_kinds({"type": within}, resolve) or frozenset())
    types = [t for t in TYPES if t in left and t not in ("integer", "number")]
    if {"integer", "fraction"} <= left:
        types.append("number")
    elif "integer" in left:
        types.append("integer")
    return types, "fraction" in left and "integer" not in left


def _presence(schema: Any, resolve: Resolver, depth: int = 0) -> tuple | None:
    """A schema made only of ``required`` (names), ``allOf``, ``anyOf`` and ``$ref`` as a
    formula over key presence: ``("and", parts)``, ``("or", parts)``, ``("key", name)``;
    None for any other schema (or one nested past 16 levels).
    """
    if depth > 16 or not isinstance(schema, dict):
        return None
    keys = set(schema) - _IGNORED
    if keys == {"$ref"}:
        return _presence(resolve(schema["$ref"], ""), resolve, depth + 1)
    if not keys or not keys <= {"required", "allOf", "anyOf"}:
        return None
    parts: list[tuple] = []
    names = schema.get("required", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    parts += [("key", n) for n in dict.fromkeys(names)]
    for key in ("allOf", "anyOf"):
        if key not in schema:
            continue
        subs = schema[key]
        if not isinstance(subs, list) or not subs:
            return None
        found = [_presence(s, resolve, depth + 1) for s in subs]
        if any(f is None for f in found):
            return None
        parts.append(("and", found) if key == "allOf" else ("or", found))
    return ("and", parts)


def _absent(formula: tuple) -> list[frozenset[str]] | None:
    """The objects where ``formula`` fails, as alternatives (each a set of keys all absent,
    in disjunctive form, no set holding another); None past ``MAX_ABSENT_BRANCHES``.
    """
    kind, arg = formula
    if kind == "key":
        return [frozenset([arg])]
    if kind == "and":  # fails where some part fails
        out: list[frozenset[str]] = []
        for part in arg:
            sets = _absent(part)
            if sets is None:
                return None
            out += sets
    else:  # "or" fails where every part fails: the parts' sets combined
        out = [frozenset()]
        for part in arg:
            sets = _absent(part)
            if sets is None:
                return None
            out = [a | b for a in out for b in sets]
            if len(out) > MAX_ABSENT_BRANCHES:
                return None
    out = list(dict.fromkeys(out))
    out = [s for s in out if not any(t < s for t in out)]
    return out if len(out) <= MAX_ABSENT_BRANCHES else None


def negated_required(negated: Any, resolve: Resolver) -> list[list[str]] | None:
    """What ``not: negated`` accepts when ``negated`` is made only of ``required``,
    ``allOf``, ``anyOf`` (and ``$ref``s to such): the objects lacking every key of one of
    the returned name lists (sorted lists, sorted). Every value that is not an object is
    valid under ``negated`` (``required`` reads objects only), so ``not`` accepts objects
    only. ``[]``: ``not`` accepts nothing (``negated`` holds for every object); ``[[]]``:
    every object; None for other schemas or past ``MAX_ABSENT_BRANCHES`` alternatives.
    """
    formula = _presence(negated, resolve)
    if formula is None:
        return None
    sets = _absent(formula)
    if sets is None:
        return None
    return sorted(sorted(s) for s in sets)


def static_conditional(schema: dict) -> dict | None:
    """``schema`` without ``if``/``then``/``else`` where their effect is decided without
    an instance: ``then``/``else`` without ``if`` and ``if`` without either have none;
    ``if: true`` (or an empty schema) is ``then``, ``if: false`` is ``else``. None when
    the condition depends on the instance (not enforced).
    """
    rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    if "if" not in schema or ("then" not in schema and "else" not in schema):
        return rest
    cond = schema["if"]
    if cond is True or isinstance(cond, dict) and not set(cond) - _IGNORED:
        branch = schema.get("then", True)
    elif cond is False:
        branch = schema.get("else", True)
    else:
        return None
    return {"allOf": [rest, branch]}


class _End:
    """Marks where the ``allOf`` of a flattened subschema ends (``merge_all_of``)."""

    __slots__ = ("keywords",)

    def __init__(self, keywords: dict) -> None:
        self.keywords = keywords
