"""``extract``: one schema-valid object per text, generated greedily under the schema's grammar."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from structgen.errors import ExtractionError
from structgen.extraction.copy import copy_constraint
from structgen.extraction.prompt import extraction_messages
from structgen.extraction.spans import choose_span_ends
from structgen.fsm.spec import schema_for
from structgen.runtime.sampling_params import SamplingParams

if TYPE_CHECKING:
    from structgen.runtime.engine import Engine

__all__ = ["extract", "DEFAULT_EXTRACT_MAX_TOKENS"]

DEFAULT_EXTRACT_MAX_TOKENS = 512


def extract(
    engine: "Engine",
    schema: Any,
    text: str | list[str],
    instructions: str | None = None,
    params: SamplingParams | None = None,
    errors: str = "raise",
    copy: bool | None = None,
    score_span_ends: bool = False,
) -> Any:
    """Extract one schema-valid object per text, greedily, under the schema's grammar.

    Args:
        engine: the engine to generate with.
        schema: a JSON Schema dict (or JSON string) or a pydantic model class.
        text: one text or a list of texts.
        instructions: extra guidance put before each text in the user message.
        params: sampling settings; default greedy with ``max_tokens=512``.
        errors: ``"raise"`` raises the first ExtractionError; ``"return"`` puts the
            ExtractionError in that text's place and goes on (batch jobs).
        copy: copy constraints (``structgen.extraction.copy``): True copies string and
            number values from the text (where it has one that fits), False never, None
            the default (``COPY_DEFAULT``); ``x-structgen-copy`` per field overrides it.
        score_span_ends: decide where each copied string ends by the model's score of
            the candidate spans (``structgen.extraction.spans``; one more batch of
            scoring requests) instead of greedy's stop.

    Returns:
        A dict (or a pydantic instance when ``schema`` is a model class) per text: one
        object for a single text, a list for a list.

    Raises:
        InvalidSchemaError, UnsupportedSchemaError: the schema cannot be compiled
            (unlisted properties are never generated: ``additionalProperties`` is
            treated as false where the schema is silent).
        ExtractionError: an output was cut by ``max_tokens`` or failed; carries the raw
            text and finish reason. Never returns a half object.
    """
    single = isinstance(text, str)
    texts = [text] if single else list(text)
    model_cls = schema if isinstance(schema, type) and hasattr(schema, "model_validate") else None
    sd = schema_for(schema)
    params = params or SamplingParams(max_tokens=DEFAULT_EXTRACT_MAX_TOKENS, temperature=0.0)
    plans = [copy_constraint(sd, t, copy) for t in texts]
    grammars = [plan.spec.compile(engine.vocab) for plan in plans]
    prompts = [extraction_messages(sd, t, instructions) for t in texts]
    outputs = engine.generate(prompts, params, grammars)
    raw = [out.text if out.finish_reason == "stop" else "" for out in outputs]
    if copy is not False and score_span_ends:  # where each copied string ends (spans.py)
        copied = [plan.copied_fields for plan in plans]
        raw = choose_span_ends(engine, sd, prompts, raw, texts, copied)
    results = []
    for out, text_out in zip(outputs, raw):
        try:
            results.append(_parse(out, model_cls, text_out))
        except ExtractionError as exc:
            if errors != "return":
                raise
            results.append(exc)
    return results[0] if single else results


def _parse(out: Any, model_cls: Any, text: str) -> Any:
    if out.finish_reason != "stop":
        why = out.error or f"generation ended with finish_reason={out.finish_reason!r}"
        raise ExtractionError(
            f"extraction did not complete: {why}",
            raw_text=out.text,
            finish_reason=out.finish_reason,
        )
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExtractionError(
            f"model output is not JSON: {exc}", raw_text=out.text, finish_reason="error"
        ) from exc
    if model_cls is None:
        return obj
    try:
        return model_cls.model_validate(obj)
    except Exception as exc:  # pydantic validators beyond the JSON Schema
        raise ExtractionError(
            f"output does not validate as {model_cls.__name__}: {exc}",
            raw_text=out.text,
            finish_reason="error",
        ) from exc
