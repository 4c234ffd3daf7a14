"""Three evidence rules found general on the held-out set (``structgen.extraction.evidence``):
an array of enum options holds the options the text mentions un-negated; date fields of an
object and its nested objects on one date take the text's dates in order; a ``format: uri``
field holds a URL the text writes. Hand-checked cases: the reference is the value a reader
takes from the text, and the unchanged object where the text does not settle it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.strings import urls

EXTRAS = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "extras": {
            "type": "array",
            "maxItems": 3,
            "uniqueItems": True,
            "items": {"enum": ["gps", "child_seat", "additional_driver", "snow_chains"]},
        },
    },
    "required": ["name", "extras"],
}
ALL = ["gps", "child_seat", "additional_driver", "snow_chains"]


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # the model closed the array at once: the options the text mentions, text order
        ("Ana Ruiz. Extras: one child seat and GPS navigation.", [], ["child_seat", "gps"]),
        # the model listed the schema's options: only the mentioned one stays
        ("Ana Ruiz asked for an additional driver.", ALL[:3], ["additional_driver"]),
        # a hyphen and a plural still mention the option
        ("Ana Ruiz wants snow-chains.", [], ["snow_chains"]),
        # a negated option is not chosen; nothing else mentioned: empty
        ("Ana Ruiz: no GPS, thanks.", ["gps"], []),
        ("Ana Ruiz, no extras requested.", ["gps", "child_seat"], []),
        # more mentioned options than maxItems: the rule does not decide
        ("GPS, child seat, additional driver and snow chains for Ana Ruiz.", [], []),
        # already right: unchanged
        ("Ana Ruiz wants GPS.", ["gps"], ["gps"]),
    ],
)
def test_an_enum_array_holds_the_mentioned_options(text, before, after):
    value = {"name": "Ana Ruiz", "extras": before}
    out, changed = apply_evidence(EXTRAS, text, value)
    assert out["extras"] == after
    assert ("extras" in changed) == (before != after)
    jsonschema.validate(out, EXTRAS)


def test_an_enum_array_below_min_items_is_left_to_the_model():
    schema = json.loads(json.dumps(EXTRAS))
    schema["properties"]["extras"]["minItems"] = 1
    out, changed = apply_evidence(schema, "Ana Ruiz, no extras.", {"name": "A", "extras": ["gps"]})
    assert out["extras"] == ["gps"] and changed == []


RENTAL = {
    "type": "object",
    "properties": {
        "renter": {"type": "string"},
        "pickup": {
            "type": "object",
            "properties": {
                "place": {"type": "string"},
                "date": {"type": "string", "format": "date"},
            },
            "required": ["place", "date"],
        },
        "return_date": {"type": "string", "format": "date"},
    },
    "required": ["renter", "pickup", "return_date"],
}


@pytest.mark.parametrize(
    ("text", "held", "after"),
    [
        # both on the pickup date: the text's two dates in order
        (
            "Pick up at Kraków Airport on 12 July 2026, return by 19 July 2026.",
            ("2026-07-12", "2026-07-12"),
            ("2026-07-12", "2026-07-19"),
        ),
        (
            "Collection 2026-09-01 at the depot; drop-off on September 4, 2026.",
            ("2026-09-04", "2026-09-04"),
            ("2026-09-01", "2026-09-04"),
        ),
        # the text writes one date: the rule does not decide
        ("Pick up at the depot on 12 July 2026.", ("2026-07-12", "2026-07-12"), None),
        # different dates already: unchanged
        (
            "Pick up on 12 July 2026, return by 19 July 2026.",
            ("2026-07-19", "2026-07-12"),
            None,
        ),
    ],
)
def test_nested_date_fields_on_one_date_take_the_text_order(text, held, after):
    value = {"renter": "Ana", "pickup": {"place": "depot", "date": held[0]}, "return_date": held[1]}
    out, changed = apply_evidence(RENTAL, text, value)
    want = held if after is None else after
    assert (out["pickup"]["date"], out["return_date"]) == want
    assert bool(changed) == (after is not None and after != held)


TALK = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "slides": {"type": ["string", "null"], "format": "uri"},
        "page": {"type": "string", "format": "uri"},
    },
    "required": ["title", "slides"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # a scheme the grammar let through; the text writes one URL: that URL
        (
            "Keynote: Small Models. Slides at https://conf.example.org/talks/small.",
            {"title": "Small Models", "slides": "keynote:"},
            {"title": "Small Models", "slides": "https://conf.example.org/talks/small"},
        ),
        # no URL in the text: null (nullable), left out (optional, not nullable)
        (
            "Keynote: Small Models, Main Hall.",
            {"title": "Small Models", "slides": "keynote:", "page": "hall:main"},
            {"title": "Small Models", "slides": None},
        ),
        # a URL the text writes: unchanged
        (
            "Slides (http://a.example/x) and page http://b.example/y.",
            {"title": "T", "slides": "http://a.example/x", "page": "http://b.example/y"},
            {"title": "T", "slides": "http://a.example/x", "page": "http://b.example/y"},
        ),
        # two URLs, neither held: the rule does not decide
        (
            "See http://a.example/x or http://b.example/y.",
            {"title": "T", "slides": "keynote:"},
            {"title": "T", "slides": "keynote:"},
        ),
    ],
)
def test_a_uri_field_holds_a_url_of_the_text(text, before, after):
    out, _ = apply_evidence(TALK, text, before)
    assert out == after


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Slides at https://x.example/a.", ["https://x.example/a"]),
        (
            "(see http://x.example/a_(b)) and ftp://f.example/z;",
            ["http://x.example/a_(b)", "ftp://f.example/z"],
        ),
        ("mail me: a@b.example, or www.example.com", []),
        ("https://x.example/a and again https://x.example/a!", ["https://x.example/a"]),
    ],
)
def test_urls_as_the_text_writes_them(text, found):
    assert urls(text) == found


CONTACT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": ["string", "null"], "format": "email"},
        "reply_to": {"type": "string", "format": "email"},
    },
    "required": ["name", "email"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # the text writes no address: an invented one is null (nullable) / left out
        (
            "Please contact Élodie Marchand at 06 12 34 56 78.",
            {"name": "Élodie Marchand", "email": "elodemarchand@gmail.com", "reply_to": "a@b.co"},
            {"name": "Élodie Marchand", "email": None},
        ),
        # the text writes one address: that one
        (
            "Finder: Mateo Rossi (mateo.rossi@example.net).",
            {"name": "Mateo Rossi", "email": "mateo@example.com"},
            {"name": "Mateo Rossi", "email": "mateo.rossi@example.net"},
        ),
        # an address the text writes (case aside): unchanged
        (
            "Write to Ana.Ruiz@Example.org today.",
            {"name": "Ana Ruiz", "email": "ana.ruiz@example.org"},
            {"name": "Ana Ruiz", "email": "ana.ruiz@example.org"},
        ),
        # two addresses, neither held: the rule does not decide
        (
            "Either a@x.example or b@y.example.",
            {"name": "Ana", "email": "c@z.example"},
            {"name": "Ana", "email": "c@z.example"},
        ),
    ],
)
def test_an_invented_email_address_goes(text, before, after):
    out, _ = apply_evidence(CONTACT, text, before)
    assert out == after


RETURN = {
    "type": "object",
    "properties": {"order": {"type": "integer"}, "pickup_requested": {"type": "boolean"}},
    "required": ["order", "pickup_requested"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # "requested", like "required" and "needed", need not be written for a mention
        ("Order 4471902. No courier pickup needed.", True, False),
        ("Order 118274; she drops the parcel off herself, so no pickup.", True, False),
        ("Order 90311. Please arrange a pickup from his address.", False, True),
        ("Order 90311, sent back by post.", True, True),  # unmentioned: the model's value
    ],
)
def test_a_requested_boolean_follows_its_mention(text, before, after):
    out, _ = apply_evidence(RETURN, text, {"order": 1, "pickup_requested": before})
    assert out["pickup_requested"] is after
