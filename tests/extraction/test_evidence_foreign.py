"""Numerals inside a phone number, e-mail address, identifier or date are not a number
field's value, and a date's day is not a phone number (``structgen.extraction.evidence``:
the foreign numeral and phone fragment rules; ``labels.foreign_spans``)."""

from __future__ import annotations

import random

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.labels import foreign_spans
from structgen.fsm.dates import date_spans, dates

OPT = {  # the new-user trial's schema (issue #23)
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": ["integer", "null"]},
        "phone": {"type": ["string", "null"]},
        "email": {"type": "string"},
    },
    "required": ["name", "age", "phone"],
}
CONTACT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "company": {"type": "string"},
        "phone": {"type": "string"},
    },
    "required": ["name", "age", "company", "phone"],
}
OPTIONAL_CONTACT = {  # pydantic's Optional[int] / Optional[str]
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "company": {"type": "string"},
        "phone": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["name", "company"],
}


@pytest.mark.parametrize(
    ("schema", "text", "before", "field", "want"),
    [
        # 555 is written only inside the phone number
        (OPT, "Call Bob Stone on 555 0134; he has no email.", {"age": 555}, "age", None),
        # the text writes no numeral at all: the age is invented
        (OPT, "Carl Dunn. No phone, no email, age unknown.", {"age": 18}, "age", None),
        # 134 of "0134", next to an e-mail address
        (
            OPTIONAL_CONTACT,
            "John Park (john.park@acme.com, +1 555 0134) works at Acme Corp.",
            {"age": 134},
            "age",
            None,
        ),
        # not nullable: the one numeral outside the phone number
        (
            CONTACT,
            "John Park, 41, is an engineer at Acme Corp. Call his phone +1 555 0134",
            {"age": 1},
            "age",
            41,
        ),
        # 17 inside an identifier, 5 the day of a date, 2019 its year
        (OPT, "Ticket #88-17 from Ann Lee.", {"age": 17}, "age", None),
        (OPT, "Tom Hale, tom@hale.io. Start date: June 1, 2019.", {"age": 2019}, "age", None),
        (OPT, "Ann Lee joined on June 5.", {"age": 5}, "age", None),
    ],
)
def test_a_numeral_of_a_phone_email_identifier_or_date_is_not_a_number_field(
    schema, text, before, field, want
):
    value = {"name": "X", "age": 1, "company": "Acme Corp", "phone": None, "email": "a@b.io"}
    value = {k: v for k, v in value.items() if k in schema["properties"]}
    if schema is CONTACT:
        value["phone"] = "+1 555 0134"
    value.update(before)
    got, changed = apply_evidence(schema, text, value)
    assert got[field] == want
    assert field in changed
    jsonschema.validate(got, schema)


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("Bob Stone (555 0134) is 40.", 40),  # written on its own too
        ("Bob Stone, 3 kids, 555 0134.", 25),  # not written, but the text has numerals
        ("Bob Stone is 555 years old.", 555),
    ],
)
def test_a_number_written_on_its_own_or_possibly_derived_stays(text, age):
    value = {"name": "Bob Stone", "age": age, "phone": None}
    got, _ = apply_evidence(OPT, text, value)
    assert got["age"] == age


def test_a_required_number_with_two_free_numerals_stays():
    text = "John Park, 41, room 12, at Acme Corp. Phone +1 555 0134"
    value = {"name": "John Park", "age": 1, "company": "Acme Corp", "phone": "+1 555 0134"}
    got, _ = apply_evidence(CONTACT, text, value)
    assert got["age"] == 1  # 41 or 12: the text does not say which


def test_a_field_named_for_an_identifier_may_take_an_identifiers_digits():
    schema = {
        "type": "object",
        "properties": {
            "order_number": {"type": ["integer", "null"]},
            "guests": {"type": "integer"},
        },
    }
    before = {"order_number": 4471, "guests": 2}
    assert apply_evidence(schema, "Order #4471 for table A-2.", before) == (before, [])
    # guests is no identifier field: 2 only inside "A-2", the text's one other numeral taken
    got, _ = apply_evidence(schema, "Order #4471 for 3 at table A-2.", before)
    assert got == {"order_number": 4471, "guests": 3}


def test_a_field_named_for_a_date_part_may_take_a_dates_digits():
    schema = {"type": "object", "properties": {"day": {"type": ["integer", "null"]}}}
    got, changed = apply_evidence(schema, "Starts June 1, 2019.", {"day": 1})
    assert got == {"day": 1} and changed == []


@pytest.mark.parametrize(
    ("schema", "phone", "want"),
    [
        (OPT, "1", None),  # the day of "June 1"
        (OPTIONAL_CONTACT, "2019", None),  # the year: left null
        (CONTACT, "1", "1"),  # required and not nullable: nothing better to write
    ],
)
def test_a_date_part_or_number_fragment_is_not_a_phone(schema, phone, want):
    text = "Tom Hale is a carpenter at Acme Corp. Reach him at tom@hale.io. Start: June 1, 2019."
    value = {"name": "Tom Hale", "age": None, "company": "Acme Corp", "phone": phone}
    value = {k: v for k, v in value.items() if k in schema["properties"]}
    if schema is CONTACT:
        value["age"] = 30
    got, _ = apply_evidence(schema, text, value)
    assert got.get("phone") == want


def test_a_phone_number_is_kept():
    text = "Reach Tom Hale on 020 7946 0958."
    value = {"name": "Tom Hale", "age": None, "phone": "020 7946 0958"}
    assert apply_evidence(OPT, text, value) == (value, [])


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Call Bob Stone on 555 0134; he has no email.", ["555 0134"]),
        ("John (john.park@acme.com, +1 555 0134) at Acme.", ["john.park@acme.com", "+1 555 0134"]),
        (
            "Ticket #88-17 and SUP-0932, code LM55RT; 42kg, 3 rooms.",
            ["#88-17", "SUP-0932", "LM55RT"],
        ),
        ("Start date: June 1, 2019; ends 3rd of July.", ["June 1, 2019", "3rd of July."]),
        ("On 2026-05-09, 17:30.", ["2026-05-09", "05", "09", "17", "30"]),
        ("Aged 41, two kids, 1,250 EUR.", []),
    ],
)
def test_foreign_spans(text, want):
    assert [text[a:b] for a, b in foreign_spans(text)] == want


def test_date_spans_hold_the_whole_date_dates_reads():
    months = ["January", "Feb", "March", "Sept.", "December"]
    rng = random.Random(23)
    for _ in range(200):
        day, month, year = rng.randint(1, 28), rng.choice(months), rng.choice([2019, 2024])
        form = rng.choice(
            ["{m} {d}, {y}", "{d} {m} {y}", "the {d}th of {m}, {y}", "{y}-{n:02}-{d:02}"]
        )
        date = form.format(m=month, d=day, y=year, n=rng.randint(1, 12))
        text = f"Due {date}, room 4."
        (a, b), *rest = date_spans(text)
        assert not rest, text
        # the reference: fsm.dates reads the span alone as it reads the whole text
        assert dates(text[a:b]) == dates(text) != [], text
        assert text[a:b].removeprefix("the ") == date.removeprefix("the "), text
