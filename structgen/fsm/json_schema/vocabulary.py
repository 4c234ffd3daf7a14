"""The keywords of each JSON Schema draft, and what the converter does with the rest.

A keyword of a schema object is one of four kinds (``kind_of``):

* an **annotation** (``ANNOTATIONS``): a keyword of some draft, or of OpenAPI, that
  asserts nothing about the instance (``title``, ``description``, ``default``,
  ``examples``, ``$comment``, ``deprecated``, ``readOnly``, ``writeOnly``,
  ``contentMediaType``/``contentEncoding``/``contentSchema``, identifiers and anchors,
  ``$defs``/``definitions``, OpenAPI's ``discriminator``): dropped silently, in every draft;
* a **keyword** of the document's draft (``DRAFT_KEYWORDS``: the draft's metaschema, with
  the 2019-09/2020-12 vocabularies merged; ``$schema`` picks the draft, the latest when
  absent): enforced by the converter, or refused like any assertion it cannot enforce
  (``strict=True``: ``UnsupportedSchemaError``);
* a structgen **extension** (``x-structgen-*``): enforced when it is one of
  ``EXTENSIONS``, else refused like an assertion (a typo in structgen's own keyword must
  not be dropped silently);
* **unknown**: any other key (``x-*`` vendor keys, keywords of another draft,
  misspellings). The drafts say an implementation ignores it (2019-09/2020-12: an unknown
  keyword is an annotation; drafts 4-7 likewise), and ``jsonschema`` does, so the converter
  drops it even with ``strict=True`` and names it in the warnings (``unknown_warning``),
  with the near miss of a real keyword when there is one (``descripton`` ->
  ``description``).
"""

from __future__ import annotations

import difflib

__all__ = [
    "ANNOTATIONS",
    "DRAFT_KEYWORDS",
    "EXTENSIONS",
    "EXTENSION_PREFIX",
    "kind_of",
    "suggestion",
    "unknown_warning",
]

EXTENSION_PREFIX = "x-structgen-"
EXTENSIONS: frozenset[str] = frozenset({"x-structgen-copy"})  # see json_schema.copy

ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "$schema",
        "$id",
        "id",  # draft 3/4's $id; elsewhere an unknown keyword (kind_of decides per draft)
        "$anchor",
        "$dynamicAnchor",
        "$recursiveAnchor",
        "$vocabulary",
        "$defs",
        "definitions",
        # OpenAPI 3 annotations (no assertion in JSON Schema; pydantic writes discriminator)
        "discriminator",
        "example",
        "externalDocs",
        "xml",
    }
)

_CORE_2019 = {"$schema", "$id", "$anchor", "$ref", "$recursiveRef", "$recursiveAnchor"}
_CORE_2020 = {"$schema", "$id", "$anchor", "$ref", "$dynamicRef", "$dynamicAnchor"}
_META_DATA = {"title", "description", "default", "deprecated", "examples", "readOnly"}
_META_DATA |= {"writeOnly"}
_CONTENT = {"contentEncoding", "contentMediaType", "contentSchema"}
_VALIDATION_2019 = {
    "type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
    "required", "dependentRequired",
}  # fmt: skip
_APPLICATOR = {
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "contains",
    "items",
}  # fmt: skip
_DRAFT4 = {
    "id", "$schema", "$ref", "title", "description", "default", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "additionalItems", "items", "maxItems", "minItems", "uniqueItems", "maxProperties",
    "minProperties", "required", "additionalProperties", "definitions", "properties",
    "patternProperties", "dependencies", "enum", "type", "format", "allOf", "anyOf",
    "oneOf", "not",
}  # fmt: skip
_DRAFT6 = (_DRAFT4 - {"id"}) | {"$id", "examples", "const", "contains", "propertyNames"}
_DRAFT7 = _DRAFT6 | {"$comment", "if", "then", "else", "readOnly", "contentMediaType"}
_DRAFT7 |= {"contentEncoding"}
_DRAFT3 = {
    "id", "$schema", "$ref", "title", "description", "default", "type", "properties",
    "patternProperties", "additionalProperties", "items", "additionalItems", "required",
    "dependencies", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minItems", "maxItems", "uniqueItems", "pattern", "minLength", "maxLength", "enum",
    "format", "divisibleBy", "disallow", "extends",
}  # fmt: skip
_COMMON_2019 = _META_DATA | _CONTENT | _VALIDATION_2019 | _APPLICATOR | {"format"}
_COMMON_2019 |= {"$comment", "$defs", "$vocabulary", "unevaluatedItems"}
_COMMON_2019 |= {"unevaluatedProperties"}
DRAFT_KEYWORDS: dict[str, frozenset[str]] = {
    "Draft3Validator": frozenset(_DRAFT3),
    "Draft4Validator": frozenset(_DRAFT4),
    "Draft6Validator": frozenset(_DRAFT6),
    "Draft7Validator": frozenset(_DRAFT7),
    "Draft201909Validator": frozenset(_COMMON_2019 | _CORE_2019 | {"additionalItems"}),
    "Draft202012Validator": frozenset(_COMMON_2019 | _CORE_2020 | {"prefixItems"}),
}
"""Keywords of each draft (by ``jsonschema`` validator class name), as its metaschema lists
them (2019-09/2020-12: the union of the core, applicator, unevaluated, validation,
meta-data, format and content vocabularies; not the deprecated compatibility entries
``definitions``/``dependencies`` of their top-level metaschemas, which ``jsonschema``
does not assert there)."""
_DRAFT_NAMES = {
    "Draft3Validator": "draft 3",
    "Draft4Validator": "draft 4",
    "Draft6Validator": "draft 6",
    "Draft7Validator": "draft 7",
    "Draft201909Validator": "draft 2019-09",
    "Draft202012Validator": "draft 2020-12",
}
_ALL_KEYWORDS = frozenset().union(*DRAFT_KEYWORDS.values())


def kind_of(key: str, draft: str) -> str:
    """What the converter does with ``key`` in a schema object of a ``draft`` document.

    Args:
        key: a key of a schema object.
        draft: the ``jsonschema`` validator class name of the document's draft
            (``"Draft202012Validator"``); an unknown name reads as 2020-12.

    Returns:
        ``"annotation"`` (drop silently), ``"keyword"`` (enforce or refuse),
        ``"extension"`` (an ``x-structgen-*`` key: enforce when in ``EXTENSIONS``, else
        refuse) or ``"unknown"`` (drop, with a warning).
    """
    keywords = DRAFT_KEYWORDS.get(draft, DRAFT_KEYWORDS["Draft202012Validator"])
    if key.startswith(EXTENSION_PREFIX):
        return "extension"
    if key in keywords:
        return "annotation" if key in ANNOTATIONS else "keyword"
    if key in ANNOTATIONS and key != "id":  # "id" outside drafts 3/4: a property-like typo
        return "annotation"
    return "unknown"


def suggestion(key: str, draft: str) -> str | None:
    """The keyword of ``draft`` (or an annotation) that ``key`` most likely misspells, or
    None when none is close (``difflib`` ratio >= 0.8, case-insensitive; ``x-*`` keys
    are vendor extensions and get none).
    """
    if key.startswith("x-"):
        return None
    keywords = DRAFT_KEYWORDS.get(draft, DRAFT_KEYWORDS["Draft202012Validator"])
    candidates = {k.lower(): k for k in sorted(keywords | ANNOTATIONS) if k != "id"}
    hit = difflib.get_close_matches(key.lower(), list(candidates), n=1, cutoff=0.8)
    return candidates[hit[0]] if hit and candidates[hit[0]] != key else None


OPENAPI_HINTS = {
    "nullable": "OpenAPI 3.0's; JSON Schema allows null by listing it: "
    '"type": [<type>, "null"] or "anyOf": [..., {"type": "null"}]',
    "x-nullable": "Swagger 2.0's; JSON Schema allows null by listing it: "
    '"type": [<type>, "null"] or "anyOf": [..., {"type": "null"}]',
}
"""Assertions OpenAPI and Swagger documents carry that no JSON Schema draft defines (OpenAPI
3.0 section 4.7.24 ``nullable``, Swagger 2.0's ``x-nullable``), ignored like any unknown
keyword, with what the warning tells the user to write instead (OpenAPI's annotations are
dropped silently: ``ANNOTATIONS``)."""


def unknown_warning(key: str, pointers: list[str], draft: str) -> str:
    """The warning naming an unknown keyword that was ignored, where it was (JSON
    pointers, the first three and a count of the rest) and, for a near miss, the keyword
    it probably means, or the drafts it belongs to.

    Args:
        key: the ignored key.
        pointers: the JSON pointers of the schema objects holding it ("" = the root).
        draft: the ``jsonschema`` validator class name of the document's draft.

    Returns:
        One line, e.g. ``ignored unknown keyword 'descripton' at /properties/a (not in
        the draft 2020-12 vocabulary; did you mean 'description'?)``.
    """
    where = ", ".join(p or "#" for p in pointers[:3])
    if len(pointers) > 3:
        where += f" and {len(pointers) - 3} more"
    name = _DRAFT_NAMES.get(draft, "draft 2020-12")
    note = f"not in the {name} vocabulary"
    drafts = [n[6:] for d, n in _DRAFT_NAMES.items() if key in DRAFT_KEYWORDS[d]]
    guess = suggestion(key, draft)
    if drafts:
        note += f"; a keyword of draft {', '.join(drafts)} ($schema picks the draft)"
    elif key in OPENAPI_HINTS:
        note += f"; {OPENAPI_HINTS[key]}"
    elif guess is not None:
        note += f"; did you mean {guess!r}?"
    return f"ignored unknown keyword {key!r} at {where} ({note})"
