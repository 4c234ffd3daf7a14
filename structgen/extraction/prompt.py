"""The prompt of one extraction: the schema in the system message, the text as the user's."""

from __future__ import annotations

import json

__all__ = ["extraction_messages"]

_SYSTEM = (
    "You extract information from the user's text into JSON. Reply with one JSON object "
    "that follows this JSON Schema, using only facts stated in the text:\n{schema}"
)


def extraction_messages(schema: dict, text: str, instructions: str | None = None) -> list[dict]:
    """The chat messages of one extraction prompt (system: schema; user: instructions + text).

    Args:
        schema: the JSON Schema (written into the system message as JSON).
        text: the text to extract from.
        instructions: extra guidance put before the text, or None.

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``.
    """
    system = _SYSTEM.format(schema=json.dumps(schema, ensure_ascii=False))
    user = f"{instructions}\n\n{text}" if instructions else text
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
