"""The JSON Schema -> regex converter behind ``structgen.fsm.json_schema`` (its public face).

``JsonSchemaConverter`` holds one conversion: the root (``$ref`` targets), the options,
the shared definitions and the warnings collected. ``convert`` dispatches on the
keywords (``$ref``, ``allOf``, ``anyOf``/``oneOf``, ``not``, ``const``/``enum``, then
``type``); the types are lowered in ``scalars``, ``arrays`` and
``objects``, ``allOf``/``oneOf`` are combined in ``combine``; ``oneOf``, ``not`` and
``if``/``then``/``else`` beyond ``combine``'s shortcuts are built by intersection and
complement in ``boolean_ops`` (its canonical mode: ``canon``). What is
enforced and how is described in the package docstring.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ...errors import GrammarTooComplexError, InvalidSchemaError, UnsupportedSchemaError
from ..base import NO_EXTRA_NOTE
from ..deadline import Deadline
from ..nesting import MAX_SCHEMA_DEPTH, MAX_VALUE_DEPTH, SEGMENT, fresh_stack, json_depth
from . import boolean_ops
from .arrays import array_regex
from .combine import (
    NON_INTEGER,
    NON_INTEGER_DRAFT4,
    TYPES,
    merge_all_of,
    negated_required,
    negated_types,
    objects_one_of,
    provably_disjoint,
    static_conditional,
)
from .copy import DECLINED, pop_copy_flag
from .dependencies import DEPENDENCY_KEYWORDS
from .empty import empty_schema_error
from .ids import RefIndex
from .objects import object_regex
from .pattern import JSON_CHAR
from .refs import RefSharing
from .scalars import BOUNDS, NUMBER, integer_regex, number_regex, string_regex
from .values import values_regex
from .vocabulary import EXTENSION_PREFIX, EXTENSIONS, kind_of, unknown_warning

__all__ = [
    "JsonSchemaConverter",
    "ANY_VALUE_DEPTH",
    "CONVERT_MAX_SECONDS",
    "FLEXIBLE_WS_MAX",
]

FLEXIBLE_WS_MAX = 12
_SCALARS = ('"' + JSON_CHAR + '*"', NUMBER, "true", "false", "null")
_ANY_SCALAR = "(?:" + "|".join(_SCALARS) + ")"
ANY_VALUE_DEPTH = 10  # as deep as recursive $ref unrolls by default (max_recursion_depth)
CONVERT_MAX_SECONDS = 10.0  # CPU seconds, as the DFA's budget (see benchmarks/RESULTS.md, wp_8)
_MAX_EMPTY_RECORDED = 256  # empty subschemas kept for the error message (empty.py)
# the keywords the converter lowers; the draft's others are refused (see ``vocabulary``)
_KNOWN = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "not",
    }
)
_TYPES = TYPES


def _alt(options: list[str]) -> str:
    options = list(dict.fromkeys(options))
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


@lru_cache(maxsize=256)
def _any_value_body(ws: str, inner: str) -> str:
    """A scalar, or an array or object whose values are ``inner`` (a placeholder: the same
    few texts in every schema of one whitespace, so written once per process).
    """
    array = "\\[" + ws + "(?:" + inner + "(?:" + ws + "," + ws + inner + ")*" + ws + ")?\\]"
    pair = '"' + JSON_CHAR + '*"' + ws + ":" + ws + inner
    obj = "\\{" + ws + "(?:" + pair + "(?:" + ws + "," + ws + pair + ")*" + ws + ")?\\}"
    return _alt([*_SCALARS, array, obj])


@lru_cache(maxsize=None)  # one entry per jsonschema validator class (a handful)
def _dependency_keywords(validator: type) -> frozenset[str]:
    """The dependency keywords of ``validator``'s draft (``dependencies``: drafts 3-7;
    ``dependentRequired``/``dependentSchemas``: 2019-09 and later).
    """
    return frozenset(k for k in DEPENDENCY_KEYWORDS if k in validator.VALIDATORS)


def _check_value_depth(schema: dict, pointer: str) -> None:
    """Refuse ``const``/``enum`` values nested deeper than ``nesting.MAX_VALUE_DEPTH`` (they
    are compared and validated by recursive code: ``jsonschema``, ``json``).

    Raises:
        GrammarTooComplexError: naming the keyword, the limit and the pointer.
    """
    for key in ("const", "enum"):
        if key in schema:
            depth = json_depth(schema[key], MAX_VALUE_DEPTH + 1)[0] - (key == "enum")
            if depth > MAX_VALUE_DEPTH:
                raise GrammarTooComplexError(
                    f"{key} values nest more than {MAX_VALUE_DEPTH} arrays/objects deep (the "
                    f"depth limit for values, MAX_VALUE_DEPTH), at {pointer or '#'}/{key}"
                )


class JsonSchemaConverter:
    """One conversion: holds the root (for ``$ref``), options and collected warnings.

    ``max_seconds`` is the conversion's CPU-time budget (``max_convert_seconds``), or
    ``deadline`` one it shares with other conversions of the same compile.
    """

    def __init__(
        self,
        root: Any,
        *,
        whitespace: str | int,
        strict: bool,
        allow_extra_properties: bool,
        max_recursion_depth: int,
        max_seconds: float = CONVERT_MAX_SECONDS,
        deadline: Deadline | None = None,
    ) -> None:
        self._refs = RefIndex(root)
        self.root = self._refs.root  # every $ref rewritten to its target's pointer
        self._origin = self._refs.origin
        self.strict = strict
        self.allow_extra = allow_extra_properties
        self.max_depth = max_recursion_depth
        self.warnings: list[str] = []
        self._cut_at: str | None = None
        self._empty: list[tuple[str, Any]] = []  # subschemas found empty (empty.py)
        self.canon: boolean_ops.Canon | None = None  # canonical mode (boolean_ops)
        self.copy = None  # copy.CopyPlan: values copied from source texts (CopyJsonSchema)
        self.rules = False  # recursive $refs as grammar rules (fsm.grammar.schema_rules)
        self.any_rule = False  # untyped values as one grammar rule, any depth (schema_rules)
        self.any_rule_slot: int | None = None  # the definition slot of that rule
        self.sharing = RefSharing(self._refs.resolve)  # not self.resolve: no cycle
        self._validator, known = self._refs.draft
        self._draft = self._validator.__name__
        self._unknown: dict[str, list[str]] = {}  # ignored unknown keyword -> its pointers
        if not known:
            self.warnings.append(
                f"unknown $schema {root['$schema']!r}: read as the latest draft "
                f"({self._validator.__name__}), as jsonschema does"
            )
        # the dependency keywords of the document's draft (dependencies: 3-7; dependent*: 2019-09+)
        self.dependency_keywords = _dependency_keywords(self._validator)
        self._deadline = deadline or Deadline(max_seconds, "max_convert_seconds")
        self._calls = 0
        self._nesting = 0  # convert calls open on the path (fresh_stack every SEGMENT)
        if whitespace == "compact":
            self.ws = ""
        elif whitespace == "flexible" or (isinstance(whitespace, int) and whitespace > 0):
            n = FLEXIBLE_WS_MAX if whitespace == "flexible" else int(whitespace)
            self.ws = "[ \\t\\n\\r]{0,%d}" % n
        else:
            raise ValueError(
                f"whitespace must be 'compact', 'flexible' or a positive int, got {whitespace!r}"
            )

    def convert_root(self) -> str:
        """Regex for the root schema.

        Raises:
            UnsupportedSchemaError: the schema accepts no value, or a recursion cut
                where it cannot be dropped.
        """
        regex = self.convert(self.root, "", ("#",))  # the root is one expansion of "#"
        for key, pointers in self._unknown.items():
            self.warnings.append(unknown_warning(key, pointers, self._draft))
        if regex is None:
            if self._cut_at is None:
                raise empty_schema_error(self._empty, self.root)
            raise UnsupportedSchemaError(
                "$ref",
                self._cut_at or "",
                f"recursion deeper than max_recursion_depth={self.max_depth} cannot be cut here",
            )
        return regex

    def unsupported(self, keyword: str, pointer: str, detail: str = "") -> None:
        """Raise (strict) or record a warning for a keyword that is not enforced; in
        ``boolean_ops``' canonical mode (``strict=False``) raise ``boolean_ops.Inexact``.
        """
        if self.strict:
            raise UnsupportedSchemaError(keyword, pointer, detail)
        msg = f"ignored unsupported keyword {keyword!r} at {pointer or '#'}" + (
            f": {detail}" if detail else ""
        )
        if self.canon is not None:
            raise boolean_ops.Inexact(msg)
        if msg not in self.warnings:
            self.warnings.append(msg)

    _unsupported = unsupported

    def note_no_extra(self) -> None:
        """Record (once) that objects are generated without the extra keys they allow."""
        if NO_EXTRA_NOTE not in self.warnings:
            self.warnings.append(NO_EXTRA_NOTE)

    def keywords_of(self, schema: dict, pointer: str) -> dict:
        """``schema`` without its annotations and unknown keywords (``vocabulary.kind_of``
        for the document's draft); each unknown keyword is recorded for one warning that
        names its pointers.

        Args:
            schema: a schema object of the document (or an ``allOf`` merge of some).
            pointer: its JSON pointer, when the document does not say where it is written.

        Returns:
            A new dict with the keywords of the draft (and enforced extensions) only.

        Raises:
            UnsupportedSchemaError: (strict) an ``x-structgen-*`` key that is not a
                structgen extension.
        """
        pointer = self._origin.get(id(schema), pointer)
        out = {}
        for key, value in schema.items():
            kind = kind_of(key, self._draft)
            if kind == "keyword" or key in EXTENSIONS:
                out[key] = value
            elif kind == "extension":
                self.unsupported(
                    key,
                    pointer,
                    f"not a structgen extension keyword ({EXTENSION_PREFIX}* is reserved"
                    f" for them; known: {', '.join(sorted(EXTENSIONS)) or 'none yet'})",
                )
            elif kind == "unknown":
                seen = self._unknown.setdefault(key, [])
                if pointer not in seen:
                    seen.append(pointer)
        return out

    def is_valid(self, value: Any, schema: Any) -> bool:
        """``jsonschema`` validity of ``value`` under ``schema`` (local refs resolve in root)."""
        if isinstance(schema, dict) and isinstance(self.root, dict):
            schema = {
                **{k: self.root[k] for k in ("$defs", "definitions") if k in self.root},
                **schema,
            }
        try:
            return self._validator(schema).is_valid(value)
        except Exception:  # noqa: BLE001 - an unresolvable schema proves nothing
            return False

    def resolve(self, ref: Any, pointer: str) -> Any:
        """The subschema a ``$ref`` names (``ids.RefIndex.resolve``)."""
        return self._refs.resolve(ref, pointer)

    # ---- dispatch --------------------------------------------------------------

    def convert(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        """Regex for ``schema``, or None when no instance can be generated (cut recursion).

        The conversion recurses once per subschema level; every ``nesting.SEGMENT`` levels
        it continues on a fresh stack (``nesting.fresh_stack``), so no thread's recursion
        grows with the schema's depth (bounded by ``nesting.MAX_SCHEMA_DEPTH``, checked
        before the conversion starts, and here for nesting through ``$ref``).

        Raises:
            GrammarTooComplexError: subschemas (``$ref`` included) nest deeper than
                ``nesting.MAX_SCHEMA_DEPTH``; the time budget is spent.
        """
        self._nesting += 1
        try:
            if self._nesting > MAX_SCHEMA_DEPTH:  # a $ref chain nests without JSON nesting
                raise GrammarTooComplexError(
                    f"subschemas nest more than {MAX_SCHEMA_DEPTH} deep (the depth limit, "
                    f"MAX_SCHEMA_DEPTH, counting $ref), at {pointer or '#'}"
                )
            if self._nesting % SEGMENT == 0:
                # shared: the levels above then embed a placeholder, not this whole text
                # (every enclosing level's text would copy it: quadratic in the depth)
                text = fresh_stack(self._convert, schema, pointer, refs)
                text = text if text is None else self._share_text(text)
            else:
                text = self._convert(schema, pointer, refs)
            if text is None and len(self._empty) < _MAX_EMPTY_RECORDED:
                self._empty.append((pointer, schema))
            return text
        finally:
            self._nesting -= 1

    def convert_member(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        """``convert`` for an object member's value or an array item (one container
        deeper: in canonical mode the level whose key order applies, ``boolean_ops``).
        """
        canon = self.canon
        if canon is None:
            return self.convert(schema, pointer, refs)
        canon.level += 1
        try:
            return self.convert(schema, pointer, refs)
        finally:
            canon.level -= 1

    def _convert(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        self._calls += 1
        if self._calls & 255 == 0 and self._deadline.expired():
            raise self._deadline.error(
                f"JSON Schema conversion (at {pointer or '#'}, after {self._calls} subschemas)"
            )
        if schema is True or schema == {}:
            return self.any_value(ANY_VALUE_DEPTH)
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise InvalidSchemaError("a schema must be an object or a boolean", pointer)
        pointer = self._origin.get(id(schema), pointer)  # where the document writes it
        rest = self.keywords_of(schema, pointer)  # if/then/else: keywords from draft 7 on
        if self.copy is not None and self.canon is None:  # copy constraints (copy.py)
            text = self.copy.lower(self, rest, pointer, refs)
            if text is not DECLINED:
                return text
        pop_copy_flag(rest, pointer)
        if {"if", "then", "else"} & set(rest) and static_conditional(rest) is not None:
            return self.convert(static_conditional(rest), pointer, refs)
        if "if" in rest:  # decided per instance: (I & T) | (!I & E)
            status, text = boolean_ops.conditional(self, rest, pointer, refs)
            if status == "ok":
                return text
        for key in rest:
            if key not in _KNOWN and key not in self.dependency_keywords:
                self.unsupported(key, pointer)
        if not rest:
            return self.any_value(ANY_VALUE_DEPTH)
        if "$ref" in rest:
            if len(rest) == 1:
                return self._ref(rest["$ref"], pointer, refs)
            return self._merged([{"$ref": rest.pop("$ref")}, rest], pointer, refs)
        if "allOf" in rest:
            subs = rest.pop("allOf")  # the base schema's properties come first
            return self._merged([rest] + list(subs), pointer, refs, base=True)
        for key in ("anyOf", "oneOf"):
            if key in rest:
                return self._any_of(rest, key, pointer, refs)
        if "not" in rest:
            return self._not(rest, pointer, refs)
        if "const" in rest or "enum" in rest:
            return self._values(rest, pointer)
        return self._typed(rest, pointer, refs)

    def _typed(self, schema: dict, pointer: str, refs: tuple[str, ...]) -> str | None:
        types = schema.get("type")
        if types is None:  # every type, each constrained by its own keywords
            types = [t for t in _TYPES if t != "integer"]
        elif isinstance(types, str):
            types = [types]
        if self.canon is not None and "object" in types:
            schema = boolean_ops.close_object(self, schema, pointer)
        if "number" in types and "integer" in types:
            types = [t for t in types if t != "integer"]  # number's regex covers integer's
        options = []
        for t in types:
            if t not in _TYPES:
                raise InvalidSchemaError(f"unknown type {t!r}", pointer)
            r = self._LOWER[t](self, schema, pointer, refs)
            if r is not None:
                options.append(r)
        return _alt(options) if options else None

    _LOWER = {
        "object": lambda self, s, p, r: object_regex(self, s, p, r),
        "array": lambda self, s, p, r: array_regex(self, s, p, r),
        "string": lambda self, s, p, r: string_regex(self, s, p),
        "integer": lambda self, s, p, r: integer_regex(self, s, p),
        "number": lambda self, s, p, r: number_regex(self, s, p),
        "boolean": lambda self, s, p, r: "(?:true|false)",
        "null": lambda self, s, p, r: "null",
    }

    def _values(self, schema: dict, pointer: str) -> str | None:
        """``const``/``enum``, keeping the values the sibling keywords accept."""
        _check_value_depth(schema, pointer)
        values = [schema["const"]] if "const" in schema else list(schema["enum"])
        if "const" in schema and "enum" in schema:
            values = [v for v in values if self.is_valid(v, {"enum": schema["enum"]})]
        siblings = {k: v for k, v in schema.items() if k not in ("const", "enum")}
        if siblings:
            values = [v for v in values if self.is_valid(v, siblings)]
        types = siblings.get("type")
        types = {types} if isinstance(types, str) else set(types or ())
        regexes = values_regex(
            values, self.ws, "integer" in types and "number" not in types, self._share_text
        )
        return _alt(regexes) if regexes else None

    def _share_text(self, text: str) -> str:
        """``text`` or the placeholder of its shared definition (one per distinct text)."""
        found, placeholder = self.sharing.lookup(("text", text))
        return placeholder if found else self.sharing.store(("text", text), text)

    def _not(self, schema: dict, pointer: str, refs: tuple[str, ...]) -> str | None:
        negated = schema["not"]
        rest = {k: v for k, v in schema.items() if k != "not"}
        if "const" in rest or "enum" in rest:  # a finite set minus whatever `not` accepts
            _check_value_depth(rest, pointer)
            values = [rest["const"]] if "const" in rest else list(rest["enum"])
            rest = {k: v for k, v in rest.items() if k not in ("const", "enum")}
            rest["enum"] = [v for v in values if not self.is_valid(v, negated)]
            return self._values(rest, pointer)
        text = self._not_required(rest, negated, pointer, refs)
        if text is not False:
            return text
        left = negated_types(negated, self.resolve, rest.get("type"))  # of type/not/booleans
        if left is None or left[1] and set(rest) & {*BOUNDS, "multipleOf"}:
            status, text = boolean_ops.negation(self, rest, negated, pointer, refs)
            if status == "ok":
                return text
            self.unsupported(
                "not",
                pointer,
                "not is enforced next to const/enum, or of type/not"
                " (not integer: without numeric keywords)",
            )
            return self.convert(rest or True, pointer, refs)
        types, fraction = left
        # ``not`` with no other keyword: the types it leaves as ``true`` has them (objects
        # with any keys whatever ``allow_extra_properties`` says), as the complement does
        typed = {**rest, "type": types} if rest else {"type": types, "additionalProperties": True}
        options = [self.convert(typed, pointer, refs)] if types else []
        draft4 = self._draft in ("Draft3Validator", "Draft4Validator")
        non_integer = NON_INTEGER_DRAFT4 if draft4 else NON_INTEGER
        options = [o for o in options + [non_integer] * fraction if o is not None]
        return _alt(options) if options else None

    def _not_required(
        self, rest: dict, negated: Any, pointer: str, refs: tuple[str, ...]
    ) -> str | None | bool:
        """``rest`` and ``not: negated`` for a ``negated`` of ``required`` keys only
        (``negated_required``): the objects of ``rest`` lacking the keys of one of the name
        lists, each list written as those properties ``false``; no complement is built.
        Only with ``allow_extra_properties`` (outside a boolean operand): there, as in the
        complement, every object's undeclared keys are allowed, so the language is the
        complement path's; without it the complement path stays (it allows them, which
        the properties-false form would not). ``False`` when it does not apply (also for
        another ``negated``, or a ``rest`` that ``merge_all_of`` cannot merge with
        properties).
        """
        if not self.allow_extra or self.canon is not None:
            return False  # the complement's own reading of extra keys (all allowed) stays
        absent = negated_required(negated, self.resolve)
        if absent is None:
            return False
        try:
            merged = [
                merge_all_of(
                    [rest, {"type": "object", "properties": dict.fromkeys(names, False)}],
                    pointer,
                    self.resolve,
                    (),
                    self.keywords_of,
                )
                for names in absent
            ]
        except UnsupportedSchemaError:
            return False
        options = [self.convert(m, pointer, refs) for m in merged if m is not False]
        options = [o for o in options if o is not None]
        return _alt(options) if options else None

    def _ref(self, ref: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        target = self.resolve(ref, pointer)
        if self.rules and self.canon is None and self.sharing.is_recursive(ref):
            return self._rule(ref, target, refs)
        if self.sharing.is_cut(ref, refs, self.max_depth):
            self._cut_at = pointer
            msg = f"recursive $ref {ref} at {pointer or '#'} unrolled to depth {self.max_depth}"
            if self.canon is not None:  # a cut operand cannot be complemented exactly
                self.unsupported("$ref", pointer, msg + " inside not/oneOf/if")
            if msg not in self.warnings:
                self.warnings.append(msg)
            return None
        key = self.sharing.key(ref, refs) + (self.canon.tag_here() if self.canon else ())
        found, text = self.sharing.lookup(key)
        if found:
            return text
        text = self.convert(target, ref[1:], refs + (ref,))
        return self.sharing.store(key, text)

    def _rule(self, ref: str, target: Any, refs: tuple[str, ...]) -> str:
        """A recursive ``$ref`` as one grammar rule (``rules`` mode): converted once,
        whatever the depth, its placeholder reserved first so the recursion refers to it.

        Raises:
            UnsupportedSchemaError: the target accepts no value.
        """
        found, text = self.sharing.lookup(("rule", ref))
        if found:
            return text
        index, placeholder = self.sharing.reserve(("rule", ref))
        text = self.convert(target, ref[1:], refs + (ref,))
        if text is None:
            raise UnsupportedSchemaError("$ref", ref[1:], f"recursive $ref {ref} accepts no value")
        self.sharing.define(index, text)
        return placeholder

    def _merged(
        self, subs: list[Any], pointer: str, refs: tuple[str, ...], base: bool = False
    ) -> str | None:
        """``allOf`` (and ``$ref`` with siblings): convert the merged schema (``base``:
        ``subs[0]`` is the schema's own keywords, the others its ``allOf``).
        """
        # the references merged in are on the path too: recursion through allOf is cut
        # like recursion through $ref (Handwritten mod309 recursed until a RecursionError)
        inlined = tuple(
            s["$ref"] for s in subs if isinstance(s, dict) and isinstance(s.get("$ref"), str)
        )
        for ref in inlined:
            if self.sharing.is_cut(ref, refs, self.max_depth):
                return self._ref(ref, pointer, refs)  # records the cut, returns None
        seen = tuple(r for r in set(refs) if self.sharing.is_cut(r, refs, self.max_depth))
        merged = merge_all_of(subs, pointer, self.resolve, seen, self.keywords_of, base)
        return self.convert(merged, pointer, refs + inlined)

    def _any_of(self, schema: dict, key: str, pointer: str, refs) -> str | None:
        siblings = {k: v for k, v in schema.items() if k != key}
        branches = []
        for i, sub in enumerate(schema[key]):
            ptr = f"{pointer}/{key}/{i}"
            if siblings:
                sub = merge_all_of([siblings, sub], ptr, self.resolve, (), self.keywords_of)
            branches.append((ptr, sub))
        if key == "oneOf":
            overlap = self._overlap(branches)
            as_objects = None if overlap is None else self._objects_one_of(branches)
            if as_objects is not None:  # untyped object branches, disjoint as objects
                branches = [(ptr, sub) for (ptr, _), sub in zip(branches, as_objects)]
            elif overlap is not None:
                status, text = boolean_ops.one_of(self, branches, pointer, refs)
                if status == "ok":
                    return text
                self.unsupported("oneOf", pointer, "branches %d and %d may both match" % overlap)
        options = [self.convert(s, ptr, refs) for ptr, s in branches]
        options = [o for o in options if o is not None]
        return _alt(options) if options else None

    def _resolved(self, branches: list[tuple[str, Any]]) -> list[Any]:
        resolved = []
        for ptr, sub in branches:
            if isinstance(sub, dict) and "$ref" in sub or isinstance(sub, dict) and "allOf" in sub:
                sub = merge_all_of([sub], ptr, self.resolve, (), self.keywords_of)
            resolved.append(sub)
        return resolved

    def _objects_one_of(self, branches: list[tuple[str, Any]]) -> list[Any] | None:
        """``combine.objects_one_of`` over the branches' keywords (references resolved)."""
        resolved = [
            self.keywords_of(s, p) if isinstance(s, dict) else s
            for (p, _), s in zip(branches, self._resolved(branches))
        ]
        return objects_one_of(resolved, self.is_valid)

    def _overlap(self, branches: list[tuple[str, Any]]) -> tuple[int, int] | None:
        """Two branches that are not provably disjoint, None when every pair is."""
        resolved = self._resolved(branches)
        for i in range(len(resolved)):
            for j in range(i + 1, len(resolved)):
                if not provably_disjoint(resolved[i], resolved[j], self.is_valid):
                    return i, j
        return None

    def any_value(self, depth: int) -> str:
        """Any JSON value nested at most ``depth`` containers deep (one shared definition
        per depth: schemas use it many times, and its text is long; the same in every schema
        of the same whitespace, so stored as reusable: ``regex.reused``).
        """
        if self.canon is not None:  # canonical mode: U, at least as deep as any U around
            return boolean_ops.universe_here(self)
        if self.any_rule:
            return self._any_value_rule()
        found, text = self.sharing.lookup(("any", depth))
        if found:
            return text
        return self.sharing.store(("any", depth), self._any_value_text(depth), reusable=True)

    def _any_value_rule(self) -> str:
        """Any JSON value at any depth, as one grammar rule (``any_rule``): the rule's
        arrays and objects hold the rule itself (``RefSharing.reserve``).
        """
        found, text = self.sharing.lookup(("any-rule",))
        if found:
            return text
        index, placeholder = self.sharing.reserve(("any-rule",))
        self.any_rule_slot = index
        self.sharing.define(index, self._any_value_body(placeholder))
        return placeholder

    def _any_value_text(self, depth: int) -> str:
        if depth <= 0:
            return _ANY_SCALAR
        return self._any_value_body(self.any_value(depth - 1))

    def _any_value_body(self, inner: str) -> str:
        """A scalar, or an array or object whose values are ``inner``."""
        return _any_value_body(self.ws, inner)
