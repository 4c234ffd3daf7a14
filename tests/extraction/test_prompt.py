"""The extraction prompt's styles: what each one tells the model, and the one-shot
example derived from a schema (valid against that schema for every dev-set schema)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from structgen.extraction.prompt import (
    DEFAULT_STYLE,
    PROMPT_STYLES,
    extraction_messages,
    field_list,
    schema_example,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = sorted((ROOT / "benchmarks" / "data" / "extraction" / "schemas").glob("*.json"))

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "level": {"enum": ["low", "high"]},
        "n": {"type": ["integer", "null"], "minimum": 0, "maximum": 9},
        "day": {"type": "string", "format": "date"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
    },
    "required": ["id", "level", "day", "items"],
    "$defs": {"item": {"type": "object", "properties": {"what": {"type": "string"}}}},
}


def test_the_field_list_names_types_values_and_nesting():
    assert field_list(SCHEMA).splitlines() == [
        "- id: string",
        '- level: one of "low", "high"',
        "- n: integer 0..9 or null (optional)",
        "- day: date YYYY-MM-DD",
        "- items: list of objects",
        "  - what: string (optional)",
    ]


@pytest.mark.parametrize("path", SCHEMAS, ids=[p.stem for p in SCHEMAS])
def test_the_example_is_valid_against_its_schema(path):
    schema = json.loads(path.read_text())
    jsonschema.validate(schema_example(schema), schema, format_checker=jsonschema.FormatChecker())


def test_each_style_carries_the_text():
    text = "Ana, ABC, high, 2026-01-02."
    for style in PROMPT_STYLES:
        prompt = extraction_messages(SCHEMA, text, instructions="Be exact.", style=style)
        if style == "plain":
            assert isinstance(prompt, str) and prompt.endswith("JSON object:\n")
            assert "Be exact.\n\n" + text in prompt and field_list(SCHEMA) in prompt
            continue
        assert prompt[0]["role"] == "system" and prompt[-1] == {
            "role": "user",
            "content": "Be exact.\n\n" + text,
        }
        if style == "schema":
            assert json.dumps(SCHEMA) in prompt[0]["content"] and len(prompt) == 2
        else:
            assert field_list(SCHEMA) in prompt[0]["content"]
        if style == "fields+example":
            assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
            assert json.loads(prompt[2]["content"]) == schema_example(SCHEMA)
    assert extraction_messages(SCHEMA, text) == extraction_messages(
        SCHEMA, text, style=DEFAULT_STYLE
    )


def test_an_unknown_style_is_refused():
    with pytest.raises(ValueError, match="unknown extraction prompt style 'json'"):
        extraction_messages(SCHEMA, "x", style="json")
