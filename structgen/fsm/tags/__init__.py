"""Structural tags: free text with tagged regions, each under its own constraint.

``StructuralTag`` (``structgen.fsm.spec``) is the spec; this package holds its format
tree (``format``), the reading of the dicts clients send (``parse``: XGrammar's,
SGLang's and vLLM's ``{"type": "structural_tag", ...}``) and the lowering of a tree to
one regex with shared definitions (``lower``), compiled as any ``RegexSpec`` is.
"""

from __future__ import annotations

from .format import (
    AnyText,
    ConstString,
    FormatNode,
    GrammarContent,
    JsonContent,
    Or,
    RegexContent,
    Sequence,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
)
from .lower import lower_format
from .parse import parse_structural_tag

__all__ = [
    "FormatNode",
    "ConstString",
    "JsonContent",
    "RegexContent",
    "GrammarContent",
    "AnyText",
    "Sequence",
    "Or",
    "Tag",
    "TriggeredTags",
    "TagsWithSeparator",
    "lower_format",
    "parse_structural_tag",
]
