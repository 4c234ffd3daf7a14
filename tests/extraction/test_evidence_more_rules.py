"""Span ends, labels, ranges in nested objects, "no." as number, role brackets, denied
amounts, identifiers' full stops and names joined by "&" (``structgen.extraction.evidence``),
each against values read off the text by hand."""

from __future__ import annotations

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.names import (
    capital_run,
    date_tail,
    label_word_cut,
    possessive_cut,
    sentence_cut,
)
from structgen.extraction.evidence.roles import swapped_roles
from structgen.extraction.evidence.strings import label_value, span_end
from structgen.extraction.evidence.text import TextWords
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 80}
NSTR = {"type": ["string", "null"], "maxLength": 80}
NUM = {"type": "number", "minimum": 0}


@pytest.mark.parametrize(
    ("text", "value", "want"),
    [
        ("App version 5.0.0-beta.3 on Android.", "5.0.0-beta", "5.0.0-beta.3"),
        ("Ticket SUP-0932 is open.", "SUP", "SUP-0932"),
        ("Write to a@b.com today.", "a@b", "a@b.com"),
        # an occurrence that ends its chunk: the value may be right
        ("Version 5.0 and then 5.0.1 shipped.", "5.0", None),
        # a sentence's full stop is no part of a chunk
        ("It crashes with an empty table. Reported today.", "empty table", None),
        ("Lond is not London.", "Lond", None),
    ],
)
def test_a_value_written_only_inside_a_chunk_ends_where_the_chunk_ends(text, value, want):
    schema = _obj(v=STR)
    assert span_end(schema, schema["properties"]["v"], value, text) == want


@pytest.mark.parametrize(
    ("text", "value", "want"),
    [
        (
            "Issue #4182: Crash when exporting a PDF with an empty table. Reported by Zoë.",
            "Crash when exporting a PDF with an empty table.",
            "Crash when exporting a PDF with an empty table",
        ),
        ("It ends the text.", "ends the text.", "ends the text"),
        # an abbreviation's full stop stays; so does one the text goes on after in lowercase
        ("Exporter: Kyoto Ceramics Co., Ltd. (Japan).", "Kyoto Ceramics Co., Ltd.", None),
        ("We sell beds. and more", "We sell beds.", None),
    ],
)
def test_a_value_ending_with_its_sentences_full_stop_loses_it(text, value, want):
    schema = _obj(v=STR)
    assert sentence_cut(schema, schema["properties"]["v"], value, text) == want


PAYSLIP = _obj(employee=STR, employee_id=STR, employer=STR)
REST = {"employee_id": "00417", "employer": "X"}


@pytest.mark.parametrize(
    ("value", "want"),
    [
        # a heading, or a sibling's value, where the label names the field: the label's value
        ({"employee": "LØNNSSLIPP / PAYSLIP", **REST}, "Søren Haugen"),
        ({"employee": "Nordlys Logistikk AS", **REST}, "Søren Haugen"),
        # overlapping the labelled value: the span-end rules decide, not this one
        ({"employee": "Søren", **REST}, None),
        ({"employee": "Søren Haugen, employee", **REST}, None),
    ],
)  # fmt: skip
def test_a_labelled_field_holding_an_unrelated_string_takes_the_labels_value(value, want):
    text = "LØNNSSLIPP / PAYSLIP. Nordlys Logistikk AS. Employee: Søren Haugen, employee no. 00417."
    assert label_value(PAYSLIP, PAYSLIP, "employee", value, text) == want
    assert label_value(PAYSLIP, PAYSLIP, "employer", value, text) is None  # no label


def test_a_label_naming_two_fields_goes_to_the_one_it_names_whole():
    text = "Payslip. Employee: Søren Haugen, no. 00417."
    value = {"employee": None, "employee_id": "00417", "employer": "X"}
    assert label_value(PAYSLIP, PAYSLIP, "employee", value, text) == "Søren Haugen"
    value = {"employee": "Søren Haugen", "employee_id": None, "employer": "X"}
    assert label_value(PAYSLIP, PAYSLIP, "employee_id", value, text) is None


LOT = _obj(artist=STR, estimate=_obj(low=NUM, high=NUM))


def test_a_range_pair_in_a_nested_object_is_named_by_the_object():
    text = "Hélène Marchand (French, 1921-1998), oil on canvas. Estimate €8,000 - 12,000."
    before = {"artist": "Hélène Marchand", "estimate": {"low": 12, "high": 12}}
    value, _ = apply_evidence(LOT, text, before)
    assert value == {"artist": "Hélène Marchand", "estimate": {"low": 8000, "high": 12000}}
    jsonschema.validate(value, LOT)


@pytest.mark.parametrize(
    ("text", "negation"),
    [
        ("Tracking no. RR 482 913 057 PL.", False),
        ("Claim no. 7781-0932 received.", False),
        ("Employee no. 00417.", False),
        ("Tracking: no.", True),
        ("No. Tracking is not offered.", True),
        ("There is no tracking.", True),
    ],
)
def test_no_before_a_number_is_the_abbreviation_not_a_negation(text, negation):
    doc = TextWords(text)
    at = [k for k, w in enumerate(doc.raw) if w == "no"][0]
    assert doc.is_negation(at) is negation


def test_a_nullable_identifier_after_no_is_not_denied():
    schema = _obj(tracking_number={"type": ["string", "null"], "maxLength": 40})
    text = "Parcel to Edinburgh. Tracking no. RR 482 913 057 PL."
    value, _ = apply_evidence(schema, text, {"tracking_number": "RR 482 913 057 PL."})
    assert value == {"tracking_number": "RR 482 913 057 PL"}  # its full stop dropped


MEMBER = _obj(member_name=STR, card_number=STR)


def test_a_bracket_holding_more_than_the_role_word_is_no_mark():
    text = "Hi Mei Tanaka (card no. LB-440918), your item is waiting."
    value = {"member_name": "Mei Tanaka", "card_number": "LB-440918"}
    assert swapped_roles(MEMBER, MEMBER, value, TextWords(text)) == {}
    teams = _obj(home_team=STR, away_team=STR)
    value = {"home_team": "Lyon Aigles", "away_team": "Cardiff Wildcats"}
    text = "Cardiff Wildcats (home) 27, Lyon Aigles 12."
    assert swapped_roles(teams, teams, value, TextWords(text)) == {
        "home_team": "Cardiff Wildcats",
        "away_team": "Lyon Aigles",
    }


def test_a_denied_amount_is_not_filled_by_the_currency_marked_numeral():
    schema = _obj(
        penalty_amount=NUM,
        reduced_amount={"type": ["number", "null"], "minimum": 0},
        currency={"enum": ["CHF", "EUR"]},
    )
    text = "Fine CHF 40; no reduction for early payment."
    before = {"penalty_amount": 40, "reduced_amount": 40, "currency": "EUR"}
    value, _ = apply_evidence(schema, text, before)
    assert value == {"penalty_amount": 40, "reduced_amount": None, "currency": "CHF"}


@pytest.mark.parametrize(
    ("text", "value", "want"),
    [
        ("Harlow & Finch Auctioneers, Bath, sale of 2 October.", "Finch Auctioneers",
         "Harlow & Finch Auctioneers"),
        ("Sold at Harlow & Finch Auctioneers in Bath.", "Harlow", "Harlow & Finch Auctioneers"),
        ("Clinic: Paws & Claws, Brno.", "Paws", "Paws & Claws"),
        ("Ask Finch Auctioneers & then call.", "Finch Auctioneers", None),  # "then": no name
    ],
)  # fmt: skip
def test_names_joined_by_an_ampersand_are_one_run(text, value, want):
    schema = _obj(house=STR, city=NSTR)
    node = {"house": value, "city": None}
    assert capital_run(schema, schema, "house", node, text) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("Toronto on Feb 21st", "Toronto"),
        ("Village Hall, 12 January 2026", "Village Hall"),
        ("Leeds on 14/03/2026.", "Leeds"),
        ("12 January 2026", None),  # a date and nothing else
        ("Sale of 2 October 2026", None),  # "of" joins no name to a date
        ("Meeting at 9 am", None),  # a time is no date
    ],
)
def test_a_name_run_on_into_a_date_is_cut_before_it(value, want):
    schema = _obj(v=STR)
    assert date_tail(schema, schema["properties"]["v"], value) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("Greg Hollis's 7-year-old Labrador", "Greg Hollis"),
        ("Greg Hollis’s old dog", "Greg Hollis"),
        ("St Aidan's Academy", None),  # a capital after it: part of the name
        ("McDonald's restaurant", None),  # one word: a name's own possessive
        ("Tenants' association AGM", None),
        ("Greg Hollis", None),
    ],
)
def test_a_name_run_on_past_its_possessive_is_the_name(value, want):
    schema = _obj(v=STR)
    assert possessive_cut(schema, schema["properties"]["v"], value) == want


def test_the_cuts_run_in_apply_evidence():
    schema = _obj(clinic=STR, city=STR, owner=STR)
    text = (
        "Maple Street Vets in Toronto on Feb 21st 2026: Greg Hollis's 7-year-old Labrador "
        "came in for a check-up."
    )
    before = {
        "clinic": "Maple Street Vets in Toronto",
        "city": "Toronto on Feb 21st",
        "owner": "Greg Hollis's 7-year-old Labrador",
    }
    value, _ = apply_evidence(schema, text, before)
    assert value == {"clinic": "Maple Street Vets", "city": "Toronto", "owner": "Greg Hollis"}


@pytest.mark.parametrize(
    ("name", "value", "want"),
    [
        ("patient_name", "Patient Øyvind Hansen", "Øyvind Hansen"),
        ("passenger", "passenger Aisha", "Aisha"),
        ("patient_name", "Øyvind Hansen", None),  # no label word
        ("patient_name", "Patient care", None),  # no name after it
        ("member", "Patient Øyvind Hansen", None),  # not a word of this field's name
    ],
)
def test_a_label_word_copied_before_a_name_goes(name, value, want):
    schema = _obj(**{name: STR})
    assert label_word_cut(schema, schema["properties"][name], name, value) == want


def test_a_label_word_cut_then_the_name_run_completes_it():
    schema = _obj(passenger=STR, operator=STR)
    text = "Dear passenger Aisha Mensah, your Northern Line Rail service is late."
    before = {"passenger": "passenger Aisha", "operator": "Northern Line Rail"}
    value, _ = apply_evidence(schema, text, before)
    assert value == {"passenger": "Aisha Mensah", "operator": "Northern Line Rail"}


SEVERITY = _obj(severity={"enum": ["blocker", "critical", "major", "minor"]})


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("I would call this major rather than a blocker.", "blocker", "major"),
        ("Minor, other than a blocker.", "blocker", "minor"),
        ("Not a blocker.", "blocker", "blocker"),  # no option affirmed: the model's stays
        ("A blocker, not major.", "blocker", "blocker"),  # affirmed: stays
        ("Major rather than a blocker, or critical.", "blocker", "blocker"),  # two affirmed
    ],
)
def test_an_option_the_text_mentions_only_negated_gives_way_to_the_one_affirmed(
    text, before, after
):
    value, _ = apply_evidence(SEVERITY, text, {"severity": before})
    assert value == {"severity": after}
