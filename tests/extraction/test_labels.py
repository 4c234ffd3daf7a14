"""Identifiers after their labels and currency-marked amounts (``structgen.extraction.labels``)
and the evidence rules that read them (``structgen.extraction.evidence``)."""

from __future__ import annotations

import random
from decimal import Decimal

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence, stem
from structgen.extraction.evidence.numbers import amount_value
from structgen.extraction.labels import (
    amount_spans,
    identifier_candidates,
    identifier_field,
    is_amount_field,
    phone_runs,
)
from structgen.fsm.numerals import numeral_spans

INVOICE = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "maxLength": 20},
        "vendor": {"type": "string"},
        "total": {"type": "number", "minimum": 0},
        "order_number": {"type": ["integer", "null"]},
    },
    "required": ["invoice_number", "vendor", "total"],
}


def test_identifier_fields_are_named_by_their_last_word():
    for key in ("invoice_number", "booking_reference", "ticket_id", "trackingNo", "ref", "code"):
        assert identifier_field(key), key
    for key in ("vendor", "number_of_guests", "phone", "idea"):
        assert not identifier_field(key), key


@pytest.mark.parametrize(
    ("text", "key", "want"),
    [
        ("INVOICE No. 2026-0415 from Bergmann.", "invoice_number", ["2026-0415"]),
        ("Brightline LLC — invoice BL-778. Services", "invoice_number", ["BL-778"]),
        ("Invoice number 00917, Highland", "invoice_number", ["00917"]),
        ("Invoice: F-3301; invoices #F-3301 too", "invoice_number", ["F-3301"]),
        ("Booking reference QX7P2M. Flight", "booking_reference", ["QX7P2M"]),
        ("Your trip: reference ZT4WQ9. Outbound", "booking_reference", ["ZT4WQ9"]),
        ("Mr. Volkov, booking code LM55RT. Flight LH 401", "booking_reference", ["LM55RT"]),
        ("Booking ref. 2NBX8Q — passenger", "booking_reference", ["2NBX8Q"]),
        ("Ticket T-4471 opened by Priya.", "ticket_id", ["T-4471"]),
        # a label followed by a word, not an identifier with a digit: nothing
        ("my ticket number from your portal is FR-1120", "ticket_id", []),
        ("Reference for this request: SUP-0932.", "booking_reference", []),
        ("Invoice ABC-XYZ attached.", "invoice_number", []),
        # ``code`` of postal_code is no label on its own; "postal" is
        ("Dress code 12 formal. Postal code: BS1 4DJ.", "postal_code", ["BS1"]),
        # two different identifiers after labels: both, in text order
        ("Invoice A-1 replaces invoice A-2.", "invoice_number", ["A-1", "A-2"]),
    ],
)
def test_identifier_candidates(text, key, want):
    assert identifier_candidates(text, key, stem) == want


_FILLERS = {"no", "nr", "number", "num", "ref", "reference", "code", "id"}


def _identifier_reference(text: str, label: str) -> list[str]:
    """Brute force over space-separated tokens: a token whose letters start with the
    label's stem, then at most one filler word (a trailing ``.`` allowed), then at most
    one of ``:``/``#``, then a token of letters, digits and ``-_/.`` holding a digit
    (trailing dots dropped)."""
    toks = text.split(" ")
    out: list[str] = []
    for i, tok in enumerate(toks):
        letters = "".join(c for c in tok if c.isalpha())
        if not letters or letters != tok or not stem(letters).startswith(label):
            continue
        j = i + 1
        if j < len(toks) and toks[j].lower().rstrip(".") in _FILLERS:
            j += 1
        if j < len(toks) and toks[j] in (":", "#"):
            j += 1
        if j >= len(toks):
            continue
        cand = toks[j].rstrip(".")
        if cand and all(c.isalnum() or c in "-_/." for c in cand) and cand[0].isalnum():
            if any(c.isdigit() for c in cand) and cand not in out:
                out.append(cand)
    return out


def test_identifier_candidates_match_a_brute_force_reading():
    rng = random.Random(23)
    vocab = ["Invoice", "invoices", "No.", "number", ":", "#", "BL-778", "2026-0415",
             "SD-55012.", "and", "from", "Acme", "x-1", "ABC", "code"]  # fmt: skip
    fired = 0
    for _ in range(600):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 10)))
        want = _identifier_reference(text, "invoic")
        assert identifier_candidates(text, "invoice_number", stem) == want, text
        fired += bool(want)
    assert fired > 100


def test_amount_fields_are_named_by_money_words():
    assert is_amount_field(["pric"]) and is_amount_field(["pric", "paid"])
    assert is_amount_field(["total"]) and not is_amount_field(["area", "m2"])


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("offered at £489,950. 162 sq m", ["489,950"]),
        ("Townhouse. 3 bedrooms. CHF 1'150'000. Agent", ["1'150'000"]),
        ("31 square metres. 1 950 000 SEK. Private", ["1 950 000"]),
        ("Cost me 1,299 kr. Heavy", ["1,299"]),
        ("€15 - €18 per hour, 1 year", ["15", "18"]),
        ("4 rooms, 12 USDC tokens, 3 EURO", []),  # codes only as whole words
    ],
)
def test_amount_spans(text, want):
    assert [text[a:b] for a, b, _ in amount_spans(text)] == want


def _marked_reference(text: str, a: int, b: int, marks: list[str]) -> bool:
    """Brute force: a mark ends where the numeral starts, or one space before; starts
    where it ends, or one space after; a word mark with no letter on its outer side."""
    before, after = text[:a], text[b:]
    for m in marks:
        for gap in ("", " "):
            if before.endswith(m + gap):
                k = len(before) - len(m + gap)
                if not m.isalpha() or k == 0 or not before[k - 1].isalpha():
                    return True
            if after.startswith(gap + m):
                k = len(gap + m)
                if not m.isalpha() or k == len(after) or not after[k].isalpha():
                    return True
    return False


def test_amount_spans_match_a_brute_force_reading():
    rng = random.Random(7)
    vocab = ["12", "1,250", "$", "€", "EUR", "CHF", "kr", "USDC", "at", "a", "3.5", "x"]
    marks = ["$", "€", "EUR", "CHF", "kr"]
    fired = 0
    for _ in range(600):
        text = "".join(rng.choice(vocab) + rng.choice(["", " ", "  "]) for _ in range(8))
        want = [(a, b) for a, b, _ in numeral_spans(text) if _marked_reference(text, a, b, marks)]
        assert [(a, b) for a, b, _ in amount_spans(text)] == want, text
        fired += len(want)
    assert fired > 300


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # the model's value is no amount, one amount fits: it is the value
        ("Invoice Q-1. Two items, 3 days. Total due £1,250.00.", 3, 1250),
        # the model's value is an amount: the amount rule leaves it; the total rule
        # (session 35, h17) takes the largest amount, the sum of the others
        ("Invoice Q-1. Items $4,500.00 and $1,250.00; due $5,750.00.", 1250, 5750),
        # two amounts and the model's is neither: no decision
        ("Invoice Q-1. Items $4,500.00 and $1,250.00.", 3, 3),
        # no currency mark: the rule does not apply
        ("Invoice Q-1 for 1250 units.", 3, 3),
    ],
)
def test_amount_rule(text, before, after):
    value = {"invoice_number": "Q-1", "vendor": "Acme", "total": before}
    new, changed = apply_evidence(INVOICE, text, value)
    assert new["total"] == after
    assert ("total" in changed) == (after != before)
    jsonschema.validate(new, INVOICE)
    # the amount rule alone: the model's value stays where it is an amount
    if any(Decimal(before) in values for _, _, values in amount_spans(text)):
        assert (
            amount_value(
                INVOICE, INVOICE["properties"]["total"], "total", before, amount_spans(text)
            )
            is None
        )


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("Brightline LLC — invoice BL-778. Services", "Brightline LLC", "BL-778"),
        ("Acme bills you on invoice SD-55012 for", "Acme bills you on", "SD-55012"),
        ("Invoice A-1 replaces invoice A-2.", "Acme", "Acme"),  # two: no decision
        ("Invoice VERYLONGIDENTIFIER-2026-0001.", "Acme", "Acme"),  # over maxLength
        ("From Acme, 2026-0415.", "Acme", "Acme"),  # no label
    ],
)
def test_identifier_rule(text, before, after):
    value = {"invoice_number": before, "vendor": "Acme", "total": 1}
    new, changed = apply_evidence(INVOICE, text, value)
    assert new["invoice_number"] == after
    assert ("invoice_number" in changed) == (after != before)


@pytest.mark.parametrize(
    ("text", "ident", "number", "want"),
    [
        # 17 is written only inside the chunk the invoice number holds
        ("Case #88-17, customer Amelia.", "88-17", 17, None),
        ("My ticket is FR-1120. Thanks.", "FR-1120", 1120, None),
        # written on its own too: it may be the field's
        ("Invoice FR-1120, order 1120.", "FR-1120", 1120, 1120),
        # the chunk is no sibling's value
        ("Case #88-17, customer Amelia.", "Q-1", 17, 17),
    ],
)
def test_a_nullable_number_inside_a_siblings_identifier_is_null(text, ident, number, want):
    value = {"invoice_number": ident, "vendor": "Acme", "total": 1, "order_number": number}
    new, _ = apply_evidence(INVOICE, text, value)
    assert new["order_number"] == want


def test_area_is_mentioned_by_square_metres():
    schema = {
        "type": "object",
        "properties": {"price": {"type": "number"}, "area_m2": {"type": "number"}},
    }
    text = "Studio, 31 square metres, 1 950 000 SEK."
    new, changed = apply_evidence(schema, text, {"price": 1950000, "area_m2": 1950000})
    assert new == {"price": 1950000, "area_m2": 31} and changed == ["area_m2"]
    assert Decimal(31) in {v for _, _, vs in numeral_spans(text) for v in vs}


EVENT = {
    "type": "object",
    "properties": {
        "date": {"type": "string", "format": "date"},
        "time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
        "rsvp_by": {"type": ["string", "null"], "format": "date"},
        "location": {"type": ["string", "null"]},
        "years_experience": {"type": ["integer", "null"]},
        "has_parking": {"type": "boolean"},
        "price_paid": {"type": ["number", "null"]},
    },
    "required": ["date", "time"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # two date fields on one date, two dates written: text order
        (
            "Gala on 2026-04-25 at 19:00. RSVP by 2026-04-10.",
            {"date": "2026-04-10", "rsvp_by": "2026-04-10"},
            {"date": "2026-04-25", "rsvp_by": "2026-04-10"},
        ),
        (
            "31/10/2026, doors 21:30. Reply before 20/10/2026.",
            {"date": "2026-10-20", "rsvp_by": "2026-10-20"},
            {"date": "2026-10-31", "rsvp_by": "2026-10-20"},
        ),
        # three dates written for two fields: no decision
        (
            "1 May 2026, 2 May 2026 or 3 May 2026; RSVP soon.",
            {"date": "2026-05-01", "rsvp_by": "2026-05-01"},
            {"date": "2026-05-01", "rsvp_by": "2026-05-01"},
        ),
        # different dates: the rule does not apply
        (
            "Gala on 2026-04-25. RSVP by 2026-04-10.",
            {"date": "2026-04-10", "rsvp_by": "2026-04-25"},
            {"date": "2026-04-10", "rsvp_by": "2026-04-25"},
        ),
    ],
)
def test_date_fields_on_one_date_take_the_texts_dates_in_order(text, before, after):
    value = {**before, "time": "19:00"}
    new, _ = apply_evidence(EVENT, text, value)
    assert {k: new.get(k) for k in after} == after
    jsonschema.validate(new, EVENT, format_checker=jsonschema.FormatChecker())


@pytest.mark.parametrize(
    ("location", "want"),
    [
        ("Saturday 7 March 2026", None),  # the date field's date
        ("11 a.m.", None),  # the time field's time
        ("Elm Street", "Elm Street"),
        ("8 March 2026", "8 March 2026"),  # a date no sibling holds
    ],
)
def test_a_nullable_string_holding_a_siblings_date_is_null(location, want):
    text = "Haircut on Saturday 7 March 2026 at 11 a.m., Elm Street."
    value = {"date": "2026-03-07", "time": "11:00", "location": location}
    assert apply_evidence(EVENT, text, value)[0]["location"] == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Rate and experience are not stated.", None),  # every mention negated
        ("No experience required (0 years).", 0),  # a numeral next to a mention decides
        ("Some experience helps; 5 years.", 5),
        ("Senior role.", 5),  # unmentioned: the model's value
    ],
)
def test_a_nullable_number_whose_name_is_only_denied_is_null(text, want):
    value = {"date": "2026-01-01", "time": "10:00", "years_experience": 5}
    assert apply_evidence(EVENT, text, value)[0]["years_experience"] == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Detached house with a double garage.", True),
        ("Flat, no garage, no carport.", False),
        ("Street parking only, no garage.", True),  # one mention reads true
    ],
)
def test_a_garage_mentions_parking(text, want):
    value = {"date": "2026-01-01", "time": "10:00", "has_parking": not want}
    assert apply_evidence(EVENT, text, value)[0]["has_parking"] is want


def test_a_nullable_amount_left_null_takes_the_one_amount():
    base = {"date": "2026-01-01", "time": "10:00"}
    text = "Earbuds bought by me for €49. Battery dies in 1 hour."
    assert apply_evidence(EVENT, text, {**base, "price_paid": None})[0]["price_paid"] == 49
    assert apply_evidence(EVENT, text, base)[0]["price_paid"] == 49  # left out
    two = "Bought for €49, now €39."
    assert apply_evidence(EVENT, two, {**base, "price_paid": None})[0]["price_paid"] is None


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Dr. Petrova, Sofia. elena@q.example, +359 2 555 0143", ["+359 2 555 0143"]),
        ("Signature · phone (04) 123 4567 · fatima@c.example", ["(04) 123 4567"]),
        ("reachable at 512-555-0176 on weekdays", ["512-555-0176"]),
        ("Visit 2026-04-08, ref 4471, 1.250,00 EUR", []),  # a date, 4 digits, a price
        ("Parcel 00370730253827161 or JD0146000062", []),  # 17 digits; letters touch
        ("Call 555-0199 or 555-0199 or (555 0100", ["555-0199"]),  # distinct; unbalanced
    ],
)
def test_phone_runs(text, want):
    assert phone_runs(text) == want


def _phone_reference(text: str) -> list[str]:
    """A left-to-right reading: a run starts at a digit, or at ``+``/``(`` before a
    digit, where no letter, digit, ``_``, ``+`` or ``(`` precedes it, and takes every
    following digit, space and ``().-/``; its trailing non-digits are cut; a letter or
    ``_`` right after its last digit drops it; kept with balanced parentheses, no line
    break, 7-15 digits and no date."""
    from structgen.fsm.dates import dates

    ok = set("0123456789 ().-/")
    out: list[str] = []
    n, i = len(text), 0
    while i < n:
        c = text[i]
        starts = c.isdigit() or c in "+(" and text[i + 1 : i + 2].isdigit()
        if not starts or i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_+("):
            i += 1
            continue
        k = i + 1
        while k < n and text[k] in ok:
            k += 1
        run = text[i:k]
        while run and not run[-1].isdigit():
            run = run[:-1]
        after = text[i + len(run) : i + len(run) + 1]
        touched = after.isalnum() or after == "_"
        digits = sum(d.isdigit() for d in run)
        if not touched and run.count("(") == run.count(")") and 7 <= digits <= 15:
            if not dates(run) and run not in out:
                out.append(run)
        i = k
    return out


def test_phone_runs_match_a_brute_force_reading():
    rng = random.Random(11)
    vocab = ["555", "0199", "+44", "(04)", "12", "-", " ", "/", "x", "2026", "tel", "."]
    fired = 0
    for _ in range(500):
        text = "".join(rng.choice(vocab) for _ in range(rng.randint(1, 9)))
        got = phone_runs(text)
        assert got == _phone_reference(text), text
        fired += len(got)
    assert fired > 50


def test_phone_rule():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "agent": {
                "type": ["object", "null"],
                "properties": {"name": {"type": "string"}, "phone": {"type": "string"}},
            },
        },
    }
    text = "Maria Gonzalez, reachable at 512-555-0176; 185 square metres."
    value = {"name": "M", "agent": {"name": "Maria Gonzalez", "phone": "185\nsquare"}}
    new, changed = apply_evidence(schema, text, value)
    assert new["agent"]["phone"] == "512-555-0176" and changed == ["agent.phone"]
    two = "Call 512-555-0176 or 512-555-0177."
    assert apply_evidence(schema, two, value)[0] == value
