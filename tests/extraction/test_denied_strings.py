"""An absent nullable or optional string is not filled with unrelated words of the text
(issue #23, a new-user trial): under copy constraints every string value is a span of
the text, so a field the text denies ("she left no email") got a sibling's words
("bought one laptop stand"); the denied string and null rules of
``structgen.extraction.evidence`` clear it. The reference is the text itself: each case
states what the text says of the field. The last tests run the packaged SmolLM2 under
the default ``extract`` (copy on) and check every output with ``jsonschema``.
"""

from __future__ import annotations

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence

NULLABLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "product": {"type": "string"},
        "email": {"type": ["string", "null"]},
    },
    "required": ["name", "product", "email"],
}
OPTIONAL = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "product": {"type": "string"},
        "email": {"type": "string"},
    },
    "required": ["name", "product"],
}
SHAPED = {  # the same field with a shape its values must have
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": ["string", "null"], "pattern": "^[^@ ]+@[^@ ]+$"},
    },
    "required": ["name", "email"],
}

DENIALS = [  # (text, the span of it a copying model wrote as the email)
    ("Anna Berg bought one laptop stand; she left no email.", "bought one laptop stand"),
    ("Anna Berg bought one laptop stand; she left no email.", "bought"),
    ("Anna Berg bought one laptop stand, no email given.", "Anna Berg"),
    ("Anna Berg bought one laptop stand without email.", "one laptop stand"),
    ("Anna Berg bought one laptop stand. Email: none", "laptop"),
    ("Carlos Diaz ordered a desk lamp but cancelled; email not provided.", "cancelled"),
]


def _obj(value: str | None, **more: str) -> dict:
    return {"name": "Anna Berg", "product": "one laptop stand", "email": value, **more}


@pytest.mark.parametrize("text,span", DENIALS)
def test_a_denied_nullable_string_copied_from_the_text_is_null(text, span):
    assert span in text  # a copied value: the old rule kept it for being in the text
    got, changed = apply_evidence(NULLABLE, text, _obj(span))
    assert got["email"] is None and "email" in changed
    jsonschema.validate(got, NULLABLE)


@pytest.mark.parametrize("text,span", DENIALS)
def test_a_denied_optional_string_copied_from_the_text_is_left_out(text, span):
    got, changed = apply_evidence(OPTIONAL, text, _obj(span))
    assert "email" not in got and "email" in changed
    jsonschema.validate(got, OPTIONAL)


@pytest.mark.parametrize(
    "text",
    [
        "Anna Berg bought one laptop stand, email anna@x.org",
        "Anna Berg bought one laptop stand. Email: anna@x.org",
        "Anna Berg (anna@x.org) bought one laptop stand.",  # email never named: kept
    ],
)
def test_a_present_email_is_kept(text):
    for schema in (NULLABLE, OPTIONAL):
        got, changed = apply_evidence(schema, text, _obj("anna@x.org"))
        assert got["email"] == "anna@x.org" and "email" not in changed


def test_a_denied_field_whose_shape_the_value_has_is_kept():
    text = "Anna Berg. No email given, use anna@x.org."
    got, changed = apply_evidence(SHAPED, text, {"name": "Anna Berg", "email": "anna@x.org"})
    assert got["email"] == "anna@x.org" and changed == []


@pytest.mark.parametrize("after", ["none", "n/a", "not given", "no"])
def test_a_label_followed_by_a_denial_gives_no_value(after):
    text = f"Anna Berg bought one laptop stand. Email: {after}"
    got, changed = apply_evidence(NULLABLE, text, _obj(None))  # the label rule's case
    assert got["email"] is None and changed == []


def test_a_required_denied_string_is_kept():
    schema = {**OPTIONAL, "required": ["name", "product", "email"]}
    text = "Anna Berg bought one laptop stand; she left no email."
    got, changed = apply_evidence(schema, text, _obj("bought"))
    assert got["email"] == "bought" and changed == []


def test_an_unnamed_nullable_field_copying_a_sibling_stays_null():
    text = "Carlos Diaz ordered a desk lamp but cancelled."
    value = {"name": "Carlos Diaz", "product": "a desk lamp", "email": "Carlos Diaz"}
    got, changed = apply_evidence(NULLABLE, text, value)
    assert got["email"] is None and changed == ["email"]  # the null rule, unchanged
    got, changed = apply_evidence(OPTIONAL, text, value)
    # the null rule clears nullable fields only; the e-mail shape rule leaves out an
    # optional e-mail field holding no address when the text writes none
    assert got == {k: v for k, v in value.items() if k != "email"} and changed == ["email"]


REAL = [  # (text, the email the text gives or None)
    ("Anna Berg bought one laptop stand; she left no email.", None),
    ("Carlos Diaz ordered a desk lamp but cancelled; no email given.", None),
    ("Anna Berg bought one laptop stand, email anna@x.org", "anna@x.org"),
]
UNNAMED = ("Carlos Diaz ordered a desk lamp but cancelled.", None)  # null rule: nullable only


@pytest.mark.slow
@pytest.mark.parametrize("schema", [NULLABLE, OPTIONAL], ids=["nullable", "optional"])
def test_the_packaged_model_leaves_a_denied_email_out(smollm2_engine, schema):
    docs = REAL + [UNNAMED] if schema is NULLABLE else REAL
    got = smollm2_engine.extract(schema, [t for t, _ in docs])
    for value, (text, email) in zip(got, docs):
        jsonschema.validate(value, schema)
        assert value.get("email") == email, (text, value)
        assert value["name"] in text
