"""General string rules from the eighth probe set's failures (session 34, e16): an
identifier field holding no digit takes the one identifier the text writes, a host-name
field the one host name, a value run on into the next phrase's label loses it, and a name
heading its sentence keeps its first word; texts of their own, values read off them by
hand."""

from __future__ import annotations

import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.names import dangling_cut
from structgen.extraction.labels import host_field, host_names, identifier_chunks
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 60}


def test_an_identifier_field_holding_no_digit_takes_the_one_identifier():
    schema = _obj(member_id=STR, club=STR, member=STR)
    text = (
        "Harbourside Rowing Club. Welcome aboard, Ines Carvalho! Your card (HR-5120) is "
        "valid from 2027-03-01; you row in lane 4."
    )
    value = {"member_id": "Harbourside Rowing Club", "club": "Harbourside Rowing Club"}
    value["member"] = "Ines Carvalho"
    out, changed = apply_evidence(schema, text, value)
    assert out["member_id"] == "HR-5120" and changed == ["member_id"]
    # a value with a digit is left to the other rules
    out, changed = apply_evidence(schema, text, {**value, "member_id": "lane 4"})
    assert out["member_id"] == "lane 4" and not changed


def test_the_identifier_shape_needs_exactly_one_free_identifier():
    schema = _obj(order_id=STR, parcel=STR)
    two = "Parcel PX-100 and parcel PX-200 left the depot; ask Nadia Fenn."
    out, changed = apply_evidence(schema, two, {"order_id": "Nadia Fenn", "parcel": "PX-100"})
    assert out["order_id"] == "PX-200"  # PX-100 is the sibling's
    out, changed = apply_evidence(schema, two, {"order_id": "Nadia Fenn", "parcel": "box"})
    assert out["order_id"] == "Nadia Fenn" and not changed  # two free ones: no choice
    # a piece of a sibling's value is no identifier of its own ("LR19" of "LR19 XFD")
    schema = _obj(ticket_number=STR, plate=STR)
    text = "PARKING NOTICE for the car LR19 XFD, issued in Leeds."
    out, changed = apply_evidence(
        schema, text, {"ticket_number": "PARKING NOTICE", "plate": "LR19 XFD"}
    )
    assert out["ticket_number"] == "PARKING NOTICE" and not changed


def test_identifier_chunks_skip_addresses_urls_and_amounts():
    text = (
        "Ref: QA-77, write to ops2@desk.example or see https://desk.example/t/9A1; paid "
        "EUR1,250 on 2027-05-01. Form K-30917 4410."
    )
    assert identifier_chunks(text) == ["QA-77", "K-30917 4410"]


def test_a_host_name_field_takes_the_one_host_name():
    schema = _obj(domain=STR, owner=STR)
    text = "Renewal for Ólafur Jónsson: the domain jonsson-smidur.is is yours until 2029."
    value = {"domain": "Ólafur Jónsson", "owner": "Ólafur Jónsson"}
    out, changed = apply_evidence(schema, text, value)
    assert out["domain"] == "jonsson-smidur.is" and changed == ["domain"]
    # two host names: the model's value stays
    text2 = text + " The old one, smidur.net, lapsed."
    out, changed = apply_evidence(schema, text2, value)
    assert out["domain"] == "Ólafur Jónsson" and not changed


def test_host_names_and_host_fields():
    text = (
        "Mail hello@bakery.example, visit https://www.bakery.example/menu or shop.bakery.example"
        ". Mr.Smith paid 3.50 at St. Louis."
    )
    assert host_names(text) == ["www.bakery.example", "shop.bakery.example"]
    assert [k for k in ("domain_name", "website", "homepage", "registrar") if host_field(k)] == [
        "domain_name",
        "website",
        "homepage",
    ]


@pytest.mark.parametrize(
    ("value", "cut"),
    [
        ("SR/2027/118. Case officer:", "SR/2027/118"),
        ("Hotel Miramar - Check-in date:", "Hotel Miramar"),
        ("Quay Street, Tel:", "Quay Street"),
        ("14.05.2027, kl. 18:", None),  # a clock time's colon, no label
        ("Note: bring ID", None),  # a label at the start is the label rule's
    ],
)
def test_a_value_run_into_the_next_label_is_cut(value, cut):
    schema = _obj(ref=STR)
    assert dangling_cut(schema, schema["properties"]["ref"], value) == cut


@pytest.mark.parametrize(
    ("text", "value", "new"),
    [
        (
            "Lakeview Physio Clinic - appointment card. Patient: Omar Haddad.",
            "Physio Clinic",
            "Lakeview Physio Clinic",
        ),  # fmt: skip
        ("RECEIPT. Bäckerei Vogt, Freiburg. Two rolls.", "Vogt", "Bäckerei Vogt"),
        # an opener's first word is capitalised anyway
        ("Dear Carlos Mendes, your parcel has left.", "Carlos Mendes", None),
        # a label's first word is no heading ("Clinic: Lakeview ...")
        ("Clinic: Lakeview Physio, Leeds.", "Physio", None),
        # a sentence's first word not closed by " - ", "," or "." after the name
        ("Lakeview Physio opens at 9.", "Physio", None),
        # nor by a comma and words that do not end the sentence
        ("Tom Berg, 51, a baker in Oslo.", "Berg", None),
    ],
)
def test_a_name_heading_its_sentence_takes_its_first_word(text, value, new):
    schema = _obj(place=STR, other=STR)
    out, changed = apply_evidence(schema, text, {"place": value, "other": "x"})
    assert out["place"] == (new or value) and changed == (["place"] if new else [])


def test_the_identifier_shape_leaves_fragments_to_the_span_rules():
    schema = _obj(ticket_id=STR)
    # "x" is written inside "x0932": the span rules decide its ends, not this rule
    out, _ = apply_evidence(schema, "Case #/-x0932 for SUP.", {"ticket_id": "x"})
    assert out["ticket_id"] == "x"
    # one character written alone is no name this rule replaces either
    out, changed = apply_evidence(schema, "x marks SUP-0932.", {"ticket_id": "x"})
    assert out["ticket_id"] == "x" and not changed


TIME = {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"}


@pytest.mark.parametrize(
    ("text", "held", "want"),
    [
        ("Hall hire on 3 May 2027: doors from 6:15pm, out by 11pm.", "23:00", ("18:15", "23:00")),
        ("Studio B, Fri 09.07.2027, kl. 08:00-12:30.", "08:00", ("08:00", "12:30")),
        # three times for two fields: no order to read
        ("Open 9:00-17:00, lunch at 12:00.", "17:00", ("17:00", "17:00")),
        # one time only
        ("Starts at 19:30.", "19:30", ("19:30", "19:30")),
    ],
)
def test_time_fields_holding_one_time_take_the_texts_times_in_order(text, held, want):
    schema = _obj(room=STR, start_time=TIME, end_time=TIME)
    value = {"room": "Hall", "start_time": held, "end_time": held}
    out, _ = apply_evidence(schema, text, value)
    assert (out["start_time"], out["end_time"]) == want


def test_time_fields_holding_different_times_stay():
    schema = _obj(start_time=TIME, end_time=TIME)
    out, changed = apply_evidence(
        schema, "From 18:00 to 23:30.", {"start_time": "23:30", "end_time": "18:00"}
    )
    assert out == {"start_time": "23:30", "end_time": "18:00"} and not changed
