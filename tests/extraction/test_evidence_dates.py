"""The stated-order date rule (``structgen.extraction.evidence.dates.stated_order``): a
``format: date`` field holding one reading of an ambiguous numeric date takes the reading
the text states right after it ("03/02/2026 (DD/MM/YYYY)"), against a brute-force
reference over every day and month pair (``datetime`` reads the stated order); an
unstated order, an unambiguous date, a date not held and a plain string field are left."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from structgen.extraction.evidence import apply_evidence

SCHEMA = {
    "type": "object",
    "properties": {
        "collected_on": {"type": "string", "format": "date"},
        "note": {"type": "string"},
    },
    "required": ["collected_on"],
    "additionalProperties": False,
}


def _reading(a, b, year, day_first):
    try:
        return (dt.date(year, b, a) if day_first else dt.date(year, a, b)).isoformat()
    except ValueError:
        return None


@pytest.mark.parametrize(
    ("stated", "day_first"),
    [("(DD/MM/YYYY)", True), ("(dd.mm.yyyy)", True), ("[MM/DD/YY]", False), ("MM-DD-YYYY", False)],
)
def test_the_stated_order_against_every_day_and_month(stated, day_first):
    for a, b in itertools.product(range(1, 13), range(1, 32)):
        text = f"Sample collected {a:02d}/{b:02d}/2026 {stated}, fasting."
        want = _reading(a, b, 2026, day_first)
        other = _reading(a, b, 2026, not day_first)
        for held in {want, other} - {None}:
            got, _ = apply_evidence(SCHEMA, text, {"collected_on": held})
            expect = want if want is not None and held == other else held
            assert got["collected_on"] == expect, (text, held)


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("Sample collected 03/02/2026, fasting.", "2026-03-02"),  # no order stated
        ("Sample collected 03/02/2026 (DD/MM/YYYY).", "2026-02-03"),  # the stated one
        ("Sample collected 03/02/2026 (DD/MM/YYYY).", "2026-05-01"),  # not this date's
        ("Seen 2026-03-02 (DD/MM/YYYY).", "2026-03-02"),  # year first: not ambiguous
        ("Seen 03/02/2026 (DD/DD/YYYY).", "2026-03-02"),  # no order in it
    ],
)
def test_what_the_rule_leaves(text, held):
    assert apply_evidence(SCHEMA, text, {"collected_on": held})[0] == {"collected_on": held}


def test_a_plain_string_field_is_left():
    text = "Sample collected 03/02/2026 (DD/MM/YYYY)."
    value = {"collected_on": "2026-02-03", "note": "2026-03-02"}
    assert apply_evidence(SCHEMA, text, value)[0]["note"] == "2026-03-02"
