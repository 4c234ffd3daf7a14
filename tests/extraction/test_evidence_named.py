"""Evidence rules found general on the probe set (``structgen.extraction.evidence``):
a number field the model left out takes the numeral written right after its name, and a
date or time field left null or out takes the one date or time written right after the
words naming it; a patterned identifier (a DOI) the text does not write is replaced or
cleared, one left null takes the one written after its name; an irregular plural
("Children's") mentions its option. Hand-checked cases: the reference is the value a
reader takes from the text, and the unchanged object where the text does not settle it."""

from __future__ import annotations

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.roles import swapped_roles
from structgen.extraction.evidence.text import TextWords

HHMM = "^([01][0-9]|2[0-3]):[0-5][0-9]$"
SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string"},
        "date": {"type": "string", "format": "date"},
        "next_meeting": {"type": ["string", "null"], "format": "date"},
        "next_service_date": {"type": "string", "format": "date"},
        "doors_open": {"type": ["string", "null"], "pattern": HHMM},
        "wind_kmh": {"type": ["number", "null"], "minimum": 0},
        "duration_days": {"type": "integer", "minimum": 1},
    },
    "required": ["event", "date"],
    "additionalProperties": False,
}
BASE = {"event": "Board", "date": "2026-03-05"}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # left out: the numeral right after the field's name
        ("Sapporo. Snow showers, wind 20 km/h.", {}, {"wind_kmh": 20}),
        ("Lyon. Fog. Wind 10 kilometres per hour.", {"wind_kmh": None}, {"wind_kmh": 10}),
        # not right after it: the model decides
        ("Bergen. Winds from the southwest at 45 km/h.", {}, {}),
        # the name after the numeral ("for 7 days") is no label of a left-out field
        ("Take it twice a day for 7 days.", {}, {}),
        # a date after the words naming the field, a colon or two words between
        ("Board. Next meeting: 9 February 2026.", {"next_meeting": None},
         {"next_meeting": "2026-02-09"}),
        ("The board will next meet on April 2, 2026.", {}, {"next_meeting": "2026-04-02"}),
        ("Oil change. Next service due 11.03.2027.", {}, {"next_service_date": "2027-03-11"}),
        # a time field: the clock time or hour after its name
        ("Jazz Night | Doors open 19:00 | Row 12", {"doors_open": None}, {"doors_open": "19:00"}),
        ("Hamlet. Doors open at 7 pm.", {}, {"doors_open": "19:00"}),
        # not every word of the name ("Next visit" is not the next service)
        ("Battery done. Next visit: 2027-01-09.", {}, {}),
        # the name negated, an ambiguous numeric date, two different dates: unchanged
        ("There is no next meeting on 9 February 2026.", {"next_meeting": None},
         {"next_meeting": None}),
        ("Board. Next meeting: 03/02/2026.", {"next_meeting": None}, {"next_meeting": None}),
        ("Next meeting: 9 February 2026; next meeting: 9 March 2026.",
         {"next_meeting": None}, {"next_meeting": None}),
        # a value the model wrote stays
        ("Board. Next meeting: 9 February 2026.", {"next_meeting": "2026-02-10"},
         {"next_meeting": "2026-02-10"}),
    ],
)  # fmt: skip
def test_named_values(text, before, after):
    value = {**BASE, **before}
    got, changed = apply_evidence(SCHEMA, text, value)
    assert got == {**BASE, **after}
    assert sorted(changed) == sorted(k for k in after if after[k] != before.get(k, "absent"))
    jsonschema.validate(got, SCHEMA, format_checker=jsonschema.FormatChecker())


def test_a_required_date_left_out_is_not_filled():
    schema = {**SCHEMA, "required": ["event", "date", "next_meeting"]}
    value = dict(BASE)  # invalid as given: the rule does not make up the missing field
    got, changed = apply_evidence(schema, "Next meeting: 9 February 2026.", value)
    assert (got, changed) == (value, [])


CITE = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "doi": {"type": ["string", "null"], "pattern": "^10\\.[0-9]{4,9}/\\S+$"},
        "currency": {"type": ["string", "null"], "pattern": "^[A-Z]{3}$"},
        "last4": {"type": ["string", "null"], "pattern": "^[0-9]{4}$"},
        "start": {"type": ["string", "null"], "pattern": HHMM},
    },
    "required": ["title"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # an invented identifier: null where the text writes none, else the one it writes
        ("A. Souza. Consensus. PhD thesis, 2019.", {"doi": "10.1180/0192.2019.1"}, {"doi": None}),
        ("Consensus. See 10.1016/j.is.2021.04.007 online.", {"doi": "10.1180/0192.2019.1"},
         {"doi": "10.1016/j.is.2021.04.007"}),
        # left null: the identifier written right after the field's name
        ("Sparse retrieval. doi:10.1016/j.is.2021.04.007", {"doi": None},
         {"doi": "10.1016/j.is.2021.04.007"}),
        ("Sparse retrieval. DOI: 10.1016/j.is.2021.04.007.", {},
         {"doi": "10.1016/j.is.2021.04.007"}),
        # ... not after its name: the model decides
        ("Sparse retrieval, see 10.1016/j.is.2021.04.007.", {"doi": None}, {"doi": None}),
        # the value the text writes stays
        ("X. doi:10.1016/j.is.2021.04.007", {"doi": "10.1016/j.is.2021.04.007"},
         {"doi": "10.1016/j.is.2021.04.007"}),
        # values without a digit (a currency code from "€") and times are not identifiers
        ("Paid €84.50 at 7 pm.", {"currency": "EUR", "start": "19:00"},
         {"currency": "EUR", "start": "19:00"}),
        # a four-digit year is no last4 the text names
        ("Card payment on 14 March 2026.", {"last4": None}, {"last4": None}),
        ("Card ending 4417, on 14 March 2026.", {"last4": None}, {"last4": None}),
    ],
)  # fmt: skip
def test_patterned_identifiers(text, before, after):
    value = {"title": "T", **before}
    got, changed = apply_evidence(CITE, text, value)
    assert got == {"title": "T", **after}
    assert sorted(changed) == sorted(k for k in after if after[k] != before.get(k, "absent"))
    jsonschema.validate(got, CITE, format_checker=jsonschema.FormatChecker())


@pytest.mark.parametrize(
    ("text", "after"),
    [
        ("Children's ticket: The Little Prince, 14 Feb 2026.", "child"),
        ("Two women's shirts, size M.", "woman"),
        ("Adult ticket: The Little Prince, 14 Feb 2026.", "standard"),  # no option mentioned
    ],
)
def test_an_irregular_plural_mentions_its_option(text, after):
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["standard", "child", "woman"]}},
        "required": ["kind"],
    }
    got, _ = apply_evidence(schema, text, {"kind": "standard"})
    assert got == {"kind": after}


TEAMS = {
    "type": "object",
    "properties": {
        "home_team": {"type": "string"},
        "away_team": {"type": "string"},
        "provider": {"type": "string"},
        "account_number": {"type": "string"},
    },
    "required": ["home_team", "away_team"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # the role words label the values the other way round: swapped back
        ("Home: Tampere Lynx. Away: Oslo Ravens. Three all.",
         ["Oslo Ravens", "Tampere Lynx"], ["Tampere Lynx", "Oslo Ravens"]),
        ("Cardiff Wildcats (home) 27, Lyon Aigles 12.",
         ["Lyon Aigles", "Cardiff Wildcats"], ["Cardiff Wildcats", "Lyon Aigles"]),
        # right already, or not marked: unchanged
        ("Home: Tampere Lynx. Away: Oslo Ravens.",
         ["Tampere Lynx", "Oslo Ravens"], ["Tampere Lynx", "Oslo Ravens"]),
        ("Halden Rovers 2-3 Eastbrook United.",
         ["Eastbrook United", "Halden Rovers"], ["Eastbrook United", "Halden Rovers"]),
        # marked both ways: the text does not settle it
        ("Home: Oslo Ravens (away) and Tampere Lynx.",
         ["Oslo Ravens", "Tampere Lynx"], ["Oslo Ravens", "Tampere Lynx"]),
    ],
)  # fmt: skip
def test_swapped_roles(text, before, after):
    value = dict(zip(("home_team", "away_team"), before))
    got, _ = apply_evidence(TEAMS, text, value)
    assert got == dict(zip(("home_team", "away_team"), after))


def test_a_role_word_after_a_comma_is_no_mark():
    value = {"home_team": "A", "away_team": "B", "provider": "Telia", "account_number": "5590"}
    text = "A v B. Mobile plan invoice from Telia, account no. 5590 3321."
    assert swapped_roles(TEAMS, TEAMS, value, TextWords(text)) == {}
    value = {**value, "provider": "5590", "account_number": "Telia"}
    text = "A v B. Provider: Telia, account no. 5590 3321."  # a label: swapped
    assert swapped_roles(TEAMS, TEAMS, value, TextWords(text)) == {
        "provider": "Telia",
        "account_number": "5590",
    }


MINUTES = {
    "type": "object",
    "properties": {
        "meeting": {"type": "string"},
        "attendees": {"type": "array", "maxItems": 4, "items": {"type": "string"}},
        "apologies": {"type": "array", "maxItems": 4, "items": {"type": "string"}},
    },
    "required": ["meeting", "attendees", "apologies"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # the list after the label naming the field (its last word), split at commas and "and"
        ("Board. Attending: Åsa Lindqvist, Henrik Berg and Yusuf Demir. Absent with "
         "apologies: Marco Rossi, Elena Petrova.",
         (["Åsa Lindqvist", "Elena Petrova"], ["Marco Rossi", "Henrik Berg"]),
         (["Åsa Lindqvist", "Henrik Berg", "Yusuf Demir"], ["Marco Rossi", "Elena Petrova"])),
        ("Sync. Attendees: Chen Jing, Mateus Oliveira & Fatima Zahra El Idrissi.",
         (["Chen Jing"], []),
         (["Chen Jing", "Mateus Oliveira", "Fatima Zahra El Idrissi"], [])),
        # the same items in another order: unchanged
        ("Sync. Attendees: Chen Jing, Mateus Oliveira.", (["Mateus Oliveira", "Chen Jing"], []),
         (["Mateus Oliveira", "Chen Jing"], [])),
        # a label naming no field ("Present"), a denial, a list over maxItems: unchanged
        ("Sync. Present: Chen Jing, Mateus Oliveira.", (["Chen Jing"], []), (["Chen Jing"], [])),
        # (the denial is no list; the denied array rule, f12, empties the apologies)
        ("Sync. Apologies: none. Attendees: Chen Jing.", (["Chen Jing"], ["Chen Jing"]),
         (["Chen Jing"], [])),
        ("Sync. Attendees: A B, C D, E F, G H, I J.", (["A B"], []), (["A B"], [])),
        # two labels naming the field with different lists: unchanged
        ("Attendees: Chen Jing. Later attendees: Ravi Menon.", (["Chen Jing"], []),
         (["Chen Jing"], [])),
    ],
)  # fmt: skip
def test_label_list(text, before, after):
    value = {"meeting": "M", "attendees": before[0], "apologies": before[1]}
    got, _ = apply_evidence(MINUTES, text, value)
    assert got == {"meeting": "M", "attendees": after[0], "apologies": after[1]}


@pytest.mark.parametrize(
    ("text", "after"),
    [
        ("Sevilla: sunny, maximum 41°C, minimum 24°C.", {"high_c": 41, "low_c": 24}),
        ("Sevilla: sunny, highs of 38 °C and lows of 22 °C.", {"high_c": 38, "low_c": 22}),
    ],
)
def test_maximum_and_minimum_mention_high_and_low(text, after):
    schema = {
        "type": "object",
        "properties": {"high_c": {"type": "number"}, "low_c": {"type": "number"}},
        "required": ["high_c", "low_c"],
    }
    got, _ = apply_evidence(schema, text, {"high_c": 24, "low_c": 24})
    assert got == after


TICKET = {
    "type": "object",
    "properties": {
        "event": {"type": "string"},
        "seat": {
            "type": ["object", "null"],
            "properties": {"section": {"type": ["string", "null"]}, "row": {"type": "string"}},
        },
        "agent": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
    "required": ["event", "seat"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # a nullable object whose name the text mentions only negated: null
        ("Tokyo Electronic Festival. General admission standing ticket, no seat.",
         {"seat": {"section": "Makuhari Messe", "row": "Makuhari"}}, {"seat": None}),
        # mentioned un-negated, or not at all: the model decides
        ("Hamlet. Balcony seat, row C, no refunds.",
         {"seat": {"section": "Balcony", "row": "C"}},
         {"seat": {"section": "Balcony", "row": "C"}}),
        ("Hamlet, 5 March.", {"seat": {"section": "Stalls", "row": "C"}},
         {"seat": {"section": "Stalls", "row": "C"}}),
        # an object that may not be null stays
        ("Hamlet. No agent, no seat.", {"seat": None, "agent": {"name": "Ann"}},
         {"seat": None, "agent": {"name": "Ann"}}),
    ],
)  # fmt: skip
def test_denied_object(text, before, after):
    got, _ = apply_evidence(TICKET, text, {"event": "E", **before})
    assert got == {"event": "E", **after}


MINUTES_DENIED = {
    "type": "object",
    "properties": {
        "meeting": {"type": "string"},
        "attendees": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "apologies": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["meeting", "attendees", "apologies"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # the array's name negated as a word: empty
        ("Weekly sync. Attendees: Chen Jing, Mateus Oliveira. No apologies.",
         ["Chen Jing"], []),
        ("Weekly sync. Attendees: Chen Jing. Apologies: none.", ["Chen Jing"], []),
        # a negation elsewhere in the clause, or no negation: the model decides
        ("Weekly sync. Attendees: Chen Jing. Apologies from Marco Rossi, who could not attend.",
         ["Marco Rossi"], ["Marco Rossi"]),
        ("Weekly sync. Attendees: Chen Jing. Absent with apologies: Marco Rossi.",
         ["Marco Rossi"], ["Marco Rossi"]),
        ("Weekly sync. Attendees: Chen Jing.", ["Marco Rossi"], ["Marco Rossi"]),
    ],
)  # fmt: skip
def test_denied_array(text, before, after):
    value = {"meeting": "Weekly sync", "attendees": ["Chen Jing"], "apologies": before}
    got, _ = apply_evidence(MINUTES_DENIED, text, value)
    assert got["apologies"] == after


def test_a_denied_array_the_schema_needs_items_in_stays():
    text = "Weekly sync. No attendees were recorded. No apologies."
    value = {"meeting": "Weekly sync", "attendees": ["Chen Jing"], "apologies": ["Chen Jing"]}
    got, _ = apply_evidence(MINUTES_DENIED, text, value)
    assert got == {"meeting": "Weekly sync", "attendees": ["Chen Jing"], "apologies": []}
    jsonschema.validate(got, MINUTES_DENIED)


CITATION = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "doi": {"type": "string", "pattern": "^10\\."}},
    "required": ["title"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # a title run on across a sentence end: cut there
        ("Nakamura. 2021. Sparse retrieval at scale. Journal of Information Systems 47: 112.",
         "Sparse retrieval at scale. Journal of Information Systems",
         "Sparse retrieval at scale"),
        # an abbreviation before a name is no sentence end
        ("Seen by Dr. Sato today.", "Dr. Sato", "Dr. Sato"),
        ("Sakura Denki K.K. bills you on Monday.", "Sakura Denki K.K. bills you on",
         "Sakura Denki K.K. bills you on"),
        ("Visit the St. Louis Zoo.", "St. Louis Zoo", "St. Louis Zoo"),
        # a value the text does not write is left to the other rules
        ("Retrieval at scale. Journal of Systems.", "retrieval at scale. Journal",
         "retrieval at scale. Journal"),
    ],
)  # fmt: skip
def test_sentence_cut(text, before, after):
    got, _ = apply_evidence(CITATION, text, {"title": before})
    assert got["title"] == after
