"""General evidence rules from the fifth probe set's failures (session 33, k15): an IBAN
field takes the one IBAN the text writes (checked by ISO 13616's mod 97), and an
identifier label may be followed by "is"; values read off the texts by hand."""

from __future__ import annotations

import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.text import stem
from structgen.extraction.labels import iban_runs, identifier_candidates
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 42}
NUM = {"type": "number"}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Account IBAN GB29 NWBK 6016 1331 9268 19. Balance £20.", ["GB29 NWBK 6016 1331 9268 19"]),
        ("IBAN NO93 8601 1117 947, period: May.", ["NO93 8601 1117 947"]),
        ("Pay to DE89370400440532013000 by Friday.", ["DE89370400440532013000"]),
        # one check digit wrong: no IBAN
        ("IBAN GB28 NWBK 6016 1331 9268 19.", []),
        # a following upper-case word is no group of it
        ("IBAN DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX", ["DE89 3704 0044 0532 0130 00"]),
        ("Order AB12 3456 7890 shipped.", []),
    ],
)
def test_iban_runs(text, want):
    assert iban_runs(text) == want


def test_iban_field_takes_the_one_iban_whole():
    schema = _obj(account_holder=STR, iban=STR, closing_balance=NUM)
    text = (
        "Customer: Mr Luis Ferreira. IBAN GB29 NWBK 6016 1331 9268 19. "
        "Balance carried forward £1,331.00."
    )
    for model in ("GB29", "Luis Ferreira", "GB29 NWBK"):
        value = {"account_holder": "Luis Ferreira", "iban": model, "closing_balance": 1331}
        out, changed = apply_evidence(schema, text, value)
        assert out["iban"] == "GB29 NWBK 6016 1331 9268 19", model
        assert "iban" in changed


def test_iban_field_keeps_the_model_value_with_two_ibans():
    schema = _obj(iban=STR)
    text = "From GB29 NWBK 6016 1331 9268 19 to DE89 3704 0044 0532 0130 00."
    out, _ = apply_evidence(schema, text, {"iban": "GB29"})
    assert out["iban"] == "GB29"


def test_identifier_after_is():
    text = "That makes 37 hours. My employee number is C-3391. Thanks, Tomasz"
    assert identifier_candidates(text, "employee_id", stem) == ["C-3391"]
    out, _ = apply_evidence(_obj(employee_id=STR), text, {"employee_id": "Tomasz"})
    assert out["employee_id"] == "C-3391"


DATE = {"type": "string", "format": "date"}


@pytest.mark.parametrize(
    ("text", "held", "want"),
    [
        ("Period: 01.09.2026 - 30.09.2026. Sent 02.10.2026.", "2026-09-01", "2026-09-01"),
        ("Held in Oslo from 14 to 16 June 2027, booked 2 May 2027.", "2027-06-16", "2027-06-14"),
        # the held reading of an ambiguous start stays; the end is the reading after it
        ("Billing period 04/01/2027 to 06/30/2027 (month/day/year).", "2027-04-01", "2027-04-01"),
    ],
)
def test_date_range_fills_both_ends(text, held, want):
    from structgen.fsm.dates import dates

    schema = _obj(period=_obj(start=DATE, end=DATE))
    out, changed = apply_evidence(schema, text, {"period": {"start": held, "end": held}})
    assert out["period"]["start"] == want
    assert out["period"]["end"] == [d for d in dates(text) if d > want][0]
    assert changed


def test_date_range_needs_one_range_and_a_shared_date():
    schema = _obj(start=DATE, end=DATE)
    two = "First 1.3.2027 - 5.3.2027, then 01.04.2027 - 09.04.2027 and 02.03.2027 to 05.03.2027."
    held = {"start": "2027-03-05", "end": "2027-03-05"}
    assert apply_evidence(schema, two, held)[0] == held  # two ranges end on 5 March
    listed = "Arrival 27.12.2026, departure 31.12.2026."  # no range: the date order rule's
    held = {"start": "2026-12-31", "end": "2026-12-31"}
    assert apply_evidence(schema, listed, held)[0] == {"start": "2026-12-27", "end": "2026-12-31"}
    differ = {"start": "2027-03-01", "end": "2027-03-09"}  # not one date: left alone
    assert apply_evidence(schema, "From 01.03.2027 to 05.03.2027.", differ)[0] == differ
