"""General evidence rules from the twelfth probe set's failures (session 35, k17): an enum
option written as a compound split differently, the option standing beside its field's
name, a "none" option for a field the text denies, and a date copied into a sibling that
the text writes relative to it (or not at all); texts of their own, values read off them
by hand."""

from __future__ import annotations

import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.dates import relative_offsets, shifted
from structgen.extraction.evidence.options import _joined_mentions
from structgen.extraction.evidence.text import TextWords
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 60}
DATE = {"type": "string", "format": "date"}
NDATE = {"type": ["string", "null"], "format": "date"}


def _enum(*options: str) -> dict:
    return {"enum": list(options)}


def _enums(*options: str) -> dict:
    return {"type": "array", "maxItems": 6, "items": {"enum": list(options)}}


def test_a_hyphenated_compound_mentions_its_option():
    schema = _obj(plumber=STR, job=_enum("callout", "scheduled", "quote"))
    text = "Plumber: Nadia Farouk. Emergency call-out to a burst pipe, Sunday night."
    out, changed = apply_evidence(schema, text, {"plumber": "Nadia Farouk", "job": "quote"})
    assert out["job"] == "callout" and "job" in changed
    # an option of two words written as one
    schema = _obj(plumber=STR, job=_enum("call_out", "scheduled", "quote"))
    text = "Plumber: Nadia Farouk. Emergency callout, burst pipe."
    out, _ = apply_evidence(schema, text, {"plumber": "Nadia Farouk", "job": "quote"})
    assert out["job"] == "call_out"
    # an enum array: "E-mail and Wi-Fi" holds both
    schema = _obj(guest=STR, amenities=_enums("wifi", "email", "parking"))
    text = "Guest: Ivo Stanev. The room comes with Wi-Fi; receipts go out by e-mail."
    out, _ = apply_evidence(schema, text, {"guest": "Ivo Stanev", "amenities": []})
    assert out["amenities"] == ["wifi", "email"]


@pytest.mark.parametrize(
    ("text", "option", "found"),
    [
        ("A call-out fee applies.", "callout", [(1, 2)]),
        ("Free Wi-Fi.", "wifi", [(1, 2)]),
        ("A callout fee.", "call_out", [(1, 1)]),
        ("A call out fee.", "call_out", []),  # the option's own words: the plain mention
        ("A call - out fee.", "callout", []),  # spaced: two words, no compound
        ("A recall-out fee.", "callout", []),
    ],
)
def test_joined_mentions(text, option, found):
    assert _joined_mentions(TextWords(text), option) == found


def test_the_option_beside_the_fields_name_wins_a_tie():
    schema = _obj(guest=STR, room=_enum("none", "standard", "deluxe", "suite"))
    text = "Guest: Ana Reyes. Breakfast: none. Booked a deluxe room for two nights."
    out, changed = apply_evidence(schema, text, {"guest": "Ana Reyes", "room": "suite"})
    assert out["room"] == "deluxe" and "room" in changed
    # two options beside the name, or neither: no decision, the model's stays
    text = "Guest: Ana Reyes. Standard room requested, deluxe room if free."
    out, _ = apply_evidence(schema, text, {"guest": "Ana Reyes", "room": "suite"})
    assert out["room"] == "suite"
    text = "Guest: Ana Reyes. Breakfast: none. Deluxe package, two nights."
    out, _ = apply_evidence(schema, text, {"guest": "Ana Reyes", "room": "suite"})
    assert out["room"] == "suite"


def test_a_denied_field_takes_its_none_option():
    schema = _obj(guest=STR, room=_enum("none", "standard", "deluxe"))
    text = "Guest: Ana Reyes, day visit to the spa only, no room needed."
    out, changed = apply_evidence(schema, text, {"guest": "Ana Reyes", "room": "standard"})
    assert out["room"] == "none" and "room" in changed
    # an option affirmed, or the name mentioned un-negated: the rule does not fire
    text = "Guest: Ana Reyes, no room upgrade; the standard one is fine."
    out, _ = apply_evidence(schema, text, {"guest": "Ana Reyes", "room": "deluxe"})
    assert out["room"] == "standard"
    text = "Guest: Ana Reyes, room to be allocated on arrival."
    out, _ = apply_evidence(schema, text, {"guest": "Ana Reyes", "room": "standard"})
    assert out["room"] == "standard"


@pytest.mark.parametrize(
    ("text", "offsets"),
    [
        ("Filed on 4 May 2027 about yesterday's flood.", [(-1, "day")]),
        ("See you tomorrow.", [(1, "day")]),
        ("Back one week later.", [(7, "day")]),
        ("Review two weeks after today's visit.", [(14, "day")]),
        ("Renew twelve months from the date of issue.", [(12, "month")]),
        ("It ended 3 years ago, and a fortnight later we met.", [(-3, "year"), (14, "day")]),
        ("Pay 14 days before travel.", []),
        ("Smoked for twelve years of his life.", []),
    ],
)
def test_relative_offsets(text, offsets):
    assert relative_offsets(text) == offsets


@pytest.mark.parametrize(
    ("iso", "offset", "new"),
    [
        ("2027-03-09", (12, "month"), "2028-03-09"),
        ("2027-01-31", (1, "month"), "2027-02-28"),
        ("2028-01-31", (1, "month"), "2028-02-29"),
        ("2027-12-15", (2, "month"), "2028-02-15"),
        ("2027-03-01", (-1, "day"), "2027-02-28"),
        ("2027-02-29", (1, "day"), None),
    ],
)
def test_shifted(iso, offset, new):
    assert shifted(iso, offset) == new


def test_a_copied_date_takes_the_relative_date():
    schema = _obj(caller=STR, reported_date=DATE, incident_date=DATE)
    text = "Report by Hugo Lind, filed 10/06/2027: the street lights were out yesterday."
    value = {"caller": "Hugo Lind", "reported_date": "2027-06-10", "incident_date": "2027-06-10"}
    out, changed = apply_evidence(schema, text, value)
    assert out["incident_date"] == "2027-06-09" and changed == ["incident_date"]
    # the nullable one of the pair takes it, whichever comes first
    schema = _obj(caller=STR, follow_up=NDATE, visit_date=DATE)
    text = "Visit by Hugo Lind on 3 August 2027; follow-up booked for two weeks after the visit."
    value = {"caller": "Hugo Lind", "follow_up": "2027-08-03", "visit_date": "2027-08-03"}
    out, _ = apply_evidence(schema, text, value)
    assert out["follow_up"] == "2027-08-17" and out["visit_date"] == "2027-08-03"


def test_a_copied_nullable_date_the_text_does_not_give_is_null():
    schema = _obj(caller=STR, visit_date=DATE, next_visit=NDATE)
    text = "Visit by Hugo Lind on 3 August 2027. Next visit: as per contract."
    value = {"caller": "Hugo Lind", "visit_date": "2027-08-03", "next_visit": "2027-08-03"}
    out, changed = apply_evidence(schema, text, value)
    assert out["next_visit"] is None and changed == ["next_visit"]


@pytest.mark.parametrize(
    "text",
    [
        # the date written twice: both fields may hold it
        "Visit by Hugo Lind on 3 August 2027. Next visit: 3 August 2027, afternoon.",
        # a date no field holds: the copy may be that one's
        "Visit by Hugo Lind on 3 August 2027. Next visit by 20 August 2027 at the latest.",
        # two relative dates: which one is not known
        "Visit by Hugo Lind on 3 August 2027; one week later a call, a month later a visit.",
    ],
)
def test_the_copied_date_rule_does_not_fire(text):
    schema = _obj(caller=STR, visit_date=DATE, next_visit=NDATE)
    value = {"caller": "Hugo Lind", "visit_date": "2027-08-03", "next_visit": "2027-08-03"}
    out, _ = apply_evidence(schema, text, value)
    assert out["next_visit"] == "2027-08-03"


def test_one_ambiguous_date_is_not_two_dates_in_order():
    # "09/03/2027" reads 9 March or 3 September: one date the text writes, not the two
    # dates that the date-order rule would hand to two fields in turn
    schema = _obj(engineer=STR, visit_date=DATE, due_date=DATE)
    text = "Engineer Lena Moss visited on 09/03/2027."
    value = {"engineer": "Lena Moss", "visit_date": "2027-03-09", "due_date": "2027-03-09"}
    out, _ = apply_evidence(schema, text, value)
    assert out["visit_date"] == out["due_date"] == "2027-03-09"
    # two dates written: taken in order, as before
    text = "Engineer Lena Moss visited on 9 March 2027; due again on 9 March 2028."
    out, _ = apply_evidence(schema, text, value)
    assert (out["visit_date"], out["due_date"]) == ("2027-03-09", "2028-03-09")


def test_scale_words_mention_their_level():
    schema = _obj(caller=STR, priority=_enum("low", "medium", "high"))
    for text, want in [
        ("Caller: Iris Vale. Normal priority, call back this week.", "medium"),
        ("Caller: Iris Vale. Please treat this as urgent.", "high"),
        ("Caller: Iris Vale. Moderate damage to the fence.", "medium"),
    ]:
        out, _ = apply_evidence(schema, text, {"caller": "Iris Vale", "priority": "low"})
        assert out["priority"] == want, text
    # not a scale (no "low" and "high" options): no alias
    schema = _obj(caller=STR, priority=_enum("routine", "medium", "emergency"))
    text = "Caller: Iris Vale. Normal priority."
    out, _ = apply_evidence(schema, text, {"caller": "Iris Vale", "priority": "routine"})
    assert out["priority"] == "routine"
    # "normal" as an option of its own is that option, not medium
    schema = _obj(caller=STR, priority=_enum("low", "normal", "medium", "high"))
    out, _ = apply_evidence(schema, text, {"caller": "Iris Vale", "priority": "low"})
    assert out["priority"] == "normal"
