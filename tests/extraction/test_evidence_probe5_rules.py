"""General evidence rules from the fifth probe set's failures (session 33): a list label
whose first word names the field, time-unit conversion of a copied number, "and a half"
numerals, and arrays of day numbers (hours per weekday); values read off the texts by
hand."""

from __future__ import annotations

from decimal import Decimal

import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.numbers import unit_value, with_halves
from structgen.extraction.evidence.records import day_number_fields, day_number_items
from structgen.extraction.evidence.strings import label_list
from structgen.fsm.numerals import numeral_spans
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 60}
LIST = {"type": "array", "maxItems": 6, "items": STR}
DAYS = {"enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}
HOURS = {"type": "number", "minimum": 0, "maximum": 24}


def _entries(max_items: int = 7) -> dict:
    return {"type": "array", "maxItems": max_items, "items": _obj(day=DAYS, hours=HOURS)}


# ---- the label list named by its first word ----


@pytest.mark.parametrize(
    ("text", "name", "want"),
    [
        ("Shots given so far: measles and tetanus. Next visit in May.", "shots",
         ["measles", "tetanus"]),
        ("Boosters up to date: hepatitis B, polio and tetanus.", "boosters",
         ["hepatitis B", "polio", "tetanus"]),
        ("Languages spoken: Basque, Spanish.", "languages", ["Basque", "Spanish"]),
        # the last word names it, as before
        ("Known allergies: nuts and shellfish.", "allergies", ["nuts", "shellfish"]),
    ],
)  # fmt: skip
def test_label_list_first_word(text, name, want):
    schema = _obj(**{name: LIST, "note": STR})
    assert label_list(schema, schema, name, {name: [], "note": "x"}, text) == want


@pytest.mark.parametrize(
    "text",
    [
        "Shots Clinic Hours: nine and ten.",  # the words after it are not lowercase
        "Shots given to the two children today: measles and tetanus.",  # five words on
        "Past shots: measles and tetanus.",  # a two-word label whose last word is not it
    ],
)
def test_label_list_first_word_not_taken(text):
    schema = _obj(shots=LIST)
    got = label_list(schema, schema, "shots", {"shots": []}, text)
    if text.startswith("Past"):
        assert got == ["measles", "tetanus"]  # "shots" is its last word: the old rule
    else:
        assert got is None


def test_label_list_first_word_names_a_sibling_too():
    schema = _obj(shots=LIST, shots_due=LIST)
    text = "Shots given so far: measles and tetanus."
    assert label_list(schema, schema, "shots", {"shots": [], "shots_due": []}, text) is None


# ---- time units ----


@pytest.mark.parametrize(
    ("name", "typ", "value", "text", "want"),
    [
        ("warranty_months", "integer", 2, "Cover: two years from purchase.", 24),
        ("age_years", "number", 18, "a puppy of about eighteen months", Decimal("1.5")),
        ("prep_minutes", "integer", 1, "Prep takes 1 hour.", 60),
        ("cook_minutes", "integer", 2, "Bake for 2 hrs.", 120),
        ("duration_days", "integer", 3, "a 3-week course", 21),
        ("stay_hours", "number", 2, "a stay of 2 days", 48),
    ],
)
def test_unit_value_converts(name, typ, value, text, want):
    got = unit_value({}, {"type": typ, "minimum": 0}, name, value, text, numeral_spans(text))
    assert got == want


@pytest.mark.parametrize(
    ("name", "typ", "value", "text"),
    [
        ("age_years", "integer", 18, "about eighteen months old"),  # 1.5 is no integer
        ("age_years", "integer", 4, "4 years old"),  # the field's own unit
        ("age_years", "integer", 4, "4 years old, 4 months at the shelter"),  # both
        ("age_years", "integer", 4, "bed 4"),  # written bare
        ("nights", "integer", 4, "4 days"),  # the name is no unit
        ("length_days", "integer", 2, "2 months"),  # months are no whole number of days
        ("term_years", "number", 1, "1 month"),  # 0.0833...: no value the text gives
        ("stay_hours", "integer", 2, "2 weeks"),  # 336 > maximum
        ("age_years", "integer", True, "2 years"),  # not a number
    ],
)
def test_unit_value_leaves(name, typ, value, text):
    prop = {"type": typ, "minimum": 0, "maximum": 120}
    assert unit_value({}, prop, name, value, text, numeral_spans(text)) is None


def test_with_halves():
    text = "thirty-seven and a half in total, 2 and a half of them late; 3 and a halfpenny"
    got = [(text[a:b], v) for a, b, v in with_halves(numeral_spans(text), text)]
    assert got[0] == ("thirty-seven and a half", (Decimal("37.5"),))
    assert got[1] == ("2 and a half", (Decimal("2.5"),))
    assert got[2] == ("3", (Decimal("3"),))


# ---- day numbers ----


def test_day_number_fields():
    assert day_number_fields({}, _obj(day=DAYS, hours=HOURS)) == (
        "day",
        {d: d[:3] for d in ("monday", "tuesday", "wednesday", "thursday", "friday",
                            "saturday", "sunday")},
        "hours",
    )  # fmt: skip
    bad = [
        _obj(day=DAYS),
        _obj(day=DAYS, hours=HOURS, note=STR),
        _obj(day={"enum": ["a", "b"]}, hours=HOURS),
        _obj(day=STR, hours=HOURS),
    ]
    for items in bad:
        with pytest.raises(ValueError):
            day_number_fields({}, items)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (
            "Rota from Monday 3 May. Mon: 6 h, Tue 7.5 h, Fri - 4 h; weekend off.",
            [("mon", 6), ("tue", 7.5), ("fri", 4)],
        ),
        (
            "Hours: Tuesday nine, Wednesday the site was shut, Thursday six and a half, "
            "Saturday two. That is seventeen and a half.",
            [("tue", 9), ("thu", 6.5), ("sat", 2)],
        ),
    ],
)
def test_day_number_items(text, want):
    schema = _obj(entries=_entries())
    got = day_number_items(schema, schema["properties"]["entries"], text, [])
    assert got == [{"day": d, "hours": h} for d, h in want]
    anchored = [{"day": "sun", "hours": want[-1][1]}]
    assert day_number_items(schema, schema["properties"]["entries"], text, anchored) == got


@pytest.mark.parametrize(
    ("text", "current"),
    [
        ("Mon 6 h, Tue 7 h.", [{"day": "mon", "hours": 3}]),  # no model number among them
        ("Mon 6 h, Mon 7 h.", []),  # a day twice
        ("Mon 6 h. Other notes. Tue 7 h.", []),  # no run of two
        ("Mon 6 h, Tue 7 h. Notes. Wed 3 h, Thu 2 h.", []),  # two runs as long
        ("We met Monday 9 November, Tuesday 10 November.", []),  # dates' days
        ("He sat 4 hours, then sat 5 more.", []),  # "sat" in lower case is a verb
        ("Mon 30 h, Tue 7 h.", []),  # 30 > maximum
    ],
)
def test_day_number_items_leaves(text, current):
    schema = _obj(entries=_entries())
    assert day_number_items(schema, schema["properties"]["entries"], text, current) is None


def test_day_number_items_max_items():
    schema = _obj(entries=_entries(max_items=2))
    text = "Mon 6 h, Tue 7 h, Wed 8 h."
    assert day_number_items(schema, schema["properties"]["entries"], text, []) is None


def test_apply_evidence_end_to_end():
    schema = _obj(
        worker=STR,
        entries=_entries(),
        trial_months={"type": "integer", "minimum": 0, "maximum": 24},
        tools=LIST,
    )
    text = (
        "Worker: Ilse Brandt. Mon 5 h, Wed 6 h, Thu 7.5 h. Trial period: one year. Tools "
        "handed out today: drill and ladder."
    )
    model = {"worker": "Ilse Brandt", "entries": [{"day": "wed", "hours": 6}],
             "trial_months": 1, "tools": []}  # fmt: skip
    got, changed = apply_evidence(schema, text, model)
    assert got["entries"] == [
        {"day": "mon", "hours": 5},
        {"day": "wed", "hours": 6},
        {"day": "thu", "hours": 7.5},
    ]
    assert got["tools"] == ["drill", "ladder"]
    assert got["trial_months"] == 12  # "one year"
    assert {"entries", "tools", "trial_months"} <= set(changed)


# ---- a currency sign cut off, and placeholders ----


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("Brightwell Hardware for €", "Brightwell Hardware"),
        ("Kiosk Nord at £", "Kiosk Nord"),
        ("Old Mill Books $", "Old Mill Books"),
        ("Old Mill Books", None),  # nothing cut off
        ("Fund for $5", None),  # an amount follows the sign
        ("€", None),  # nothing would be left
    ],
)
def test_dangling_currency(value, want):
    from structgen.extraction.evidence.names import dangling_cut

    assert dangling_cut({}, STR, value) == want


@pytest.mark.parametrize(
    ("prop", "value", "want"),
    [
        (STR, "unknown", True),
        (STR, " N/A. ", True),
        (STR, "TBC", True),
        (STR, "Unknown Pleasures", False),
        ({"enum": ["unknown", "cat"]}, "unknown", False),  # an option, not a placeholder
        (STR, None, False),
    ],
)
def test_placeholder(prop, value, want):
    from structgen.extraction.evidence.nulls import placeholder

    assert placeholder({}, prop, value) is want


def test_placeholder_in_apply_evidence():
    nullable = {"type": ["string", "null"], "maxLength": 40}
    schema = _obj(pet=STR, breed=nullable, colour=STR)
    text = "Pet: Pixel. Breed unknown. Colour unknown too."
    got, changed = apply_evidence(
        schema, text, {"pet": "Pixel", "breed": "unknown", "colour": "unknown"}
    )
    assert got == {"pet": "Pixel", "breed": None, "colour": "unknown"}  # colour: required
    assert changed == ["breed"]


def test_sibling_cut_takes_the_currency_sign():
    from structgen.extraction.evidence.names import sibling_cut

    schema = _obj(shop=STR, price={"type": "number"})
    text = "Bought at Brightwell Hardware for € 89,50 on Friday."
    node = {"shop": "Brightwell Hardware for € 89,50", "price": 89.5}
    assert sibling_cut(schema, schema, node, text) == {"shop": "Brightwell Hardware"}


# ---- durations ----

NDAYS = {"type": ["integer", "null"], "minimum": 1}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Take one tablet three times a day for 7 days.", 7),
        ("Apply twice daily for fourteen days. Refills: none.", 14),
        ("Use for two weeks, then stop.", 14),
        ("One drop a day for 10 days, then for another 10 days at half dose.", 10),
    ],
)
def test_duration_value(text, want):
    from structgen.extraction.evidence.numbers import duration_value

    got = duration_value({}, NDAYS, "duration_days", None, text, numeral_spans(text))
    assert got == want


@pytest.mark.parametrize(
    ("value", "text", "prop"),
    [
        (7, "for 7 days", NDAYS),  # the model's value stays
        (None, "for 7 days, then for 5 days", NDAYS),  # two durations
        (None, "7 days", NDAYS),  # no "for"
        (None, "for 2 months", NDAYS),  # months are no whole number of days
        (None, "for 7 days", {"type": "integer", "minimum": 1}),  # not nullable
        (None, "for 70 days", {"type": ["integer", "null"], "maximum": 30}),  # bounds
    ],
)
def test_duration_value_leaves(value, text, prop):
    from structgen.extraction.evidence.numbers import duration_value

    assert duration_value({}, prop, "duration_days", value, text, numeral_spans(text)) is None


def test_duration_in_apply_evidence():
    schema = {
        "type": "object",
        "properties": {"medicine": STR, "duration_days": NDAYS},
        "required": ["medicine"],
    }
    text = "Eye drops, twice daily for two weeks."
    got, changed = apply_evidence(schema, text, {"medicine": "Eye drops"})
    assert got == {"medicine": "Eye drops", "duration_days": 14}
    assert changed == ["duration_days"]
