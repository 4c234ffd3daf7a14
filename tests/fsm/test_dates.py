"""structgen.fsm.dates against datetime's own formatting (strftime in each notation the
module reads), and a copied ``format: date`` / time-pattern field: exactly the text's
dates and times in ISO form (every day of a year checked against ``dates``)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.fsm.compiler import compile_spec
from structgen.fsm.dates import dates, times
from structgen.fsm.json_schema.copy import CopyJsonSchema


def _ordinal(n: int) -> str:
    return str(n) + ("th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th"))


# the days of a month as English ordinal words, written out by hand (the reference)
ORDINAL_WORDS = [
    None, "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
    "ninth", "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth",
    "sixteenth", "seventeenth", "eighteenth", "nineteenth", "twentieth", "twenty-first",
    "twenty-second", "twenty-third", "twenty-fourth", "twenty-fifth", "twenty-sixth",
    "twenty-seventh", "twenty-eighth", "twenty-ninth", "thirtieth", "thirty-first",
]  # fmt: skip

NOTATIONS = [
    lambda d: d.isoformat(),
    lambda d: d.strftime("%Y/%m/%d"),
    lambda d: d.strftime("%d.%m.%Y"),
    lambda d: d.strftime("%m/%d/%Y"),
    lambda d: d.strftime("%d/%m/%Y"),
    lambda d: f"{d.day} {d.strftime('%B')} {d.year}",
    lambda d: f"the {_ordinal(d.day)} of {d.strftime('%B')} {d.year}",
    lambda d: f"{d.strftime('%B')} {d.day}, {d.year}",
    lambda d: f"{d.strftime('%b')}. {_ordinal(d.day)} {d.year}",
    lambda d: f"{d.strftime('%A')} {d.day} {d.strftime('%b').upper()} {d.year}",
    lambda d: f"the {ORDINAL_WORDS[d.day]} of {d.strftime('%B')} {d.year}",
    lambda d: f"{d.strftime('%B')} {ORDINAL_WORDS[d.day].replace('-', ' ')}, {d.year}",
    lambda d: f"The {ORDINAL_WORDS[d.day].title()} of {d.strftime('%b')} {d.year}",
]


@settings(max_examples=200, deadline=None)
@given(
    st.dates(dt.date(1950, 1, 1), dt.date(2099, 12, 31)),
    st.sampled_from(range(len(NOTATIONS))),
    st.sampled_from(["Booked for {}.", "{}", "on {}, see you", "(date: {})\n"]),
)
def test_every_notation_reads_as_the_iso_date(day, notation, frame):
    text = frame.format(NOTATIONS[notation](day))
    found = dates(text)
    assert day.isoformat() in found
    assert 1 <= len(found) <= 2  # an ambiguous numeric date: both readings
    for iso in found:
        dt.date.fromisoformat(iso)


def test_a_date_without_year_takes_the_texts_years():
    assert dates("Due in 2026 (November 2).") == ["2026-11-02"]
    assert dates("November 2") == []


@pytest.mark.parametrize(
    "text",
    [
        "the 31st of February 2026",
        "13/13/2026",
        "order 2026-1234",
        "ISBN 12.34.5678",
        "may 40",
        "the thirtieth of February 2026",
        "the second may be late in 2026",  # a day in words before its month needs "of"
    ],
)
def test_no_date(text):
    assert dates(text) == []


@settings(max_examples=200, deadline=None)
@given(st.times(), st.sampled_from(["24", "12", "12dots", "h"]))
def test_every_time_notation_reads_as_hh_mm(t, notation):
    t = t.replace(second=0, microsecond=0)
    h12 = t.hour % 12 or 12
    ap = "am" if t.hour < 12 else "pm"
    written = {
        "24": f"{t.hour}:{t.minute:02d}",
        "12": f"{h12}:{t.minute:02d} {ap}",
        "12dots": f"{h12}:{t.minute:02d} {ap[0]}.m.",
        "h": f"{t.hour:02d}h{t.minute:02d}",
    }[notation]
    found = times(f"Starts at {written}, do not be late.")
    assert found[:2] == [t.strftime("%H:%M"), t.strftime("%H:%M:%S")]


def test_named_and_whole_hours():
    assert times("lunch at noon, bed at midnight") == ["12:00", "12:00:00", "00:00", "00:00:00"]
    assert times("11 a.m. or 7 pm") == ["11:00", "11:00:00", "19:00", "19:00:00"]
    assert times("at 11:05 am") == ["11:05", "11:05:00"]  # not also 05:00
    assert times("5 amazing days, 3 hours") == []


TEXT = "Check in on Saturday 7 March 2026 at 2:15 pm, out on 09.03.2026, ref 2026-01-01."
SCHEMA = {
    "type": "object",
    "properties": {
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
    },
    "required": ["day", "at"],
}


def test_a_copied_date_field_is_exactly_the_texts_dates():
    grammar = compile_spec(CopyJsonSchema(SCHEMA, copy_from=(TEXT,)))
    allowed = set(dates(TEXT))
    assert allowed == {"2026-03-07", "2026-03-09", "2026-01-01"}
    day = dt.date(2026, 1, 1)
    while day.year == 2026:
        doc = json.dumps({"day": day.isoformat(), "at": "14:15"}, separators=(",", ":"))
        assert grammar.matches(doc) is (day.isoformat() in allowed), doc
        day += dt.timedelta(days=1)
    for at in ["14:15", "02:15", "14:16", "2:15"]:
        doc = json.dumps({"day": "2026-03-07", "at": at}, separators=(",", ":"))
        assert grammar.matches(doc) is (at == "14:15"), doc
