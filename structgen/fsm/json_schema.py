"""JSON Schema (or a pydantic model) -> regex over the serialized JSON document.

Supported: ``type`` (one or a list), ``properties``/``required`` (object keys in
schema order; any subset of the optional ones, in order), ``additionalProperties``
(``false`` or absent: no extra keys are generated unless ``allow_extra_properties``
and the object declares no properties), ``items``/``minItems``/``maxItems``,
``string`` with ``minLength``/``maxLength`` (characters; an escape counts as one),
``pattern`` (search semantics, see ``_json_pattern``) and ``format`` (date,
date-time, time, email, uuid), ``integer``/``number`` (exact JSON grammar),
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` on integers (exact,
any magnitude; see ``_numeric``), ``boolean``, ``null``, ``enum``/``const`` of any JSON value, ``anyOf``, ``oneOf``
(as ``anyOf``: exclusivity not enforced, a warning is recorded), one-element
``allOf``, and local ``$ref`` (``#``, ``#/$defs/...``, ``#/definitions/...``).

Recursive ``$ref`` is unrolled to ``max_recursion_depth`` expansions of the same
reference along a path; deeper, the recursive branch is dropped where the schema
allows (optional property, empty array, other ``anyOf`` branch) and a warning is
recorded; where it cannot be dropped, ``UnsupportedSchemaError("$ref", pointer)``.

Values with no schema (``{}``, ``true``, array ``items`` absent) are any JSON value
nested at most ``ANY_VALUE_DEPTH`` levels deep.

Whitespace: ``"compact"`` writes none (``json.dumps(x, separators=(",", ":"))``);
``"flexible"`` allows runs of at most ``FLEXIBLE_WS_MAX`` of space, tab, CR, LF
around structural characters; an int sets that maximum run.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidSchemaError, UnsupportedSchemaError
from ._json_pattern import JSON_CHAR, escape_literal, pattern_to_string_body
from ._numeric import integer_bounds, integer_range_regex

__all__ = ["json_schema_to_regex", "schema_for", "JsonSchemaConverter", "FLEXIBLE_WS_MAX"]

FLEXIBLE_WS_MAX = 12
ANY_VALUE_DEPTH = 2
ANNOTATIONS = frozenset(
    {"title", "description", "examples", "default", "$schema", "$id", "$comment",
     "deprecated", "readOnly", "writeOnly", "$defs", "definitions"}
)
_KNOWN = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "minItems",
     "maxItems", "minLength", "maxLength", "pattern", "format", "enum", "const", "anyOf",
     "oneOf", "allOf", "$ref", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
)
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
INTEGER = r"-?(?:0|[1-9][0-9]*)"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_DATE = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_TIME = (r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?"
         r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])")
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + "[Tt]" + _TIME,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "email": r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+",
}
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def schema_for(model_or_schema: Any) -> dict | bool:
    """A JSON Schema from a pydantic model class, a dict, a bool or a JSON string.

    Raises:
        InvalidSchemaError: anything else, or a JSON string that does not parse.
    """
    if isinstance(model_or_schema, (dict, bool)):
        return model_or_schema
    if isinstance(model_or_schema, str):
        try:
            return json.loads(model_or_schema)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError(f"schema string is not JSON: {exc}") from exc
    if isinstance(model_or_schema, type) and hasattr(model_or_schema, "model_json_schema"):
        return model_or_schema.model_json_schema()
    raise InvalidSchemaError(
        f"expected a JSON Schema dict or a pydantic model class, got {type(model_or_schema).__name__}"
    )


def json_schema_to_regex(
    schema: Any,
    *,
    whitespace: str | int = "compact",
    strict: bool = True,
    allow_extra_properties: bool = False,
    max_recursion_depth: int = 3,
    warnings: list[str] | None = None,
) -> str:
    """Regex (Python syntax, fullmatch) for the JSON documents valid under ``schema``.

    Args:
        schema: dict / bool schema, pydantic model class, or JSON string.
        whitespace: ``"compact"``, ``"flexible"`` or the maximum whitespace run.
        strict: raise on keywords that cannot be enforced; else ignore them and
            append a message to ``warnings``.
        allow_extra_properties: generate extra keys where the schema permits them
            (only for objects without declared properties).
        max_recursion_depth: expansions of one recursive ``$ref`` along a path.
        warnings: list that receives warning strings (mutated).

    Raises:
        UnsupportedSchemaError: a keyword that cannot be enforced (``keyword``, ``pointer``).
        InvalidSchemaError: malformed schema parts (e.g. an unresolvable ``$ref``).
    """
    conv = JsonSchemaConverter(
        schema_for(schema), whitespace=whitespace, strict=strict,
        allow_extra_properties=allow_extra_properties, max_recursion_depth=max_recursion_depth,
    )
    regex = conv.convert_root()
    if warnings is not None:
        warnings.extend(conv.warnings)
    return regex


def _ptr(pointer: str, *parts: Any) -> str:
    for p in parts:
        pointer += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return pointer


def _alt(options: list[str]) -> str:
    options = list(dict.fromkeys(options))
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


def _literal(value: Any) -> str:
    return escape_literal(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


class JsonSchemaConverter:
    """One conversion: holds the root (for ``$ref``), options and collected warnings."""

    def __init__(self, root: Any, *, whitespace: str | int, strict: bool,
                 allow_extra_properties: bool, max_recursion_depth: int) -> None:
        self.root = root
        self.strict = strict
        self.allow_extra = allow_extra_properties
        self.max_depth = max_recursion_depth
        self.warnings: list[str] = []
        self._cut_at: str | None = None
        if whitespace == "compact":
            self.ws = ""
        elif whitespace == "flexible" or (isinstance(whitespace, int) and whitespace > 0):
            n = FLEXIBLE_WS_MAX if whitespace == "flexible" else int(whitespace)
            self.ws = "[ \\t\\n\\r]{0,%d}" % n
        else:
            raise ValueError(f"whitespace must be 'compact', 'flexible' or a positive int, got {whitespace!r}")

    def convert_root(self) -> str:
        regex = self.convert(self.root, "", ())
        if regex is None:
            raise UnsupportedSchemaError(
                "$ref", self._cut_at or "",
                f"recursion deeper than max_recursion_depth={self.max_depth} cannot be cut here",
            )
        return regex

    def _unsupported(self, keyword: str, pointer: str, detail: str = "") -> None:
        if self.strict:
            raise UnsupportedSchemaError(keyword, pointer, detail)
        self.warnings.append(f"ignored unsupported keyword {keyword!r} at {pointer or '#'}"
                             + (f": {detail}" if detail else ""))

    # ---- dispatch --------------------------------------------------------------

    def convert(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        """Regex for ``schema``, or None when no instance can be generated (cut recursion)."""
        if schema is True or schema == {}:
            return self.any_value(ANY_VALUE_DEPTH)
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise InvalidSchemaError("a schema must be an object or a boolean", pointer)
        for key in schema:
            if key not in _KNOWN and key not in ANNOTATIONS:
                self._unsupported(key, pointer)
        if "$ref" in schema:
            return self._ref(schema, pointer, refs)
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            return _alt([_literal(v) for v in schema["enum"]]) if schema["enum"] else None
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._any_of(schema, key, pointer, refs)
        if "allOf" in schema:
            if len(schema["allOf"]) != 1 or set(schema) - ANNOTATIONS - {"allOf"}:
                self._unsupported("allOf", pointer, "only a single subschema without siblings")
            return self.convert(schema["allOf"][0], _ptr(pointer, "allOf", 0), refs)
        types = schema.get("type")
        if types is None:
            types = self._infer_types(schema)
        if isinstance(types, str):
            types = [types]
        options = []
        for t in types:
            if t not in _TYPES:
                raise InvalidSchemaError(f"unknown type {t!r}", pointer)
            r = getattr(self, "_" + t)(schema, pointer, refs)
            if r is not None:
                options.append(r)
        return _alt(options) if options else None

    def _infer_types(self, schema: dict) -> list[str]:
        if {"properties", "required", "additionalProperties"} & set(schema):
            return ["object"]
        if {"items", "minItems", "maxItems"} & set(schema):
            return ["array"]
        if {"minLength", "maxLength", "pattern", "format"} & set(schema):
            return ["string"]
        return list(_TYPES)

    def _ref(self, schema: dict, pointer: str, refs: tuple[str, ...]) -> str | None:
        ref = schema["$ref"]
        if set(schema) - ANNOTATIONS - {"$ref"}:
            self._unsupported("$ref", pointer, "sibling keywords next to $ref are ignored")
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedSchemaError("$ref", pointer, f"only local references, got {ref!r}")
        if refs.count(ref) >= self.max_depth:
            self._cut_at = pointer
            msg = f"recursive $ref {ref} at {pointer or '#'} unrolled to depth {self.max_depth}"
            if msg not in self.warnings:
                self.warnings.append(msg)
            return None
        target: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise InvalidSchemaError(f"cannot resolve $ref {ref!r}", pointer)
        return self.convert(target, ref[1:], refs + (ref,))

    def _any_of(self, schema: dict, key: str, pointer: str, refs) -> str | None:
        if set(schema) - ANNOTATIONS - {key}:
            self._unsupported(key, pointer, "sibling keywords next to " + key)
        if key == "oneOf":
            self.warnings.append(f"oneOf at {pointer or '#'} treated as anyOf (exclusivity not enforced)")
        options = [self.convert(s, _ptr(pointer, key, i), refs) for i, s in enumerate(schema[key])]
        options = [o for o in options if o is not None]
        return _alt(options) if options else None

    # ---- scalar types ------------------------------------------------------------

    def _string(self, schema: dict, pointer: str, refs) -> str | None:
        lo = int(schema.get("minLength", 0))
        hi = schema.get("maxLength")
        has_len = "minLength" in schema or hi is not None
        if "format" in schema:
            fmt = schema["format"]
            if fmt in FORMATS and not has_len and "pattern" not in schema:
                return '"' + FORMATS[fmt] + '"'
            self._unsupported("format", pointer, f"format {fmt!r}" + (
                " combined with length or pattern" if fmt in FORMATS else ""))
        if "pattern" in schema:
            if has_len:
                self._unsupported("pattern", pointer, "pattern combined with minLength/maxLength")
            else:
                return '"' + pattern_to_string_body(schema["pattern"], _ptr(pointer, "pattern")) + '"'
        if hi is not None and int(hi) < lo:
            return None
        if hi is None:
            rep = "*" if lo == 0 else "{%d,}" % lo
        else:
            rep = "{%d,%d}" % (lo, int(hi))
        return '"' + JSON_CHAR + rep + '"'

    def _integer(self, schema, pointer, refs) -> str | None:
        if not any(k in schema for k in _BOUNDS):
            return INTEGER
        lo, hi = integer_bounds(schema)
        return integer_range_regex(lo, hi)

    def _number(self, schema, pointer, refs) -> str:
        for key in _BOUNDS:
            if key in schema:
                self._unsupported(key, pointer, "bounds on non-integer numbers")
        return NUMBER

    def _boolean(self, schema, pointer, refs) -> str:
        return "(?:true|false)"

    def _null(self, schema, pointer, refs) -> str:
        return "null"

    # ---- containers ----------------------------------------------------------------

    def _array(self, schema: dict, pointer: str, refs) -> str | None:
        lo = int(schema.get("minItems", 0))
        hi = schema.get("maxItems")
        ws = self.ws
        empty = "\\[" + ws + "\\]"
        if hi is not None and int(hi) < lo:
            return None
        items = schema.get("items", True)
        if isinstance(items, list):
            self._unsupported("items", pointer, "tuple form of items")
            items = True
        item = self.convert(items, _ptr(pointer, "items"), refs)
        if item is None or hi == 0:
            return empty if lo == 0 else None
        sep = ws + "," + ws
        more_hi = "" if hi is None else str(int(hi) - 1)
        tail = "(?:%s%s){%d,%s}" % (sep, item, max(lo - 1, 0), more_hi)
        body = item + tail
        if lo == 0:
            return "\\[" + ws + "(?:" + body + ws + ")?\\]"
        return "\\[" + ws + body + ws + "\\]"

    def _object(self, schema: dict, pointer: str, refs) -> str | None:
        ws = self.ws
        props = schema.get("properties", {}) or {}
        required = set(schema.get("required", []))
        extra = schema.get("additionalProperties", True)
        unknown_required = required - set(props)
        if unknown_required:
            if extra is False or not self.allow_extra:
                return None if extra is False else self._unsupported(
                    "required", pointer, f"required keys without properties: {sorted(unknown_required)}")
        if not props and extra is not False and self.allow_extra:
            value = self.convert(extra, _ptr(pointer, "additionalProperties"), refs)
            return self._free_object(value) if value is not None else "\\{" + ws + "\\}"
        if props and extra is not False and self.allow_extra:
            self._unsupported("additionalProperties", pointer,
                              "extra keys next to declared properties cannot be generated")
        if extra is not False and not self.allow_extra:
            note = "objects whose additionalProperties is not false are generated without extra keys"
            if note not in self.warnings:
                self.warnings.append(note)
        members: list[tuple[str, bool]] = []  # (regex of key:value, is_required)
        for name, sub in props.items():
            value = self.convert(sub, _ptr(pointer, "properties", name), refs)
            if value is None:
                if name in required:
                    return None
                continue
            members.append((_literal(name) + ws + ":" + ws + value, name in required))
        sep = ws + "," + ws
        return "\\{" + ws + _members(members, sep) + ws + "\\}"

    def _free_object(self, value: str) -> str:
        ws = self.ws
        pair = '"' + JSON_CHAR + '*"' + ws + ":" + ws + value
        return "\\{" + ws + "(?:" + pair + "(?:" + ws + "," + ws + pair + ")*" + ws + ")?\\}"

    def any_value(self, depth: int) -> str:
        """Any JSON value nested at most ``depth`` containers deep."""
        scalars = ['"' + JSON_CHAR + '*"', NUMBER, "true", "false", "null"]
        if depth <= 0:
            return _alt(scalars)
        inner = self.any_value(depth - 1)
        ws = self.ws
        array = "\\[" + ws + "(?:" + inner + "(?:" + ws + "," + ws + inner + ")*" + ws + ")?\\]"
        return _alt(scalars + [array, self._free_object(inner)])


def _members(members: list[tuple[str, bool]], sep: str) -> str:
    """Properties in order; optional ones may be absent; commas only between present ones."""
    n = len(members)
    started = [""] * (n + 1)  # started[i]: members i.. after at least one was written
    for i in range(n - 1, -1, -1):
        m, req = members[i]
        started[i] = (sep + m if req else "(?:" + sep + m + ")?") + started[i + 1]
    fresh = ""  # members i.. with nothing written yet (built back to front)
    for i in range(n - 1, -1, -1):
        m, req = members[i]
        if req:
            fresh = m + started[i + 1]
        else:
            fresh = "(?:" + m + started[i + 1] + ("|" + fresh if fresh else "") + ")" + ("" if fresh else "?")
    return fresh
