"""The extraction prompt's styles: what each one tells the model, and the one-shot
example derived from a schema (valid against that schema for every dev-set schema)."""

from __future__ import annotations

import hashlib
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
from tests.fsm.grammar.test_lexical_split import TREE  # a recursive schema

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


# sha256 (first 16 hex digits) of every style's prompt of each dev-set schema, recorded with
# the prompt module's own $ref resolver before it used extraction.refs: a prompt that
# changes here changes what the model reads (record new digests only for a measured change)
PROMPT_DIGESTS = {
    "appointment": "b66cce1a04dc1862",
    "contact_card": "9ac5571ed502576d",
    "event_invitation": "d42c94ce716ea709",
    "flight_itinerary": "a07e50e7db69d914",
    "hotel_booking": "edf9a76f0f853511",
    "invoice": "67bbd59c42405a34",
    "job_post": "a2124f0b9d8b8f37",
    "medical_note": "26825cab4313d310",
    "product_review": "b20b006af51653f3",
    "property_listing": "c2aee57c8db1b63a",
    "recipe": "98fc5f59607891d4",
    "shipping_notice": "c4c16b92828c0a65",
    "support_ticket": "e9bfc0a975cebb35",
}


def test_dev_set_prompts_are_unchanged():
    assert sorted(PROMPT_DIGESTS) == [p.stem for p in SCHEMAS]
    for path in SCHEMAS:
        schema = json.loads(path.read_text())
        prompts = {
            s: extraction_messages(schema, "Some text.", "Be brief.", s) for s in PROMPT_STYLES
        }
        dump = json.dumps(prompts, sort_keys=True, ensure_ascii=False).encode()
        assert hashlib.sha256(dump).hexdigest()[:16] == PROMPT_DIGESTS[path.stem], path.stem


def test_a_recursive_schema_is_expanded_once_per_path():
    """References read as extraction.refs reads them ("#" is the root); an object already
    expanded on the way down is named, not expanded again (no RecursionError)."""
    assert field_list(TREE).splitlines() == ["- name: string", "- children: list of objects"]
    example = schema_example(TREE)
    assert example == {"name": "Name", "children": []}
    jsonschema.validate(example, TREE)
    to_root = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "again": {"$ref": "#"}},
        "required": ["a"],
    }
    assert field_list(to_root).splitlines() == ["- a: string", "- again: object (optional)"]
    assert schema_example(to_root) == {"a": "A", "again": {}}
