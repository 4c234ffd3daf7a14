"""Arrays of weekly sessions read one record per day group of the text
(``structgen.extraction.evidence.records``): values read off the texts by hand."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.records import (
    day_groups,
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
