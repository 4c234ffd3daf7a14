"""The metaschema check of ``compile_json_schema``, with a fast path for common schemas.

``jsonschema``'s ``check_schema`` validates a schema against its draft's metaschema
through the general validator ($ref / $dynamicRef resolution per keyword), which costs
more than everything else a compile does (``benchmarks/RESULTS.md``). Here a
table of what each draft's metaschema says about the keywords schemas actually use
(a string, a non-negative integer, a subschema, an array of unique type names, ...)
proves most schemas valid in one walk. The fast path only ever *accepts*: whenever a
keyword or value falls outside what the table decides (a keyword the metaschema
constrains that the table does not model, a float where an integer is expected, an
enum of mixed values in draft-04, an invalid value), ``jsonschema``'s own
``check_schema`` runs and decides, so every verdict and error message is jsonschema's.

Formats in the metaschemas (``regex`` for ``pattern`` and ``patternProperties`` keys,
``uri`` / ``uri-reference`` for ``$schema`` / ``$ref`` / ``$id``) are checked with the
draft's own ``FORMAT_CHECKER``, as ``check_schema`` does. Drafts with a table: 4, 6, 7
and 2020-12; any other draft always takes the ``jsonschema`` path.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable

import jsonschema

from ...errors import InvalidSchemaError, did_you_mean
from ..nesting import SEGMENT, fresh_stack, json_depth
from ..regex.parse import RE_MAX_NESTING, _nesting

__all__ = ["check_schema", "proves_valid", "constrained_keywords", "validator_class"]

_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_ANCHOR = "^[A-Za-z_][-A-Za-z0-9._]*$"  # the 2020-12 core metaschema's anchorString
_ID_2020 = "^[^#]*#?$"  # core metaschema: $id has no non-empty fragment
_PLAIN = (str, int, type(None))  # no two of them compare equal across types


def validator_class(schema: Any) -> tuple[type, bool]:
    """``jsonschema``'s validator class for the document's draft, and whether a ``$schema``
    it holds names a draft ``jsonschema`` knows (an unknown URI, or a ``$schema`` that is not
    a string, reads as the latest draft, as ``jsonschema.validators.validator_for`` does, but
    without its DeprecationWarning; no ``$schema``: the latest draft, known).
    """
    root = schema if isinstance(schema, dict) else {}
    uri = root.get("$schema")
    cls = jsonschema.validators.validator_for(root, default=None) if isinstance(uri, str) else None
    if cls is None:
        return jsonschema.validators.validator_for({}), uri is None
    return cls, True


def check_schema(schema: dict, *, depth: int | None = None) -> None:
    """Check ``schema`` against the metaschema of its draft.

    The draft is the one ``jsonschema.validators.validator_for`` picks.

    Args:
        schema: the schema document; not modified.
        depth: its JSON nesting (containers) when the caller has measured it
            (``ids.check_schema_depth``), else None (measured here when needed). It only
            picks how the walk runs: a document shallower than ``nesting.SEGMENT`` is walked
            on this thread's stack without counting levels; the verdict is the same.

    Raises:
        InvalidSchemaError: the schema fails its metaschema (jsonschema's message, and the
            JSON pointer of the failing keyword's value).
    """
    if not isinstance(schema.get("$schema", ""), str):  # validator_for would crash on it
        raise InvalidSchemaError("invalid JSON Schema: $schema must be a string", "/$schema")
    cls = validator_class(schema)[0]
    shallow = depth is not None and depth < SEGMENT
    if proves_valid(schema, cls, shallow=shallow):
        return
    if (json_depth(schema)[0] if depth is None else depth) <= _JSONSCHEMA_MAX_DEPTH:
        _jsonschema_check(schema, cls, "")
        return
    for node, pointer in _subschemas_shallow(schema):
        if not proves_valid(node, cls):
            _jsonschema_check(node, cls, pointer)


_JSONSCHEMA_MAX_DEPTH = 48  # jsonschema's validator recurses several frames per level


def _deep_regex(v: str) -> bool:
    """True for a pattern nested deeper than CPython's parser reads (``re.compile`` in the
    ``regex`` format check would raise ``RecursionError``): the conversion decides it,
    reading it or refusing it with its pointer (``regex.parse.RE_MAX_NESTING``).
    """
    return "(" in v and _nesting(v) > RE_MAX_NESTING


_FORMAT_CHECKERS: dict[type, Any] = {}


def _format_checker(cls: type) -> Any:
    """``cls``'s metaschema format checker, with ``regex`` leaving deep patterns undecided."""
    checker = _FORMAT_CHECKERS.get(cls)
    if checker is None:
        base = cls.FORMAT_CHECKER
        checker = jsonschema.FormatChecker(())
        checker.checkers = dict(base.checkers)
        if "regex" in base.checkers:
            func, raises = base.checkers["regex"]
            checker.checkers["regex"] = (
                lambda v: not isinstance(v, str) or _deep_regex(v) or func(v),
                raises,
            )
        _FORMAT_CHECKERS[cls] = checker
    return checker


def _jsonschema_check(schema: Any, cls: type, pointer: str) -> None:
    try:
        cls.check_schema(schema, format_checker=_format_checker(cls))
    except jsonschema.SchemaError as exc:
        where = pointer + "".join("/" + str(p) for p in exc.path)
        raise InvalidSchemaError(f"invalid JSON Schema: {_type_message(exc)}", where) from exc


_NAME_MAPS = frozenset(
    ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
)
_TYPE_NAMES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _type_message(exc: jsonschema.SchemaError) -> str:
    """The message of ``exc`` (jsonschema's), or for a bad ``type`` value one that lists
    the JSON type names and the name a misspelt one most resembles (``type name 'strin' is
    not one of array, ...; did you mean 'string'?``). Raises: never.
    """
    path, value = list(exc.path), exc.instance
    if not path or path[-1] != "type" or not isinstance(value, (str, list)):
        return exc.message
    if len(path) > 1 and path[-2] in _NAME_MAPS:  # a property (or definition) named "type"
        return exc.message
    names = value if isinstance(value, list) else [value]
    wrong = [n for n in names if not (isinstance(n, str) and n in _TYPE_NAMES)]
    allowed = ", ".join(_TYPE_NAMES)
    if not wrong:  # a list repeating a name, or an empty list
        return f"type {value!r} is neither one of {allowed} nor a non-empty list of distinct ones"
    hint = did_you_mean(wrong[0], _TYPE_NAMES) if isinstance(wrong[0], str) else ""
    return f"type name {wrong[0]!r} is not one of {allowed}{hint}"


def _subschemas_shallow(schema: dict):
    """Every subschema (dict) of ``schema`` with its own subschemas replaced by ``{}``, and
    its JSON pointer: the metaschemas check each subschema by the same rules, so checking
    these one by one is the whole check, and none of them nests (an iterative walk, for
    schemas too deep for ``jsonschema``'s recursive validator).
    """
    from .ids import _IN_ARRAY, _IN_MAP, _IN_VALUE, pointer_of

    stack: list[tuple[Any, tuple]] = [(schema, ())]
    while stack:
        node, tokens = stack.pop()
        shallow = dict(node)
        for key, val in node.items():
            if key in _IN_VALUE and isinstance(val, dict):
                shallow[key] = {}
                stack.append((val, tokens + (key,)))
            elif key in _IN_ARRAY and isinstance(val, list):
                shallow[key] = [{} if isinstance(v, dict) else v for v in val]
                subs = [(v, tokens + (key, i)) for i, v in enumerate(val) if isinstance(v, dict)]
                stack.extend(reversed(subs))
            elif key in _IN_MAP and isinstance(val, dict):
                shallow[key] = {k: {} if isinstance(v, dict) else v for k, v in val.items()}
                subs = [(v, tokens + (key, k)) for k, v in val.items() if isinstance(v, dict)]
                stack.extend(reversed(subs))
        yield shallow, pointer_of(tokens)[1:]


def proves_valid(schema: Any, cls: type, *, shallow: bool = False) -> bool:
    """True when the fast table shows ``schema`` valid under ``cls``'s metaschema; False
    means "not shown" (invalid, or outside the table), never "invalid". Raises: never
    (the walk takes any depth: see ``_Prover.schema``).

    ``shallow``: the caller knows ``schema`` nests fewer than ``nesting.SEGMENT``
    containers, so the walk (one level per subschema, each at least one container deeper)
    never needs a fresh stack; it then runs the same table without counting its levels.
    The verdict is the same either way.
    """
    provers = _SHALLOW_PROVERS if shallow else _PROVERS
    prover = provers.get(cls)
    if prover is None:
        return False
    return prover.schema(schema)


def constrained_keywords(cls: type) -> frozenset[str]:
    """Keywords that ``cls``'s metaschema puts a constraint on (its ``properties``, with
    the 2020-12 vocabularies merged); empty for drafts without a fast table.
    """
    prover = _PROVERS.get(cls)
    return frozenset() if prover is None else prover.constrained


# ---- value predicates (True = valid under the metaschema's rule, False = not shown) ----


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_nonneg_int(v: Any) -> bool:
    return type(v) is int and v >= 0  # floats such as 1.0: jsonschema decides (per draft)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_any(v: Any) -> bool:
    return True


def _is_array(v: Any) -> bool:
    return isinstance(v, list)


def _unique_strings(v: Any, min_items: int = 0) -> bool:
    return (
        isinstance(v, list)
        and len(v) >= min_items
        and all(isinstance(s, str) for s in v)
        and len(set(v)) == len(v)
    )


def _is_type(v: Any) -> bool:
    if isinstance(v, str):
        return v in _SIMPLE_TYPES
    return (
        isinstance(v, list)
        and len(v) >= 1
        and all(isinstance(s, str) and s in _SIMPLE_TYPES for s in v)
        and len(set(v)) == len(v)
    )


def _unique_enum(v: Any) -> bool:
    """draft-04 ``enum``: a non-empty array of unique values; shown for one value, or for
    strings, integers and null (jsonschema's equality of 1 / 1.0 / true is its own).
    """
    if not isinstance(v, list) or not v:
        return False
    if len(v) == 1:
        return True
    if all(type(x) in _PLAIN for x in v):
        return len(set(v)) == len(v)
    return False


class _Prover:
    """One draft's table: keyword -> predicate on its value; subschemas recurse.

    Args:
        cls: the jsonschema validator class (its ``FORMAT_CHECKER`` checks formats).
        bool_schemas: subschemas may be ``true`` / ``false`` (draft 6 and later).
        constrained: every keyword the metaschema constrains; one outside ``rules``
            sends the schema to jsonschema.
    """

    def __init__(
        self, cls: type, bool_schemas: bool, constrained: frozenset[str], counted: bool = True
    ) -> None:
        self.cls = cls
        self.bool_schemas = bool_schemas
        self.constrained = constrained
        self.formats = cls.FORMAT_CHECKER
        self.rules: dict[str, Callable[[Any], bool]] = {}
        self.draft4 = False
        self._local = threading.local()  # .nesting: schema() calls open on this thread
        if not counted:  # documents shallower than SEGMENT (proves_valid's shallow)
            self.schema = self._schema  # type: ignore[method-assign]

    def schema(self, s: Any) -> bool:
        """True when subschema ``s`` is shown valid (every ``nesting.SEGMENT`` levels of
        subschemas the walk continues on a fresh stack: ``nesting.fresh_stack``; a prover
        built with ``counted=False`` is ``_schema`` itself, for shallow documents).
        """
        local = self._local  # the table is shared by threads; the count is each thread's
        nesting = local.nesting = getattr(local, "nesting", 0) + 1
        try:
            if nesting % SEGMENT == 0:
                return fresh_stack(self._schema, s)
            return self._schema(s)
        finally:
            local.nesting -= 1

    def _schema(self, s: Any) -> bool:
        if not isinstance(s, dict):
            return self.bool_schemas and isinstance(s, bool)
        rules, constrained = self.rules, self.constrained
        for key, value in s.items():
            rule = rules.get(key)
            if rule is None:
                if key in constrained:
                    return False
            elif not rule(value):
                return False
        if self.draft4:  # its metaschema's "dependencies": exclusiveM* needs the bound
            if (
                "exclusiveMaximum" in s
                and "maximum" not in s
                or "exclusiveMinimum" in s
                and "minimum" not in s
            ):
                return False
        return True

    # predicates that need the table (subschemas, formats)
    def schema_or_bool(self, v: Any) -> bool:
        return isinstance(v, bool) or self.schema(v)

    def schema_map(self, v: Any) -> bool:
        return isinstance(v, dict) and all(self.schema(x) for x in v.values())

    def pattern_map(self, v: Any) -> bool:
        return self.schema_map(v) and all(self.regex(k) for k in v)

    def schema_array(self, v: Any) -> bool:
        return isinstance(v, list) and len(v) >= 1 and all(self.schema(x) for x in v)

    def items(self, v: Any) -> bool:
        return self.schema_array(v) if isinstance(v, list) else self.schema(v)

    def dependencies(self, v: Any, min_items: int) -> bool:
        return isinstance(v, dict) and all(
            _unique_strings(x, min_items) if isinstance(x, list) else self.schema(x)
            for x in v.values()
        )

    def regex(self, v: Any) -> bool:
        return isinstance(v, str) and (_deep_regex(v) or self.formats.conforms(v, "regex"))

    def uri(self, v: Any) -> bool:
        return isinstance(v, str) and self.formats.conforms(v, "uri")

    def uri_ref(self, v: Any) -> bool:
        return isinstance(v, str) and self.formats.conforms(v, "uri-reference")


def _common_rules(p: _Prover) -> dict[str, Callable[[Any], bool]]:
    """Rules shared by the draft 6, 7 and 2020-12 metaschemas."""
    nonneg = {
        k: _is_nonneg_int
        for k in (
            "maxLength",
            "minLength",
            "maxItems",
            "minItems",
            "maxProperties",
            "minProperties",
        )
    }
    numbers = {k: _is_num for k in ("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum")}
    schemas = {k: p.schema for k in ("additionalProperties", "propertyNames", "contains", "not")}
    return {
        **nonneg,
        **numbers,
        **schemas,
        "title": _is_str,
        "description": _is_str,
        "format": _is_str,
        "default": _is_any,
        "const": _is_any,
        "examples": _is_array,
        "enum": _is_array,
        "type": _is_type,
        "uniqueItems": _is_bool,
        "required": _unique_strings,
        "multipleOf": lambda v: _is_num(v) and v > 0,
        "pattern": p.regex,
        "properties": p.schema_map,
        "definitions": p.schema_map,
        "patternProperties": p.pattern_map,
        "allOf": p.schema_array,
        "anyOf": p.schema_array,
        "oneOf": p.schema_array,
        "dependencies": lambda v: p.dependencies(v, 0),
        "$ref": p.uri_ref,
        "$schema": p.uri,
        "$id": p.uri_ref,
    }


def _draft4(cls: type, counted: bool) -> _Prover:
    p = _Prover(cls, False, frozenset(cls.META_SCHEMA["properties"]), counted)
    p.draft4 = True
    rules = _common_rules(p)
    for key in ("const", "examples", "propertyNames", "contains", "$ref", "$id"):
        del rules[key]  # not in the draft-04 metaschema: unconstrained there
    rules.update(
        {
            "id": _is_str,
            "$schema": _is_str,
            "exclusiveMaximum": _is_bool,
            "exclusiveMinimum": _is_bool,
            "additionalItems": p.schema_or_bool,
            "additionalProperties": p.schema_or_bool,
            "items": p.items,
            "required": lambda v: _unique_strings(v, 1),
            "enum": _unique_enum,
            "patternProperties": p.schema_map,
            "dependencies": lambda v: p.dependencies(v, 1),
        }
    )
    p.rules = rules
    return p


def _draft6(cls: type, draft7: bool, counted: bool) -> _Prover:
    p = _Prover(cls, True, frozenset(cls.META_SCHEMA["properties"]), counted)
    rules = _common_rules(p)
    rules.update({"additionalItems": p.schema, "items": p.items})
    if draft7:
        rules.update(
            {
                "$comment": _is_str,
                "readOnly": _is_bool,
                "if": p.schema,
                "then": p.schema,
                "else": p.schema,
                "contentMediaType": _is_str,
                "contentEncoding": _is_str,
            }
        )
    p.rules = rules
    return p


def _draft2020(cls: type, counted: bool) -> _Prover:
    from urllib.parse import urljoin

    from jsonschema_specifications import REGISTRY

    meta = cls.META_SCHEMA
    keys = set(meta["properties"])
    for sub in meta.get("allOf", ()):
        keys |= set(REGISTRY[urljoin(meta["$id"], sub["$ref"])].contents.get("properties", {}))
    p = _Prover(cls, True, frozenset(keys), counted)
    rules = _common_rules(p)
    anchor = lambda v: isinstance(v, str) and re.search(_ANCHOR, v) is not None  # noqa: E731
    rules.update(
        {
            "$id": lambda v: p.uri_ref(v) and re.search(_ID_2020, v) is not None,
            "$defs": p.schema_map,
            "$comment": _is_str,
            "prefixItems": p.schema_array,
            "items": p.schema,
            "dependentSchemas": p.schema_map,
            "if": p.schema,
            "then": p.schema,
            "else": p.schema,
            "unevaluatedItems": p.schema,
            "unevaluatedProperties": p.schema,
            "maxContains": _is_nonneg_int,
            "minContains": _is_nonneg_int,
            "dependentRequired": lambda v: (
                isinstance(v, dict) and all(map(_unique_strings, v.values()))
            ),
            "deprecated": _is_bool,
            "readOnly": _is_bool,
            "writeOnly": _is_bool,
            "contentEncoding": _is_str,
            "contentMediaType": _is_str,
            "contentSchema": p.schema,
            "$anchor": anchor,
            "$dynamicAnchor": anchor,
            "$recursiveAnchor": anchor,
            "$dynamicRef": p.uri_ref,
            "$recursiveRef": p.uri_ref,
        }
    )
    p.rules = rules
    return p


def _build_provers(counted: bool) -> dict[type, _Prover]:
    v = jsonschema.validators
    out: dict[type, _Prover] = {}
    for name, build in (
        ("Draft4Validator", _draft4),
        ("Draft6Validator", lambda c, counted: _draft6(c, False, counted)),
        ("Draft7Validator", lambda c, counted: _draft6(c, True, counted)),
        ("Draft202012Validator", _draft2020),
    ):
        cls = getattr(v, name, None)
        if cls is not None:
            out[cls] = build(cls, counted)
    return out


_PROVERS = _build_provers(True)
_SHALLOW_PROVERS = _build_provers(False)  # the same tables, levels not counted
