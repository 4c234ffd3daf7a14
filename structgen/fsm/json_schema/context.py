"""What a keyword family's lowering may use of the conversion it is part of.

The modules of this package that lower one keyword family (``scalars``, ``arrays``,
``objects``, ``dependencies``, ``string_length``) receive the running conversion as a
``ConvertContext``; ``convert.JsonSchemaConverter`` is the implementation. The protocol
names everything they use, so a family module depends on this short list, not on the
converter's internals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .refs import RefSharing

__all__ = ["ConvertContext"]


class ConvertContext(Protocol):
    """One running JSON Schema conversion, as the keyword-family lowerings see it.

    Attributes:
        ws: regex of the whitespace allowed around structural characters (``""`` when
            compact).
        allow_extra: generate extra object keys where the schema permits them.
        dependency_keywords: the dependency keywords of the document's draft
            (``dependencies`` in drafts 3-7, ``dependentRequired``/``dependentSchemas``
            in 2019-09+).
        sharing: the memo of shared definitions of this conversion (``lookup``/``store``).
    """

    ws: str
    allow_extra: bool
    dependency_keywords: frozenset[str]
    sharing: RefSharing

    def convert(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        """Regex for the subschema ``schema``.

        Args:
            schema: the subschema (dict or bool).
            pointer: its JSON pointer in the document (for errors).
            refs: the ``$ref`` expansions on the path to it.

        Returns:
            The regex, or None when no instance can be generated (a cut recursion).

        Raises:
            UnsupportedSchemaError: a keyword that cannot be enforced (strict).
            InvalidSchemaError: a malformed subschema.
            GrammarTooComplexError: the conversion ran past its time budget.
        """
        ...

    def convert_member(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        """``convert`` for the value of an object member or an array item: one container
        deeper than the schema being lowered (canonical mode orders keys per depth).
        Same arguments, returns and raises as ``convert``.
        """
        ...

    def unsupported(self, keyword: str, pointer: str, detail: str = "") -> None:
        """Report a keyword that is not enforced.

        Args:
            keyword: the keyword.
            pointer: where the document writes it.
            detail: why, appended to the message.

        Raises:
            UnsupportedSchemaError: in strict mode; otherwise a warning is recorded.
        """
        ...

    def note_no_extra(self) -> None:
        """Record (once) that objects are generated without the extra keys they allow."""
        ...

    def is_valid(self, value: Any, schema: Any) -> bool:
        """``jsonschema`` validity of ``value`` under ``schema`` (local refs resolve).

        Args:
            value: a JSON value.
            schema: a subschema of the document.

        Returns:
            True when valid; False also when the schema cannot be resolved.
        """
        ...

    def resolve(self, ref: Any, pointer: str) -> Any:
        """The subschema a ``$ref`` names.

        Args:
            ref: the ``$ref`` value.
            pointer: where the reference is written (for errors).

        Returns:
            The target subschema.

        Raises:
            InvalidSchemaError: the reference does not resolve.
            UnsupportedSchemaError: the reference leaves the document.
        """
        ...
