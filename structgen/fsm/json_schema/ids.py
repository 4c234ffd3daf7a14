"""In-document ``$ref`` resolution: base URIs, anchors and JSON pointers, as the drafts say.

``RefIndex(root)`` walks the schema positions of the document once (the keywords that
hold subschemas in any draft) and

* tracks the base URI: ``$id`` (``id`` in draft 3/4) joined to the enclosing base, the
  root's base being its own ``$id`` or ``""`` (as ``jsonschema``'s ``referencing`` does);
  in draft 3-7 an ``$id`` next to ``$ref`` is ignored, and ``"$id": "#foo"`` is an anchor;
* registers every embedded resource (its URI) and every anchor (``$anchor``,
  ``$dynamicAnchor``: for ``$ref`` it is a plain anchor; dropping the keyword is exact
  because every ``$dynamicRef`` it could matter to stays unsupported);
* rewrites every ``$ref`` it can resolve inside the document to one canonical spelling,
  ``#`` + the JSON pointer of the target in the document (``~0``/``~1`` escapes, no
  percent-encoding): a fragment pointer is percent-decoded, may hold empty tokens
  (``#/$defs//$defs/``) and is relative to the resource its URI names;
* rewrites a ``$dynamicRef`` whose resolution does not depend on the dynamic scope to
  that ``$ref`` (see ``_rewrite``); the others stay (unsupported keyword);
* settles ``unevaluatedProperties``/``unevaluatedItems`` of a schema that has no in-place
  applicator (``_settle_unevaluated``), before any merge could mix in a cousin's
  properties; the others stay (unsupported keyword);
* in draft 3-7, drops the siblings of ``$ref`` ("all other properties in a $ref object
  MUST be ignored"; annotations such as ``definitions`` stay, so pointers into them work).

``root`` is the rewritten copy the converter works on (identifiers and anchors removed:
every reference already names its target by pointer). ``resolve`` returns the target of
a canonical reference; references the walk could not resolve raise
``InvalidSchemaError`` (a local one that names nothing) or ``UnsupportedSchemaError``
(``$ref``, pointer: another document). A reference the walk never saw (inside a
keyword that holds no subschema, reached by a pointer) is resolved against the root only
when the document has no embedded resource, where that is exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ...errors import GrammarTooComplexError, InvalidSchemaError, UnsupportedSchemaError
from ..nesting import MAX_SCHEMA_DEPTH, _abbreviated, json_depth_holding, too_deep
from .check import validator_class

__all__ = [
    "RefIndex",
    "check_schema_depth",
    "pointer_of",
    "schema_depth_and_ref",
    "schema_depth_checked",
    "schema_has_ref",
    "schema_nesting",
]

_IN_VALUE = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_IN_ARRAY = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_IN_MAP = frozenset(
    {"$defs", "definitions", "dependentSchemas", "patternProperties", "properties", "dependencies"}
)
_SUBSCHEMA_KEYS = _IN_VALUE | _IN_ARRAY | _IN_MAP
# siblings of a draft 3-7 $ref that stay (never validated; pointers may lead through them)
_KEPT_BESIDE_REF = frozenset(
    {
        "$ref",
        "definitions",
        "$defs",
        "title",
        "description",
        "$comment",
        "$schema",
        "examples",
        "default",
    }
)
_LEGACY = {
    "Draft3Validator": "id",
    "Draft4Validator": "id",
    "Draft6Validator": "$id",
    "Draft7Validator": "$id",
}
_MISSING = object()
# what RefIndex._walk registers, drops or notes in a subschema: one look decides that a
# subschema (most of them) holds none of these
_NOTED = frozenset(
    {
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$ref",
        "$dynamicRef",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
_DEFINITIONS = ("$defs", "definitions")  # entered only through $ref (check_ref_depth)


def pointer_of(tokens: tuple) -> str:
    """Canonical local reference (``#`` + JSON pointer) for a path of keys/indices."""
    return "#" + "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def _step(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token, _MISSING)
    if isinstance(node, list) and token.isdigit() and (token == "0" or token[0] != "0"):
        return node[int(token)] if int(token) < len(node) else _MISSING
    return _MISSING


def _token(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def _tokens_of(pointer: str) -> tuple:
    """The keys/indices (as strings) of a JSON pointer this module built (``_token``'s
    escapes, no percent-encoding); ``_token``'s inverse.
    """
    if not pointer:
        return ()
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def _pointer_tokens(fragment: str) -> tuple | None:
    """Tokens of a (percent-encoded) fragment JSON pointer; None when it is not a pointer."""
    fragment = unquote(fragment)
    if fragment == "":
        return ()
    if not fragment.startswith("/"):
        return None
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in fragment[1:].split("/"))


def _local_target(root: Any, ref: str) -> tuple[Any, str, bool] | None:
    """The subschema a ``#``-pointer ``$ref`` names in ``root``, its JSON pointer, and
    whether it lies in an embedded resource (a schema on the way, or the target, has its
    own ``$id``); None for any other reference (an anchor, another document) or a pointer
    to nothing.
    """
    tokens = _pointer_tokens(ref[1:]) if ref.startswith("#") else None
    if tokens is None:
        return None
    target, embedded = root, False
    for t in tokens:
        target = _step(target, t)
        if target is _MISSING:
            return None
        embedded = embedded or (isinstance(target, dict) and _has_own_id(target))
    return target, "".join(_token(t) for t in tokens), embedded


def _has_own_id(node: dict) -> bool:
    """``node`` starts an embedded resource (``$id``, or draft 3/4's ``id``, that is not an
    anchor): ``#`` references below it are relative to that resource, not to the root.
    """
    return any(
        isinstance(node.get(key), str) and not node[key].startswith("#") for key in ("$id", "id")
    )


def check_ref_depth(root: Any, limit: int = MAX_SCHEMA_DEPTH) -> None:
    """Refuse a document in which some chain of subschemas, following ``$ref``, nests more
    than ``limit`` deep, before the conversion's walks of the whole document: a ``$ref``
    chain nests without JSON nesting (``check_depth`` cannot see it), and a 100,000-long one
    must not cost the full walks of the conversion (``RefIndex``, the recursive groups)
    first (``check_schema_depth`` runs it after one linear walk, ``schema_nesting``).

    Depth counts subschemas as the converter does: the root is 1, a subschema one more than
    the schema holding it, a ``$ref`` target one more than the schema whose ``$ref`` names
    it. The walk starts at the root and enters ``$defs``/``definitions`` only through
    ``$ref`` (definitions nothing refers to are never converted); it is iterative, visits
    each subschema once (a cycle or a shared target is not walked again) and follows only
    ``#``-pointer references outside embedded resources (exactly the root's pointers; the
    others are resolved by ``RefIndex`` and bounded by the converter's own depth check).
    Each path it walks exists in the document, so it never refuses a document whose
    subschemas nest at most ``limit`` deep. A path of plain nesting past ``limit`` ends the
    walk without an error: ``check_depth`` names it in its own terms.

    Args:
        root: the schema document (dict or bool); not modified.
        limit: the deepest nesting allowed (``nesting.MAX_SCHEMA_DEPTH``).

    Raises:
        GrammarTooComplexError: naming the limit and the JSON pointer of the first
            subschema past it (``MAX_SCHEMA_DEPTH``, counting ``$ref``).
    """
    if not isinstance(root, dict):
        return
    legacy = validator_class(root)[0].__name__ in _LEGACY  # $ref overrides its siblings
    seen: set[int] = set()
    # subschema, its depth, link to its pointer (piece, parent link), $ref hops on the path,
    # inside an embedded resource
    stack: list[tuple[Any, int, Any, bool, bool]] = [(root, 1, None, False, False)]
    while stack:
        node, depth, link, via_ref, embedded = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        if depth > limit:
            if not via_ref:
                return  # plain nesting: check_depth's error
            pieces: list[str] = []
            while link is not None:
                piece, link = link
                pieces.append(piece)
            raise GrammarTooComplexError(
                f"subschemas nest more than {limit} deep (the depth limit, MAX_SCHEMA_DEPTH, "
                f"counting $ref), at {_abbreviated(''.join(reversed(pieces)))}"
            )
        seen.add(id(node))
        ref = node.get("$ref")
        for key, val in () if legacy and isinstance(ref, str) else node.items():
            if isinstance(val, dict) and key in _IN_VALUE:
                children: Any = ((_token(key), val),)
            elif isinstance(val, list) and key in _IN_ARRAY:
                children = ((f"{_token(key)}/{i}", sub) for i, sub in enumerate(val))
            elif isinstance(val, dict) and key in _IN_MAP and key not in _DEFINITIONS:
                children = ((_token(key) + _token(name), sub) for name, sub in val.items())
            else:
                continue
            for piece, sub in children:
                inner = embedded or (isinstance(sub, dict) and _has_own_id(sub))
                stack.append((sub, depth + 1, (piece, link), via_ref, inner))
        target = None if embedded or not isinstance(ref, str) else _local_target(root, ref)
        if target is not None:  # walked first: a chain is refused after `limit` steps
            sub, pointer, inner = target
            stack.append((sub, depth + 1, (pointer, None), True, inner))


def schema_nesting(schema: Any, limit: int) -> tuple[int, str, bool, int]:
    """The JSON nesting of a schema document, whether it holds a ``$ref`` and how many
    objects it holds, in one walk.

    Args:
        schema: the schema document (any decoded JSON value); not modified.
        limit: stop at the first container nested deeper than this.

    Returns:
        ``(depth, pointer, has_ref, objects)``: ``nesting.json_depth(schema, limit)``'s
        containers and JSON pointer, and whether some object anywhere in the document (in
        any keyword, at any depth) holds a string ``$ref``; True as well when the walk
        stopped at ``limit`` (not every object was seen); and the objects (dicts) the walk
        met, each occurrence counted (all of them unless the walk stopped at ``limit``):
        ``nesting.json_depth_holding``. Iterative. Raises: never.
    """
    return json_depth_holding(schema, limit, "$ref")


def _nesting_counts(schema: Any, limit: int) -> tuple[int, bool, int] | None:
    """``schema_nesting(schema, limit)``'s depth, ``has_ref`` and objects, without the
    pointer, for a document nesting at most ``limit`` containers; None for a deeper one
    (``schema_nesting`` then names where). One walk, level by level, that builds no
    pointer links (the pointer is needed only for the error). Raises: never.
    """
    level = [schema] if isinstance(schema, (dict, list)) else []
    depth = objects = 0
    has_ref = False
    while level:
        depth += 1
        if depth > limit:
            return None
        below = []
        push = below.append
        for node in level:
            if isinstance(node, dict):
                objects += 1
                if not has_ref and isinstance(node.get("$ref"), str):
                    has_ref = True
                node = node.values()
            for v in node:
                if isinstance(v, (dict, list)):
                    push(v)
        level = below
    return depth, has_ref, objects


def _checked(schema: Any) -> tuple[int, bool]:
    """``check_schema_depth``'s checks; returns the nesting and ``schema_nesting``'s
    ``has_ref``.
    """
    done = _CHECKED.get()
    if done is not None and done[0] is schema:
        return done[1], done[2]  # inside schema_depth_checked(schema): checked once already
    counts = _nesting_counts(schema, MAX_SCHEMA_DEPTH)
    if counts is not None:  # within the limit: no pointer to name
        depth, has_ref, objects = counts
        pointer = ""
    else:
        depth, pointer, has_ref, objects = schema_nesting(schema, MAX_SCHEMA_DEPTH)
    # without a $ref, check_ref_depth never refuses (every path is plain nesting); nor when
    # the document holds at most MAX_SCHEMA_DEPTH objects: the subschemas on a path it
    # walks are distinct objects of the document (each is walked once), so no path is
    # longer than the objects there are (the walk met them all: depth within the limit)
    if has_ref and (depth > MAX_SCHEMA_DEPTH or objects > MAX_SCHEMA_DEPTH):
        check_ref_depth(schema)
    if depth > MAX_SCHEMA_DEPTH:
        raise too_deep("JSON Schema", MAX_SCHEMA_DEPTH, pointer)
    return depth, has_ref


def check_schema_depth(schema: Any) -> int:
    """The depth checks a JSON Schema gets before any other walk of it: ``$ref`` chains
    (``check_ref_depth``), then the JSON nesting (``nesting.check_depth``'s check and
    error). One walk (``schema_nesting``) measures the nesting and looks for a ``$ref``
    first; ``check_ref_depth``, which can refuse only a path through a ``$ref`` longer than
    the document has objects, walks only a document that holds one and more than
    ``MAX_SCHEMA_DEPTH`` objects.

    Args:
        schema: the schema document (dict or bool).

    Returns:
        Its JSON nesting (containers), as ``check_depth`` gives it.

    Raises:
        GrammarTooComplexError: subschemas nest deeper than ``MAX_SCHEMA_DEPTH`` counting
            ``$ref``, or the document nests deeper than ``MAX_SCHEMA_DEPTH`` arrays/objects.
    """
    return _checked(schema)[0]


def schema_has_ref(schema: Any) -> bool:
    """Whether some object of the document, anywhere, holds a string ``$ref``
    (``schema_nesting``'s walk; inside ``schema_depth_checked(schema)`` its result, with no
    walk).

    Raises:
        GrammarTooComplexError: as ``check_schema_depth`` (its checks run first).
    """
    return _checked(schema)[1]


def schema_depth_and_ref(schema: Any) -> tuple[int, bool]:
    """``check_schema_depth(schema)`` and ``schema_has_ref(schema)`` from one walk (none
    inside ``schema_depth_checked(schema)``).

    Raises:
        GrammarTooComplexError: as ``check_schema_depth``.
    """
    return _checked(schema)


# (schema, its depth, has_ref) while schema_depth_checked(schema) runs: the entry points of one
# compile (cache_key, lower_recursive_schema, lower, json_schema_to_shared) each call
# check_schema_depth on the same object, and the document is not modified meanwhile.
_CHECKED: ContextVar[tuple[Any, int, bool] | None] = ContextVar(
    "schema_depth_checked", default=None
)


@contextmanager
def schema_depth_checked(schema: Any) -> Iterator[int]:
    """Run ``check_schema_depth(schema)`` once; inside the block, further calls on this same
    object (``is``), and ``schema_has_ref``, return its results without walking the
    document again.

    For one compile of an unmodified document (``compiler.compile_spec``): a caller that
    changes ``schema`` inside the block must not use it. Context-local (threads and tasks
    each see their own), and nested blocks restore the outer one on exit.

    Args:
        schema: the schema document (dict or bool).

    Yields:
        Its JSON nesting (containers), as ``check_schema_depth`` returns it.

    Raises:
        GrammarTooComplexError: as ``check_schema_depth``, on entry.
    """
    depth, has_ref = _checked(schema)
    token = _CHECKED.set((schema, depth, has_ref))
    try:
        yield depth
    finally:
        _CHECKED.reset(token)


_APPLICATORS = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependencies",
        "contains",
    }
)


def _settle_unevaluated(schema: dict) -> None:
    """In a schema with no in-place applicator (nothing else can evaluate a property or
    an item), ``unevaluatedProperties`` is ``additionalProperties`` (no effect when that is
    present) and ``unevaluatedItems`` is ``items`` after ``prefixItems`` (no effect when
    ``items`` is present; ``contains``, which evaluates items, keeps it unsupported).
    """
    if _APPLICATORS & set(schema):
        return
    if "unevaluatedProperties" in schema:
        rest = schema.pop("unevaluatedProperties")
        schema.setdefault("additionalProperties", rest)
    if "unevaluatedItems" in schema and not isinstance(schema.get("items"), list):
        rest = schema.pop("unevaluatedItems")
        schema.setdefault("items", rest)


class RefIndex:
    """The resolved references of one document (see the module docstring).

    Args:
        root: the schema document (dict or bool); not modified.

    Attributes:
        root: the rewritten copy (shares every value that holds no subschema).
        legacy: True for drafts 3-7 (``$ref`` overrides its siblings).
        draft: ``check.validator_class(root)``: the draft's validator class, and
            whether a ``$schema`` the root holds names a known draft.
        origin: ``id`` of each subschema (dict) of ``root`` -> where the document writes it
            (JSON pointer, "" for the root): the place an error about its keywords names,
            however the converter reached it (through ``$ref``, ``allOf`` or a dependency).
    """

    def __init__(self, root: Any) -> None:
        self.draft = validator_class(root)
        cls = self.draft[0]
        self._id_key = _LEGACY.get(cls.__name__, "$id")
        self.legacy = cls.__name__ in _LEGACY
        self._resources: dict[str, tuple] = {}
        self._anchors: dict[tuple[str, str], tuple] = {}
        self._table: dict[str, Any] = {}
        self._sites: list[tuple[dict, str, str, bool]] = []
        self._overridden: list[dict] = []
        self._unevaluated: list[dict] = []
        self._dynamic: dict[str, int] = {}  # $dynamicAnchor name -> how many schemas bear it
        # id of each subschema of root -> its JSON pointer in the document ("" for the root)
        self.origin: dict[int, str] = {}
        self._source = root
        self.root = self._walk(root)
        self._embedded = any(self._resources.values()) or bool(self._anchors)
        for copy, ref, base, dynamic in self._sites:
            self._rewrite(copy, ref, base, dynamic)
        for copy in self._overridden:
            for key in [k for k in copy if k not in _KEPT_BESIDE_REF]:
                del copy[key]
        for copy in self._unevaluated:
            _settle_unevaluated(copy)

    def _own_base(self, node: dict, base: str, tokens: tuple) -> str:
        """Register ``node``'s identifier and anchors; returns the base URI inside it."""
        ident = node.get(self._id_key)
        if isinstance(ident, str):
            if self.legacy and ident.startswith("#"):  # draft 3-7 location-independent id
                self._anchors.setdefault((base, ident[1:]), tokens)
            elif not (self.legacy and "$ref" in node):
                uri = urldefrag(ident)[0]
                if uri:
                    base = urljoin(base, uri)
                    self._resources.setdefault(base, tokens)
        if not self.legacy:
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    self._anchors.setdefault((base, node[key]), tokens)
        return base

    def _walk(self, root: Any) -> Any:
        out: dict = {}
        self._resources[""] = ()
        origin = self.origin
        stack = [(root, out, "root", "", "")]  # node, holder, slot, base, its JSON pointer
        while stack:
            node, holder, slot, base, ptr = stack.pop()
            if not isinstance(node, dict):
                holder[slot] = node
                continue
            if _NOTED.isdisjoint(node):  # nothing to register, drop or note (most schemas)
                holder[slot] = copy = node.copy()
                origin[id(copy)] = ptr
            else:
                copy, base = self._noted(node, holder, slot, base, ptr)
            for key, val in node.items():
                if key not in _SUBSCHEMA_KEYS:
                    continue
                at = ptr + "/" + key  # _token(key): no keyword holds "~" or "/"
                if key in _IN_VALUE and isinstance(val, (dict, bool)):
                    stack.append((val, copy, key, base, at))
                elif key in _IN_ARRAY and isinstance(val, list):
                    copy[key] = items = list(val)
                    for i, sub in enumerate(val):
                        stack.append((sub, items, i, base, at + "/" + str(i)))
                elif key in _IN_MAP and isinstance(val, dict):
                    copy[key] = members = dict(val)
                    for name, sub in val.items():
                        if isinstance(sub, (dict, bool)):
                            stack.append((sub, members, name, base, at + _token(name)))
        return out["root"]

    def _noted(self, node: dict, holder: Any, slot: Any, base: str, ptr: str) -> tuple:
        """``_walk``'s copy of a subschema holding one of the keywords it notes
        (``_NOTED``): identifiers and anchors registered (``_own_base``) and dropped, the
        ``$ref``/``$dynamicRef`` site, the overridden siblings, the unevaluated keywords
        and the ``$dynamicAnchor`` count recorded. Returns the copy (already in
        ``holder[slot]`` and ``origin``) and the base URI inside it.
        """
        legacy, drop = self.legacy, (self._id_key, "$anchor", "$dynamicAnchor")
        if drop[0] in node or drop[1] in node or drop[2] in node:
            base = self._own_base(node, base, _tokens_of(ptr))
            copy = {k: v for k, v in node.items() if k not in drop}
        else:
            copy = node.copy()
        holder[slot] = copy
        self.origin[id(copy)] = ptr  # built one token per level: linear in the depth
        ref = node.get("$ref")
        if isinstance(ref, str):
            self._sites.append((copy, ref, base, False))
            if legacy and len(copy) > 1:
                self._overridden.append(copy)
        elif not legacy and isinstance(node.get("$dynamicRef"), str):
            self._sites.append((copy, node["$dynamicRef"], base, True))
        if not legacy and ("unevaluatedProperties" in node or "unevaluatedItems" in node):
            self._unevaluated.append(copy)
        if not legacy and isinstance(node.get("$dynamicAnchor"), str):
            name = node["$dynamicAnchor"]
            self._dynamic[name] = self._dynamic.get(name, 0) + 1
        return copy, base

    def _rewrite(self, copy: dict, ref: str, base: str, dynamic: bool) -> None:
        """Point ``copy``'s reference at its target by canonical pointer (left as it is when
        the target is not in this document). A ``$dynamicRef`` becomes that ``$ref`` where
        its dynamic resolution is static: the fragment is a pointer, or names an anchor
        that no ``$dynamicAnchor`` made, or the one ``$dynamicAnchor`` of that name in the
        whole document (every dynamic scope finds that same schema).
        """
        if ref.startswith("#"):
            uri, frag = base, ref[1:]
        else:
            uri, frag = urldefrag(urljoin(base, ref))
        start = self._resources.get(uri)
        if start is None:
            return
        if not start and frag[:1] == "/" and "%" not in frag and "~" not in frag:
            # a plain pointer into the root resource (most references): its tokens split
            # as _pointer_tokens would, and already its canonical spelling (pointer_of)
            tokens, anchor, canonical = tuple(frag[1:].split("/")), None, "#" + frag
        else:
            tokens = _pointer_tokens(frag)
            anchor = unquote(frag) if tokens is None else None
            tokens = self._anchors.get((uri, anchor)) if tokens is None else start + tokens
            if tokens is None:
                return
            canonical = None
        target, source = self.root, self._source
        for t in tokens:
            target, source = _step(target, t), _step(source, t)
            if target is _MISSING:
                return
        if dynamic:
            made = isinstance(source, dict) and source.get("$dynamicAnchor") == anchor
            if made and self._dynamic.get(anchor, 0) != 1:
                return  # resolved by the dynamic scope: $dynamicRef stays unsupported
            del copy["$dynamicRef"]
        if canonical is None:
            canonical = pointer_of(tokens)
        self._table[canonical] = target
        copy["$ref"] = canonical

    def resolve(self, ref: Any, pointer: str) -> Any:
        """The subschema a reference of the rewritten document names.

        Raises:
            UnsupportedSchemaError: ``$ref`` to another document (not fetched).
            InvalidSchemaError: a local reference that names nothing.
        """
        hit = self._table.get(ref, _MISSING) if isinstance(ref, str) else _MISSING
        if hit is not _MISSING:
            return hit
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedSchemaError("$ref", pointer, f"only local references, got {ref!r}")
        tokens = _pointer_tokens(ref[1:])
        target: Any = _MISSING if tokens is None or self._embedded else self.root
        for t in tokens or ():
            if target is _MISSING:
                break
            target = _step(target, t)
        if target is _MISSING:
            raise InvalidSchemaError(f"cannot resolve $ref {ref!r}", pointer)
        return target
