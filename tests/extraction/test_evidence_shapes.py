"""The evidence pass's e-mail shape and contact rules (``structgen.extraction.evidence``):
an e-mail field holding no address takes the one address the text writes, or is null /
left out; a contact object left null takes the name written before the one phone number;
hand-checked cases (the reference is the value a reader takes from the text)."""

from __future__ import annotations

import json

import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.labels import email_addresses, email_field

CARD = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": ["string", "null"]},
        "phone": {"type": ["string", "null"]},
    },
    "required": ["name", "email"],
}
OPTIONAL = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "contact_email": {"type": "string"}},
    "required": ["name"],
}


@pytest.mark.parametrize(
    ("schema", "text", "before", "after"),
    [
        (  # the sibling's name copied into the e-mail field; the text writes one address
            CARD,
            "Carlos Diaz (carlos.diaz@verde.example) called about the order.",
            {"name": "Carlos Diaz", "email": "Carlos Diaz", "phone": None},
            {"name": "Carlos Diaz", "email": "carlos.diaz@verde.example", "phone": None},
        ),
        (  # no address in the text: null
            CARD,
            "Carlos Diaz called about the order, phone 555-0199.",
            {"name": "Carlos Diaz", "email": "Carlos Diaz", "phone": "555-0199"},
            {"name": "Carlos Diaz", "email": None, "phone": "555-0199"},
        ),
        (  # not required and not nullable: left out
            OPTIONAL,
            "Carlos Diaz called about the order.",
            {"name": "Carlos Diaz", "contact_email": "Carlos Diaz"},
            {"name": "Carlos Diaz"},
        ),
        (  # a trailing full stop is not part of the address
            OPTIONAL,
            "Write to Ana Ruiz at ana@ruiz.example.",
            {"name": "Ana Ruiz", "contact_email": "Ana Ruiz"},
            {"name": "Ana Ruiz", "contact_email": "ana@ruiz.example"},
        ),
    ],
)
def test_an_email_field_without_an_address(schema, text, before, after):
    value, changed = apply_evidence(schema, text, before)
    assert value == after
    key = next(k for k in before if "email" in k)
    assert key in changed


@pytest.mark.parametrize(
    ("schema", "text", "before"),
    [
        # an address already: stays
        (CARD, "Mail a@b.example or c@d.example.", {"name": "A", "email": "c@d.example"}),
        # two addresses and no address written as the value: the text does not say which
        (CARD, "Mail Bo at a@b.example or c@d.example.", {"name": "Al", "email": "Bo"}),
        # a field with a format is the grammar's business
        (
            {
                "type": "object",
                "properties": {"email": {"type": ["string", "null"], "format": "email"}},
                "required": ["email"],
            },
            "No address here.",
            {"email": "here"},
        ),
        # not an e-mail field: "mailbox" is no e-mail word
        (
            {"type": "object", "properties": {"mailbox": {"type": ["string", "null"]}}},
            "Mailbox 12, Riga.",
            {"mailbox": "Mailbox 12"},
        ),
    ],
)
def test_email_shape_does_not_fire(schema, text, before):
    value, changed = apply_evidence(schema, text, before)
    assert value == before and changed == []


def test_email_words_and_addresses():
    assert email_field("email") and email_field("contactEmail") and email_field("e_mail")
    assert email_field("work_mail") and not email_field("mailbox") and not email_field("name")
    text = "a.b+c@x-y.example, then d@e.org. Not: f@g, @h.example"
    assert email_addresses(text) == ["a.b+c@x-y.example", "d@e.org"]


LISTING = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "agent": {
            "type": ["object", "null"],
            "properties": {"name": {"type": "string"}, "phone": {"type": "string"}},
            "required": ["name", "phone"],
            "additionalProperties": False,
        },
    },
    "required": ["city", "agent"],
}


@pytest.mark.parametrize(
    ("text", "agent"),
    [
        (
            "House in Leeds, four bedrooms. Call Hannah Wright, 0113 496 0000, to arrange a visit.",
            {"name": "Hannah Wright", "phone": "0113 496 0000"},
        ),
        (
            "Townhouse, Basel. CHF 1'150'000. Agent: Lukas Frei, 061 555 12 34.",
            {"name": "Lukas Frei", "phone": "061 555 12 34"},
        ),
        (
            "Flat in Porto. Contact agent Rui Costa on +351 22 000 4411.",
            {"name": "Rui Costa", "phone": "+351 22 000 4411"},
        ),
        (
            "In Austin. Showings through the listing agent, Maria Gonzalez, reachable at "
            "512-555-0176 on weekdays.",
            {"name": "Maria Gonzalez", "phone": "512-555-0176"},
        ),
    ],
)
def test_a_contact_left_null_takes_the_name_before_the_one_phone_number(text, agent):
    value, changed = apply_evidence(LISTING, text, {"city": "Leeds", "agent": None})
    assert value["agent"] == agent and "agent" in changed


@pytest.mark.parametrize(
    "text",
    [
        "Studio in Uppsala. Private sale, no agent. Owner Eva Berg, 070 123 45 67.",  # denied
        "Flat in Porto. Call Rui Costa, 22 000 4411, or Ana Lima, 22 000 5522.",  # two phones
        "Flat in Porto. Call us on 22 000 4411.",  # no name before the number
        "Flat in Porto. Call Rui, 22 000 4411.",  # one word is not a full name
        "Flat in Porto.\nRui Costa, 22 000 4411.",  # a sentence's first word may be any word
        "Flat in Porto, 78 square metres, two bedrooms.",  # no phone number
    ],
)
def test_contact_rule_does_not_fire(text):
    value, changed = apply_evidence(LISTING, text, {"city": "Porto", "agent": None})
    assert value["agent"] is None and "agent" not in changed


def test_contact_rule_leaves_a_written_contact_and_other_objects_alone():
    text = "Flat in Porto. Call Rui Costa, 22 000 4411."
    written = {"city": "Porto", "agent": {"name": "Ana Lima", "phone": "22 000 4411"}}
    assert apply_evidence(LISTING, text, written)[0]["agent"] == written["agent"]
    schema = json.loads(json.dumps(LISTING))
    schema["properties"]["agent"]["properties"]["email"] = {"type": "string"}
    schema["properties"]["agent"]["required"].append("email")  # not a name-and-phone pair
    assert apply_evidence(schema, text, {"city": "Porto", "agent": None})[0]["agent"] is None
