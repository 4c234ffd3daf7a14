"""``ExtractionResult``: one extraction's value with how it ended (``return_details=True``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from structgen.errors import LengthLimit

__all__ = ["ExtractionResult"]


@dataclass(frozen=True)
class ExtractionResult:
    """One text's extraction, with the details a batch job reports.

    Attributes:
        value: the extracted object: a dict, or the pydantic instance when the schema
            was a model class; always schema-valid.
        truncated: True when generation was cut (by ``max_tokens`` or the end of the
            model's context: ``cut_by``) and the grammar's token budget closed the JSON
            early (later fields may be shortened or missing where optional).
        finish_reason: the generation's finish reason (``"stop"`` or ``"length"``).
        raw_text: the text the model generated (the JSON of ``value``).
        copied_fields: the paths of the fields whose value was constrained to the
            source text (copy constraints: ``a.b``, ``tags[]``, as
            ``structgen.extraction.copy.field_path`` writes them); empty when none was.
        cut_by: where ``truncated``, the limit that cut the output (a
            ``structgen.errors.LengthLimit``: ``max_tokens`` or the end of the model's
            context, and its value); None otherwise.
    """

    value: Any
    truncated: bool
    finish_reason: str | None
    raw_text: str
    copied_fields: tuple[str, ...] = ()
    cut_by: LengthLimit | None = None
