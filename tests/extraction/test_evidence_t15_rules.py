"""General evidence rules from the seventh probe set's failures (session 33, t15): a
count takes no numeral of a written date, a currency code counts beside an amount only,
an alias covers its word, and an amount stated as waived or none is 0; texts of their
own, values read off them by hand."""

from __future__ import annotations

import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.numbers import dated_numerals
from structgen.fsm.dates import date_spans
from structgen.fsm.numerals import numeral_spans
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 60}
NUM = {"type": "number", "minimum": 0}
CUR = {"enum": ["EUR", "USD", "GBP", "CAD", "NOK"]}


def _int(lo: int = 0, hi: int = 60) -> dict:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def test_a_count_takes_no_numeral_of_a_date():
    schema = _obj(renter=STR, days=_int(1))
    text = "Bike hire for Omar Haddad: a single day on 22 May 2027, helmet included."
    out, changed = apply_evidence(schema, text, {"renter": "Omar Haddad", "days": 1})
    assert out["days"] == 1 and "days" not in changed
    # the numeral written as a count still counts
    text = "Bike hire for Omar Haddad from 22 May 2027 for 3 days."
    out, _ = apply_evidence(schema, text, {"renter": "Omar Haddad", "days": 22})
    assert out["days"] == 3


@pytest.mark.parametrize(
    ("name", "skipped"),
    [("days", True), ("nights", True), ("term_months", True), ("day", False), ("birthYear", False)],
)
def test_dated_numerals_spare_date_part_fields(name, skipped):
    text = "Arrived 3 June 2027, stayed 4 nights."
    spans = numeral_spans(text)
    got = dated_numerals(name, spans, date_spans(text))
    in_date = {i for i, (a, _, _) in enumerate(spans) if a < text.index(",")}
    assert (got == frozenset(in_date)) if skipped else not got
    assert in_date and all(text[spans[i][0] : spans[i][1]] != "4" for i in in_date)


def test_a_currency_code_counts_beside_an_amount():
    schema = _obj(product=STR, price=NUM, currency=CUR)
    text = "Licence: Draftwise CAD Studio, one seat. Price USD 1,250.00 per year."
    value = {"product": "Draftwise CAD Studio", "price": 1250, "currency": "EUR"}
    out, changed = apply_evidence(schema, text, value)
    assert out["currency"] == "USD" and "currency" in changed
    # no code beside an amount: every mention counts, as before (two: the model's stays)
    text = "Draftwise CAD Studio, priced in USD."
    out, _ = apply_evidence(schema, text, dict(value, price=0))
    assert out["currency"] == "EUR"
    # a symbol before the amount is beside it
    text = "Draftwise CAD Studio costs £990 a year."
    out, _ = apply_evidence(schema, text, value)
    assert out["currency"] == "GBP"


def test_an_alias_covers_its_word():
    schema = _obj(passengers=_int(1, 20), total_price=NUM)
    text = "Ferry booking: for four people in total, fare NOK 1 320."
    out, _ = apply_evidence(schema, text, {"passengers": 1, "total_price": 4})
    assert out["passengers"] == 4


@pytest.mark.parametrize(
    ("text", "field", "want"),
    [
        ("Monthly fee £19.50. Joining fee: waived (usually £25).", "joining_fee", 0),
        ("Monthly fee £19.50. Joining fee £25, paid today.", "joining_fee", 25),
        ("Monthly fee £19.50; deposit: none required.", "deposit", 0),
        ("Monthly fee £19.50, deposit nil.", "deposit", 0),
    ],
)
def test_a_stated_zero(text, field, want):
    schema = _obj(monthly_fee=NUM, **{field: NUM})
    out, _ = apply_evidence(schema, text, {"monthly_fee": 19.5, field: 25 if want == 0 else 3})
    assert out[field] == want and out["monthly_fee"] == 19.5


def test_a_stated_zero_needs_the_bounds_and_no_null():
    text = "Monthly fee £19.50. Joining fee: waived (usually £25)."
    value = {"monthly_fee": 19.5, "joining_fee": 25}
    out, _ = apply_evidence(_obj(monthly_fee=NUM, joining_fee=NUM), text, value)
    assert out["joining_fee"] == 0
    nullable = {"type": ["number", "null"], "minimum": 0}
    out, _ = apply_evidence(_obj(monthly_fee=NUM, joining_fee=nullable), text, value)
    assert out["joining_fee"] == 25
    above = {"type": "number", "minimum": 1}
    out, _ = apply_evidence(_obj(monthly_fee=NUM, joining_fee=above), text, value)
    assert out["joining_fee"] == 25
