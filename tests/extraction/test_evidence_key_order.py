"""A field that evidence adds keeps the schema's key order.

``structgen extract`` on a corpus schema (JSONSchemaBench Snowplow ``sp_180``) printed
``"asm_group_id": 77`` after the model's other keys: the model had not written the field,
``apply_evidence`` took it from "ASM group 77" and appended it at the end. README says the
JSON a grammar accepts is written one way, "object members in the order of the schema's
``properties``", and ``ExtractionResult.raw_text`` is "the JSON of ``value``"; that JSON is
then outside the schema's grammar. ``apply.py``'s ``_schema_order`` puts it back in place.
"""

from __future__ import annotations

import json

from structgen.extraction.evidence import apply_evidence
from structgen.fsm import compile_json_schema

SCHEMA = {
    "type": "object",
    "properties": {"asm_group_id": {"type": "integer"}, "email": {"type": "string"}},
}
TEXT = (
    "Recipient anna@example.org (IP 10.0.0.7) opened newsletter nl-42, send id send-9, "
    "in categories promo and spring; ASM group 77."
)


def test_evidence_adds_the_mentioned_number():
    """The precondition: the field is added (so the test below checks a real change)."""
    new, changed = apply_evidence(SCHEMA, TEXT, {"email": "anna@example.org"})
    assert changed == ["asm_group_id"]
    assert new == {"asm_group_id": 77, "email": "anna@example.org"}


def test_an_added_field_takes_its_schema_position():
    new, _ = apply_evidence(SCHEMA, TEXT, {"email": "anna@example.org"})
    assert list(new) == ["asm_group_id", "email"]
    compact = json.dumps(new, ensure_ascii=False, separators=(",", ":"))
    assert compile_json_schema(SCHEMA).matches(compact)
