"""Arrays of weekly sessions read one record per day group of the text
(``structgen.extraction.evidence.records``): values read off the texts by hand."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.records import (
    day_groups,
    identified_fields,
    identified_items,
    leg_fields,
    leg_items,
    time_ranges,
    weekly_fields,
    weekly_items,
)

HHMM = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}
SESSION = {
    "type": "object",
    "properties": {
        "day": {"enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]},
        "start_time": HHMM,
        "end_time": HHMM,
        "room": {"type": ["string", "null"], "maxLength": 40},
    },
    "required": ["day", "start_time", "end_time", "room"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string"},
        "sessions": {"type": "array", "minItems": 1, "maxItems": 5, "items": SESSION},
    },
    "required": ["code", "sessions"],
}
# probe 4's course_schedule-01 and -02 (their sessions sentences)
TEXT_1 = (
    "HIST 214. Classes start on 7 September 2026 and meet on Mondays and Wednesdays, "
    "10:15-11:45, in room K-204, plus a Friday seminar from 14:00 to 15:00 in room L3. "
    "Taught in person on campus."
)
TEXT_2 = (
    "Blended delivery: a live online lecture every Tuesday from 6 pm to 8 pm (no room), "
    "and a lab on Thursdays 9:00-11:00 in Engineering Hall 1.12. First class: 2027/01/12."
)


def _s(day, start, end, room):
    return {"day": day, "start_time": start, "end_time": end, "room": room}


def test_day_groups_and_time_ranges():
    assert [g[2] for g in day_groups(TEXT_1)] == [["monday", "wednesday"], ["friday"]]
    assert [r[2:] for r in time_ranges(TEXT_1)] == [("10:15", "11:45"), ("14:00", "15:00")]
    assert [r[2:] for r in time_ranges(TEXT_2)] == [("18:00", "20:00"), ("09:00", "11:00")]
    assert [r[2:] for r in time_ranges("6 to 8 pm, 9.30 until 11 am")] == [
        ("18:00", "20:00"),
        ("09:30", "11:00"),
    ]
    assert time_ranges("pages 5-10, ages 7 to 12") == []  # numbers, not times


def test_weekly_fields_need_a_weekday_enum_and_two_times():
    assert weekly_fields(SCHEMA, SESSION)[0::2] == ("day", "start_time", "room")
    for bad in (
        {**SESSION, "properties": {**SESSION["properties"], "day": {"enum": ["a", "b"]}}},
        {**SESSION, "properties": {**SESSION["properties"], "end_time": {"type": "string"}}},
        {**SESSION, "properties": {**SESSION["properties"], "room": {"type": "string"}}},
    ):
        with pytest.raises(ValueError):
            weekly_fields(SCHEMA, bad)


def test_one_record_per_day_its_groups_times_and_place():
    prop = SCHEMA["properties"]["sessions"]
    model = [_s("mon", "10:15", "11:45", "K-204"), _s("tue", "14:00", "15:00", "L3")]
    assert weekly_items(SCHEMA, prop, TEXT_1, model) == [
        _s("mon", "10:15", "11:45", "K-204"),
        _s("wed", "10:15", "11:45", "K-204"),
        _s("fri", "14:00", "15:00", "L3"),
    ]
    model = [_s("mon", "20:00", "20:00", "201")]  # one time held: the anchor
    assert weekly_items(SCHEMA, prop, TEXT_2, model) == [
        _s("tue", "18:00", "20:00", None),
        _s("thu", "09:00", "11:00", "Engineering Hall 1.12"),
    ]


def test_the_models_array_stays_without_anchor_range_or_room_in_the_schema():
    prop = SCHEMA["properties"]["sessions"]
    assert weekly_items(SCHEMA, prop, TEXT_1, [_s("mon", "08:00", "09:00", None)]) is None
    no_range = "Meets on Mondays at 10:15 and on Fridays from 14:00 to 15:00."
    assert weekly_items(SCHEMA, prop, no_range, [_s("fri", "14:00", "15:00", None)]) is None
    few = {**prop, "maxItems": 2}
    assert weekly_items(SCHEMA, few, TEXT_1, [_s("mon", "10:15", "11:45", None)]) is None


def test_the_evidence_pass_reads_the_sessions_and_stays_valid():
    value = {"code": "HIST 214", "sessions": [_s("mon", "10:15", "11:45", "K-204")] * 2}
    out, changed = apply_evidence(SCHEMA, TEXT_1, copy.deepcopy(value))
    assert [s["day"] for s in out["sessions"]] == ["mon", "wed", "fri"]
    assert "sessions" in changed
    jsonschema.validate(out, SCHEMA)


CONTAINER = {
    "type": "object",
    "properties": {
        "container_id": {"type": "string", "pattern": "^[A-Z]{4}[0-9]{7}$"},
        "contents": {"type": "string", "maxLength": 60},
        "gross_weight_kg": {"type": "number", "minimum": 0},
        "hazardous": {"type": "boolean"},
    },
    "required": ["container_id", "contents", "gross_weight_kg", "hazardous"],
    "additionalProperties": False,
}
MANIFEST = {
    "type": "object",
    "properties": {"containers": {"type": "array", "maxItems": 6, "items": CONTAINER}},
}
# probe 4's shipping_manifest-01 and -02 (their container sentences)
LIST_TEXT = (
    "Three containers: MSKU4417203, frozen cod fillets, 21,450 kg gross; MSKU4417219, "
    "frozen salmon portions, 19,880 kg gross; TGHU8820154, dried fish meal, 24,100 kg "
    "gross. None of the cargo is dangerous goods. Total gross weight 65,430 kg."
)
PROSE_TEXT = (
    "Two units are on board: container CAIU7712048 with green coffee in jute bags, "
    "twenty-two thousand kilograms; and tank container EXFU3390017 with ethanol (UN "
    "1170, class 3, hazardous), 18 500 kg. Combined weight: 40 500 kg."
)


def _c(cid, contents, kg, hazardous):
    return {
        "container_id": cid,
        "contents": contents,
        "gross_weight_kg": kg,
        "hazardous": hazardous,
    }


def test_one_record_per_identifier_in_a_list_and_in_prose():
    prop = MANIFEST["properties"]["containers"]
    model = [_c("MSKU4417219", "MV Nordic Aurora", 21450, False)]
    assert identified_items(MANIFEST, prop, LIST_TEXT, model) == [
        _c("MSKU4417203", "frozen cod fillets", 21450, False),
        _c("MSKU4417219", "frozen salmon portions", 19880, False),
        _c("TGHU8820154", "dried fish meal", 24100, False),
    ]
    model = [_c("CAIU7712048", "2027 and discharging at Antwerp", 2027, False)]
    assert identified_items(MANIFEST, prop, PROSE_TEXT, model) == [
        _c("CAIU7712048", "green coffee in jute bags", 22000, False),
        _c("EXFU3390017", "ethanol", 18500, True),  # "hazardous" in its region
    ]


def test_identified_records_keep_the_models_array_without_an_anchor_or_a_shape():
    prop = MANIFEST["properties"]["containers"]
    assert identified_items(MANIFEST, prop, LIST_TEXT, [_c("ABCD1234567", "x", 1, False)]) is None
    once = "Container MSKU4417203, frozen cod fillets, 21,450 kg gross."
    assert identified_items(MANIFEST, prop, once, [_c("MSKU4417203", "x", 1, False)]) is None
    with pytest.raises(ValueError):
        identified_fields(MANIFEST, {**CONTAINER, "properties": {"a": {"type": "string"}}})
    out, changed = apply_evidence(
        MANIFEST, LIST_TEXT, {"containers": [_c("MSKU4417219", "MV Nordic Aurora", 1, False)]}
    )
    assert len(out["containers"]) == 3 and changed == ["containers"]
    jsonschema.validate(out, MANIFEST)


LEG = {
    "type": "object",
    "properties": {
        "mode": {"enum": ["flight", "train", "bus", "ferry"]},
        "carrier": {"type": "string", "maxLength": 40},
        "from_city": {"type": "string", "maxLength": 40},
        "to_city": {"type": "string", "maxLength": 40},
        "date": {"type": "string", "format": "date"},
        "departure_time": HHMM,
        "seat": {"type": ["string", "null"], "maxLength": 20},
    },
    "required": ["mode", "carrier", "from_city", "to_city", "date", "departure_time", "seat"],
    "additionalProperties": False,
}
TRIP = {
    "type": "object",
    "properties": {"segments": {"type": "array", "minItems": 1, "maxItems": 5, "items": LEG}},
}
# probe 4's travel_itinerary-02 (its legs)
TRIP_TEXT = (
    "Trip plan for Dev Anand Krishnan (booking 8KD-204). Leg one: Eurostar train 9014 from "
    "London to Paris on 2027-04-03, leaving at 6.10 am, coach 5, seat 61. Leg two: FlixBus "
    "N702 overnight coach from Paris to Barcelona the same day, leaving at 10:45 pm, no "
    "reserved seat. Leg three: Baleària ferry from Barcelona to Palma on 5 April 2027, "
    "sailing at 23:00, reclining seat 88. Total paid: €312.75."
)


def _leg(mode, carrier, a, b, date, time, seat):
    return {
        "mode": mode,
        "carrier": carrier,
        "from_city": a,
        "to_city": b,
        "date": date,
        "departure_time": time,
        "seat": seat,
    }


def test_one_record_per_from_to_leg():
    prop = TRIP["properties"]["segments"]
    model = [_leg("flight", "Eurostar", "London", "Paris", "2027-04-03", "23:00", "61")]
    assert leg_items(TRIP, prop, TRIP_TEXT, model) == [
        _leg("train", "Eurostar", "London", "Paris", "2027-04-03", "06:10", "61"),
        _leg("bus", "FlixBus", "Paris", "Barcelona", "2027-04-03", "22:45", None),
        _leg("ferry", "Baleària", "Barcelona", "Palma", "2027-04-05", "23:00", "88"),
    ]
    out, changed = apply_evidence(TRIP, TRIP_TEXT, {"segments": model})
    assert len(out["segments"]) == 3 and changed == ["segments"]
    jsonschema.validate(out, TRIP)


def test_legs_keep_the_models_array_without_an_anchor_or_two_legs():
    prop = TRIP["properties"]["segments"]
    other = [_leg("train", "X", "Oslo", "Bergen", "2027-04-03", "06:10", None)]
    assert leg_items(TRIP, prop, TRIP_TEXT, other) is None
    one = "Leg one: Eurostar train from London to Paris on 2027-04-03, leaving at 06:10."
    model = [_leg("train", "Eurostar", "London", "Paris", "2027-04-03", "06:10", None)]
    assert leg_items(TRIP, prop, one, model) is None
    two_dates = TRIP_TEXT.replace("the same day", "on 3 April 2027 or 4 April 2027")
    assert leg_items(TRIP, prop, two_dates, model) is None  # a leg with two dates
    with pytest.raises(ValueError):
        leg_fields(TRIP, {**LEG, "properties": {**LEG["properties"], "from_city": HHMM}})
