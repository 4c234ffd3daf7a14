"""The prompt of one extraction, in one of several styles (chosen by measurement, see
``benchmarks/RESULTS.md``): the schema in the system message, the text as the user's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from structgen.extraction.refs import resolve

__all__ = [
    "extraction_messages",
    "field_list",
    "schema_example",
    "prompt_text",
    "PROMPT_STYLES",
    "DEFAULT_STYLE",
]

PROMPT_STYLES = ("schema", "fields", "fields+example", "plain")
DEFAULT_STYLE = "schema"

_SYSTEM = (
    "You extract information from the user's text into JSON. Reply with one JSON object "
    "that follows this JSON Schema, using only facts stated in the text:\n{schema}"
)
_SYSTEM_FIELDS = (
    "You extract information from the user's text into JSON. Reply with one JSON object "
    "with these fields, copying each value from the text (null when the text does not "
    "say):\n{fields}"
)
_EXAMPLE_TEXT = "Example text:"


def extraction_messages(
    schema: dict, text: str, instructions: str | None = None, style: str = DEFAULT_STYLE
) -> list[dict] | str:
    """The prompt of one extraction.

    Args:
        schema: the JSON Schema.
        text: the text to extract from.
        instructions: extra guidance put before the text, or None.
        style: ``"schema"`` (the JSON Schema dumped into the system message),
            ``"fields"`` (a compact list of the fields with their types and allowed
            values), ``"fields+example"`` (that list plus a one-shot example turn whose
            text and answer are derived from the schema) or ``"plain"`` (the field list
            and the text as one completion prompt, no chat template).

    Returns:
        Chat messages (``[{"role": "system", ...}, ..., {"role": "user", ...}]``), or for
        ``"plain"`` a prompt string ending where the JSON starts.

    Raises:
        ValueError: an unknown style.
    """
    user = f"{instructions}\n\n{text}" if instructions else text
    if style == "schema":
        system = _SYSTEM.format(schema=json.dumps(schema, ensure_ascii=False))
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown extraction prompt style {style!r}; one of {PROMPT_STYLES}")
    fields = field_list(schema)
    if style == "plain":
        return (
            f"Fields to extract (null when the text does not say):\n{fields}\n\nText:\n{user}"
            "\n\nThe fields as one JSON object:\n"
        )
    msgs = [{"role": "system", "content": _SYSTEM_FIELDS.format(fields=fields)}]
    if style == "fields+example":
        example = schema_example(schema)
        msgs.append({"role": "user", "content": _example_text(example)})
        msgs.append({"role": "assistant", "content": json.dumps(example, ensure_ascii=False)})
    msgs.append({"role": "user", "content": user})
    return msgs


def prompt_text(engine: Any, prompt: list[dict] | str) -> str:
    """The prompt's text as the model read it: the chat template applied to messages.

    Args:
        engine: the engine whose tokenizer's chat template renders ``prompt``.
        prompt: chat messages (``extraction_messages``), or a string (returned as is).

    Returns:
        The text, the generation prompt included; the scoring passes continue it.
    """
    if isinstance(prompt, str):
        return prompt
    return engine.tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


def field_list(schema: dict, indent: str = "") -> str:
    """One line per property: ``- name: type`` with allowed values, bounds, format and
    ``(optional)``; nested objects and arrays of objects indented below their property.

    Args:
        schema: an object schema (``$ref`` into its own ``$defs``/``definitions`` followed).
        indent: prefix of every line (nesting).
    """
    return "\n".join(_field_lines(schema, schema, indent))


def _resolve(root: dict, sub: Any) -> dict:
    """``refs.resolve`` as an object schema: ``{}`` (no facts) for any other result."""
    sub = resolve(root, sub)
    return sub if isinstance(sub, dict) else {}


def _types(sub: dict) -> list[str]:
    t = sub.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    for key in ("anyOf", "oneOf"):
        if isinstance(sub.get(key), list):
            return [x for s in sub[key] if isinstance(s, dict) for x in _types(s)]
    return []


def _describe(root: dict, sub: dict) -> str:
    if "enum" in sub and isinstance(sub["enum"], list):
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in sub["enum"])
    if "const" in sub:
        return f"always {json.dumps(sub['const'], ensure_ascii=False)}"
    types = _types(sub)
    main = [t for t in types if t != "null"] or types or ["any"]
    words = []
    for t in main:
        if t == "string" and sub.get("format") in ("date", "date-time", "time"):
            words.append({"date": "date YYYY-MM-DD", "time": "time HH:MM:SS",
                          "date-time": "date-time YYYY-MM-DDTHH:MM:SS"}[sub["format"]])  # fmt: skip
        elif t == "string" and "format" in sub:
            words.append(f"string ({sub['format']})")
        elif t == "array":
            items = _resolve(root, sub.get("items", {}))
            inner = "objects" if "object" in _types(items) else _describe(root, items)
            words.append(f"list of {inner}")
        elif t in ("integer", "number"):
            lo, hi = sub.get("minimum"), sub.get("maximum")
            bound = f" {lo}..{hi}" if lo is not None and hi is not None else ""
            words.append(f"{t}{bound}")
        else:
            words.append(t)
    text = " or ".join(words)
    return text + (" or null" if "null" in types and len(types) > 1 else "")


def _field_lines(root: dict, sub: dict, indent: str, path: tuple[int, ...] = ()) -> list[str]:
    """The lines of ``sub``'s properties; an object already expanded on ``path`` (the ids
    of the enclosing objects: a recursive schema) is named but not expanded again.
    """
    sub = _resolve(root, sub)
    path = (*path, id(sub))
    required = set(sub.get("required", []))
    lines = []
    for name, prop in (sub.get("properties") or {}).items():
        p = _resolve(root, prop)
        opt = "" if name in required else " (optional)"
        lines.append(f"{indent}- {name}: {_describe(root, p)}{opt}")
        if "object" in _types(p) and p.get("properties"):
            if id(p) not in path:
                lines.extend(_field_lines(root, p, indent + "  ", path))
        elif "array" in _types(p):
            items = _resolve(root, p.get("items", {}))
            if "object" in _types(items) and items.get("properties") and id(items) not in path:
                lines.extend(_field_lines(root, items, indent + "  ", path))
    return lines


def schema_example(schema: dict) -> dict:
    """A small object shaped like the schema's (every property, one array item), with
    made-up values of the right types: what the one-shot example answers.
    """
    return _example(schema, schema, "value", ())


_PATTERN_TRIES = ("ABC", "AB12", "12:30", "A1", "abc", "1234", "X")


def _example(root: dict, sub: Any, name: str, path: tuple[int, ...]) -> Any:
    """An example value of ``sub``; an object already on ``path`` (the ids of the
    enclosing objects: a recursive schema) is ``{}``, and a list of such objects ``[]``.
    """
    sub = _resolve(root, sub)
    if "enum" in sub and isinstance(sub["enum"], list) and sub["enum"]:
        return next((v for v in sub["enum"] if v is not None), sub["enum"][0])
    if "const" in sub:
        return sub["const"]
    types = [t for t in _types(sub) if t != "null"] or ["string"]
    t = types[0]
    if t == "object":
        if id(sub) in path:
            return {}
        props = sub.get("properties") or {}
        return {k: _example(root, v, k, (*path, id(sub))) for k, v in props.items()}
    if t == "array":
        items = sub.get("items", {})
        if id(_resolve(root, items)) in path:
            return []  # a list of an enclosing object
        return [_example(root, items, name, path)]
    if t == "boolean":
        return True
    if t in ("integer", "number"):
        lo, hi = sub.get("minimum", 1), sub.get("maximum")
        v = max(lo, 2) if hi is None else min(max(lo, 2), hi)
        return int(v) if t == "integer" else float(v) + 0.5 if hi is None or v + 0.5 <= hi else v
    fmt = sub.get("format")
    if fmt in ("date", "date-time", "time", "email", "uri"):
        return {"date": "2024-01-31", "date-time": "2024-01-31T09:00:00Z", "time": "09:00:00Z",
                "email": "ana@example.com", "uri": "https://example.com"}[fmt]  # fmt: skip
    pattern = sub.get("pattern")
    if isinstance(pattern, str):
        for cand in _PATTERN_TRIES:
            try:
                if re.search(pattern, cand):
                    return cand
            except re.error:
                break
    value = name.replace("_", " ").title()
    lo, hi = sub.get("minLength", 0), sub.get("maxLength")
    value = value.ljust(lo, "x")
    return value[:hi].rstrip() or value[:hi] if hi is not None else value


def _example_text(example: dict) -> str:
    """The example's text: each value written after its field's name, in prose order."""
    parts = []

    def walk(obj: Any, prefix: str) -> None:
        for k, v in obj.items():
            label = f"{prefix}{k.replace('_', ' ')}"
            if isinstance(v, dict):
                walk(v, f"{label} ")
            elif isinstance(v, list):
                flat = ", ".join(
                    " ".join(str(x) for x in i.values()) if isinstance(i, dict) else str(i)
                    for i in v
                )
                parts.append(f"{label}: {flat}")
            elif isinstance(v, bool):
                parts.append(f"{label}: {'yes' if v else 'no'}")
            else:
                parts.append(f"{label}: {v}")

    walk(example, "")
    return f"{_EXAMPLE_TEXT} " + ". ".join(parts) + "."
