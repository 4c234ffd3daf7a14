"""Per document: which fields of an extraction are copied from its text.

``copy_constraint(schema, text, copy)`` gives the spec one document is generated under
and the fields it copy-constrains (``structgen.fsm.json_schema.copy``): with
``copy=False`` the schema's own grammar; otherwise its string and number values are
spans and numerals of the text where, for this text, that leaves a value (enum, boolean
and const fields never are). ``x-structgen-copy`` on a field overrides the call's
choice for it and below it. ``copy=None`` is the measured default, ``COPY_DEFAULT``
(benchmarks/RESULTS.md, "Copy constraints").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from structgen.fsm.json_schema.copy import CopyJsonSchema
from structgen.fsm.spec import JsonSchema

__all__ = ["COPY_DEFAULT", "CopyConstraint", "copy_constraint", "field_path"]

COPY_DEFAULT = True  # copy strings and numbers unless told otherwise (measured)


@dataclass(frozen=True)
class CopyConstraint:
    """The constraint of one document.

    Attributes:
        spec: the spec to generate under (``CopyJsonSchema`` or ``JsonSchema``).
        copied_fields: the field paths copy-constrained for this text (``field_path``),
            in schema order; empty without copy.
    """

    spec: JsonSchema
    copied_fields: tuple[str, ...]


def field_path(pointer: str) -> str:
    """A schema pointer as the instance path it constrains: ``/properties/a/properties/b``
    is ``a.b``, ``/properties/tags/items`` is ``tags[]``, ``anyOf``/``oneOf`` branches are
    skipped; other pointers (under ``$defs``, say) are kept as they are.
    """
    out = []
    for m in re.finditer(r"/properties/([^/]+)|/items|/(?:anyOf|oneOf)/\d+|(/[^/]+)", pointer):
        if m.group(0).startswith(("/anyOf/", "/oneOf/")):
            continue  # a branch: the same instance
        if m.group(1) is not None:
            out.append("." + m.group(1).replace("~1", "/").replace("~0", "~"))
        elif m.group(2) is None:
            out.append("[]")
        else:
            return pointer
    return "".join(out).lstrip(".")


def copy_constraint(schema: Any, text: str, copy: bool | None = None) -> CopyConstraint:
    """The spec and copied fields of one document.

    Args:
        schema: the JSON Schema (a dict or bool; see ``schema_for``).
        text: the document.
        copy: True: copy eligible values; False: no copy constraint; None: ``COPY_DEFAULT``.

    Returns:
        The ``CopyConstraint``.

    Raises:
        InvalidSchemaError, UnsupportedSchemaError: the schema does not convert (as
            ``JsonSchema``), or an ``x-structgen-copy`` is not a boolean.
    """
    if copy is False:
        return CopyConstraint(JsonSchema(schema, allow_extra_properties=False), ())
    spec = CopyJsonSchema(
        schema,
        allow_extra_properties=False,
        copy_from=(text,),
        copy_default=COPY_DEFAULT if copy is None else copy,
    )
    return CopyConstraint(spec, tuple(field_path(p) for p in spec.copied_fields()))
