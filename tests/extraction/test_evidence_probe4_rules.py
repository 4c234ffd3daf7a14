"""General evidence rules from the fourth probe set's failures (session 32): an order
stated later in a date's sentence, a role word after an article in brackets, "declined"
as a negation and "at no charge" as none, a named date replacing another held date, and
arrays of measured goods (a name, a quantity and a unit) read from the text's list;
values read off the texts by hand."""

from __future__ import annotations

from decimal import Decimal

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.counted import (
    dosed_fields,
    dosed_goods,
    dosed_items,
    measured_goods,
    unit_fields,
    unit_items,
)
from structgen.extraction.evidence.dates import renamed_date, stated_order
from structgen.extraction.evidence.names import dangling_cut, date_tail, possessive_cut
from structgen.extraction.evidence.options import bool_value
from structgen.extraction.evidence.roles import swapped_roles
from structgen.extraction.evidence.strings import label_list
from structgen.extraction.evidence.text import TextWords, name_stems
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 80}
DATE = {"type": "string", "format": "date"}
NDATE = {"type": ["string", "null"], "format": "date"}


# ---- the order stated later in the date's sentence ----


@pytest.mark.parametrize(
    ("text", "held", "want"),
    [
        (
            "Hire period: 04/05/2027 to 07/05/2027 (dates written day/month/year).",
            "2027-04-05",
            "2027-05-04",
        ),
        (
            "Hire period: 04/05/2027 to 07/05/2027 (dates written day/month/year).",
            "2027-07-05",
            "2027-05-07",
        ),
        ("Seed order by 1/11/2026 (D/M/Y).", "2026-01-11", "2026-11-01"),
        ("Return on 03/02/2027 (month first).", "2027-02-03", "2027-03-02"),
        ("Return on 03/02/2027, day first.", "2027-03-02", "2027-02-03"),
        ("Paid 03/02/2027 (mm/dd/yyyy).", "2027-02-03", "2027-03-02"),  # right after it
    ],
)
def test_an_order_stated_later_in_the_sentence(text, held, want):
    assert stated_order(_obj(d=DATE), DATE, held, text) == want


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("Return on 03/02/2027. Dates are day/month/year.", "2027-03-02"),  # next sentence
        ("Return on 03/02/2027 (day/day/year).", "2027-03-02"),  # no order in it
        ("Return on 03/02/2027 (day first).", "2027-02-03"),  # held already
        ("Return on 2027-03-02 (day first).", "2027-03-02"),  # not ambiguous
    ],
)
def test_what_the_later_order_leaves(text, held):
    assert stated_order(_obj(d=DATE), DATE, held, text) is None


# ---- a role word after an article, in brackets ----


def test_a_role_after_an_article_in_brackets_marks_the_value():
    schema = _obj(renter=STR, company=STR)
    text = (
        "Equipment hire agreement between HireHub Tools Ltd (the company) and "
        "Siobhán Murphy (the hirer)."
    )
    value = {"renter": "HireHub Tools Ltd", "company": "Siobhán Murphy"}
    assert swapped_roles(schema, schema, value, TextWords(text)) == {
        "renter": "Siobhán Murphy",
        "company": "HireHub Tools Ltd",
    }
    kept = {"renter": "Siobhán Murphy", "company": "HireHub Tools Ltd"}
    assert swapped_roles(schema, schema, kept, TextWords(text)) == {}
    # more than an article and the role word in the brackets: no mark
    text = "Between HireHub Tools Ltd (the company in Leeds) and Siobhán Murphy."
    assert swapped_roles(schema, schema, value, TextWords(text)) == {}


# ---- "declined" negates; "no charge" does not ----


@pytest.mark.parametrize(
    ("text", "name", "want"),
    [
        ("Travel insurance was declined.", "travel_insurance", False),
        ("The renter declined insurance.", "insurance", False),
        ("She refused the insurance.", "insurance", False),
        ("Damage waiver insurance: accepted.", "insurance", True),
        ("Delivery to site is included at no charge.", "delivery_included", True),
        ("Delivery is included at no extra cost.", "delivery_included", True),
        ("Delivery is not included.", "delivery_included", False),
        ("No delivery.", "delivery_included", False),
    ],
)
def test_declined_negates_and_no_charge_does_not(text, name, want):
    assert bool_value(TextWords(text), name_stems(name)) is want


def test_declined_insurance_in_a_whole_object():
    schema = _obj(travel_insurance={"type": "boolean"}, delivery_included={"type": "boolean"})
    text = "Travel insurance was declined. Delivery to site is included at no charge."
    value = {"travel_insurance": True, "delivery_included": False}
    got, changed = apply_evidence(schema, text, value)
    assert got == {"travel_insurance": False, "delivery_included": True}
    assert changed == ["travel_insurance", "delivery_included"]


# ---- a named date replacing another held date ----


def test_a_named_date_replaces_a_different_held_date():
    schema = _obj(meeting_date=DATE, next_meeting=NDATE)
    text = "Committee meeting held on 2026-10-13. Next meeting: 10 November 2026."
    value = {"meeting_date": "2026-10-13", "next_meeting": "2026-10-13"}
    doc = TextWords(text)
    assert renamed_date(schema, schema, "next_meeting", value, doc) == "2026-11-10"
    got, _ = apply_evidence(schema, text, value)
    assert got == {"meeting_date": "2026-10-13", "next_meeting": "2026-11-10"}


def test_a_name_run_in_another_order_names_the_date():
    schema = _obj(date_of_birth=DATE, discharge_date=DATE)
    text = "DOB 1988-07-30. Date of discharge: 11/19/2026 (month first)."
    value = {"date_of_birth": "1988-07-30", "discharge_date": "1988-07-30"}
    assert renamed_date(schema, schema, "discharge_date", value, TextWords(text)) == "2026-11-19"


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("Next meeting: 10 November 2026.", "2026-11-10"),  # held already
        ("Next meeting: 10 November or 17 November 2026.", "2026-10-13"),  # two dates
        ("Next meeting to be confirmed; held 2026-10-13.", "2026-10-13"),  # none named
        ("Next meeting: 03/02/2027.", "2026-10-13"),  # ambiguous
    ],
)
def test_what_the_renamed_date_leaves(text, held):
    schema = _obj(meeting_date=DATE, next_meeting=NDATE)
    value = {"meeting_date": held, "next_meeting": held}  # the sibling's date
    assert renamed_date(schema, schema, "next_meeting", value, TextWords(text)) is None
    value = {"meeting_date": held, "next_meeting": None}
    assert renamed_date(schema, schema, "next_meeting", value, TextWords(text)) is None


def test_a_date_no_sibling_holds_stays():
    schema = _obj(meeting_date=DATE, next_meeting=NDATE)
    text = "Committee meeting held on 2026-10-13. Next meeting: 10 November 2026."
    value = {"meeting_date": "2026-10-13", "next_meeting": "2026-11-11"}  # the model's reading
    assert renamed_date(schema, schema, "next_meeting", value, TextWords(text)) is None
    assert apply_evidence(schema, text, value)[0] == value


# ---- arrays of measured goods ----


def _goods_schema(unit: dict, quantity: dict | None = None) -> dict:
    item = _obj(
        name={"type": "string", "maxLength": 40},
        quantity=quantity or {"type": "number", "minimum": 0},
        unit=unit,
    )
    return _obj(ingredients={"type": "array", "minItems": 1, "maxItems": 10, "items": item})


FREE_UNIT = {"type": ["string", "null"], "maxLength": 20}
ENUM_UNIT = {"enum": ["g", "kg", "ml", "l", "tsp", "tbsp", "cup", None]}


def test_the_measured_goods_shape():
    schema = _goods_schema(FREE_UNIT)
    items = schema["properties"]["ingredients"]["items"]
    assert unit_fields(schema, items) == ("name", "quantity", "unit")
    assert unit_fields(
        _goods_schema(ENUM_UNIT), _goods_schema(ENUM_UNIT)["properties"]["ingredients"]["items"]
    ) == ("name", "quantity", "unit")
    four = dict(items, properties=dict(items["properties"], note=STR))
    assert unit_fields(schema, four) is None  # a fourth field
    no_unit = dict(items, properties={"name": STR, "quantity": {"type": "number"}, "size": STR})
    assert unit_fields(schema, no_unit) is None  # no field named unit


def test_measured_goods_in_a_text():
    text = (
        "Prep 20 minutes. Ingredients: three eggs; 150 g caster sugar; 2 lemons, zested; "
        "half a teaspoon of baking powder; two and a half cups flour; 200g butter."
    )
    got = [(q, u, n) for _, _, q, u, n in measured_goods(text)]
    assert got == [
        (Decimal(20), None, "minutes"),
        (Decimal(3), None, "eggs"),
        (Decimal(150), "g", "caster sugar"),
        (Decimal(2), None, "lemons"),
        (Decimal("0.5"), "teaspoon", "baking powder"),
        (Decimal("2.5"), "cups", "flour"),
        (Decimal(200), "g", "butter"),
    ]


def test_a_recipe_list_with_a_free_unit():
    schema = _goods_schema(FREE_UNIT)
    text = (
        "Quick garlic prawns for two: twenty minutes, easy. "
        "300 g prawns, 4 cloves garlic, 30 g butter."
    )
    model = [
        {"name": "Quick garlic prawns for two", "quantity": 4, "unit": "cloves"},
        {"name": "garlic", "quantity": 4, "unit": "g"},
    ]
    want = [
        {"name": "prawns", "quantity": 300, "unit": "g"},
        {"name": "garlic", "quantity": 4, "unit": "cloves"},
        {"name": "butter", "quantity": 30, "unit": "g"},
    ]
    assert unit_items(schema, schema["properties"]["ingredients"], text, model) == want
    got, changed = apply_evidence(schema, text, {"ingredients": model})
    assert got == {"ingredients": want} and "ingredients" in changed


def test_a_recipe_list_with_a_unit_enum():
    schema = _goods_schema(ENUM_UNIT)
    text = (
        "Lemon almond cake for eight people. Heat the oven to 180 °C. Ingredients: three eggs; "
        "150 g caster sugar; 120 ml olive oil; 2 lemons, zested; 200 g ground almonds; "
        "half a teaspoon of baking powder. Bake for 40 minutes."
    )
    model = [
        {"name": "Lemon almond cake", "quantity": 150, "unit": "g"},
        {"name": "eggs", "quantity": 8, "unit": None},
    ]
    got = unit_items(schema, schema["properties"]["ingredients"], text, model)
    assert got == [
        {"name": "eggs", "quantity": 3, "unit": None},
        {"name": "caster sugar", "quantity": 150, "unit": "g"},
        {"name": "olive oil", "quantity": 120, "unit": "ml"},
        {"name": "lemons", "quantity": 2, "unit": None},
        {"name": "ground almonds", "quantity": 200, "unit": "g"},
        {"name": "baking powder", "quantity": 0.5, "unit": "tsp"},
    ]
    jsonschema.validate({"ingredients": got}, schema)


@pytest.mark.parametrize(
    ("schema", "text", "why"),
    [
        (
            _goods_schema(FREE_UNIT),
            "Serves 4: 800 g tomatoes, 1 onion. Later: 2 tbsp oil, 500 ml stock.",
            "two lists as long",
        ),
        (
            _goods_schema(FREE_UNIT),
            "Add 700 g rice, 2 tbsp oil and 500 ml stock.",
            "no model item in it",
        ),
        (
            _goods_schema({"enum": ["g", "ml"]}),
            "Add 800 g tomatoes, 2 tbsp oil, 500 ml stock.",
            "tbsp: no option",
        ),
        (
            _goods_schema({"type": "string", "maxLength": 20}),
            "Add 800 g tomatoes, 1 onion, 500 ml stock.",
            "no unit, not nullable",
        ),
        (_goods_schema(FREE_UNIT), "Add 800 g tomatoes to the pot.", "one good, no list"),
        (
            _goods_schema(FREE_UNIT, {"type": "integer", "minimum": 1}),
            "Add 800 g tomatoes, 1.5 l stock.",
            "1.5 refused",
        ),
    ],
)
def test_what_the_measured_goods_rule_leaves(schema, text, why):
    model = [{"name": "tomatoes", "quantity": 800, "unit": "g"}]
    assert unit_items(schema, schema["properties"]["ingredients"], text, model) is None, why


def test_the_measured_goods_anchor_by_quantity_and_unit():
    schema = _goods_schema(ENUM_UNIT)
    text = "Lemon cake. Ingredients: three eggs; 150 g caster sugar; 120 ml olive oil."
    model = [{"name": "Lemon cake", "quantity": 150, "unit": "g"}]  # the title, 150 g
    got = unit_items(schema, schema["properties"]["ingredients"], text, model)
    assert got == [
        {"name": "eggs", "quantity": 3, "unit": None},
        {"name": "caster sugar", "quantity": 150, "unit": "g"},
        {"name": "olive oil", "quantity": 120, "unit": "ml"},
    ]
    other = [{"name": "Lemon cake", "quantity": 150, "unit": "ml"}]  # another unit: none
    assert unit_items(schema, schema["properties"]["ingredients"], text, other) is None


# ---- a name run on into a date of birth; a value ending inside the next phrase ----


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("Ingrid Søndergaard, born 14/03/1951 (day/month/year)", "Ingrid Søndergaard"),
        ("Ann Lee born 3 May 1990", "Ann Lee"),
        ("Letter, dated 2 June 2026", "Letter"),
        ("Toronto on Feb 21st", "Toronto"),
        ("Event (12 May 2026)", None),  # no joining word before the date
        ("Ann Lee (day/month/year)", None),  # no date
    ],
)
def test_a_date_tail_after_born_and_before_a_note(value, want):
    assert date_tail({}, STR, value) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("Trip plan for Dev Anand Krishnan (booking", "Trip plan for Dev Anand Krishnan"),
        ("HIST 214: The", "HIST 214"),
        ("Pride, and", "Pride"),
        ("Hall; of", "Hall"),
        ("Hotel Nimbus the", None),  # no punctuation before it: the name-run rule's
        ("X (a b c", None),  # three words after the bracket: not a cut-off end
        ("Tea (green)", None),  # closed
        ("Portland, OR", None),  # a state, not "or"
        ("Vitamin A", None),  # a capital A is no article
        ("The", None),  # nothing left
        ("Salt and Pepper", None),
    ],
)
def test_a_dangling_end(value, want):
    assert dangling_cut({}, STR, value) == want


# ---- a role word before a preposition and the value ----


def test_a_role_before_a_preposition_marks_the_value():
    schema = _obj(port_of_loading=STR, port_of_discharge=STR)
    text = "The MV Santa Inês, sailing from Santos on 8 January 2027 and discharging at Antwerp."
    value = {"port_of_loading": "Antwerp", "port_of_discharge": "Santos"}
    assert swapped_roles(schema, schema, value, TextWords(text)) == {
        "port_of_loading": "Santos",
        "port_of_discharge": "Antwerp",
    }
    # a longer word with the role as its prefix is no mark: "membership at"
    schema = _obj(member=STR, gym=STR)
    text = "Hi Rahul, your student membership at Peak Performance Gym starts today."
    value = {"member": "Rahul", "gym": "Peak Performance Gym"}
    assert swapped_roles(schema, schema, value, TextWords(text)) == {}


# ---- a title keeps its possessive; a listed name loses its note ----


def test_a_title_keeps_its_possessive():
    schema = _obj(title=STR, owner=STR)
    value = "Grandma Halina's potato soup"
    assert possessive_cut(schema, STR, value, "title") is None
    assert possessive_cut(schema, STR, value, "recipe_title") is None
    assert possessive_cut(schema, STR, value, "owner") == "Grandma Halina"


def test_a_listed_name_without_its_note():
    sub = _obj(
        present={"type": "array", "items": STR},
        absent={"type": "array", "items": STR},
    )
    text = "Present: Margit Szabó, Owen Pryce. Absent: Bronwen Lewis (unwell). Chair: M."
    node = {"present": ["Margit Szabó", "Owen Pryce"], "absent": []}
    assert label_list(sub, sub, "absent", node, text) == ["Bronwen Lewis"]
    text = "Absent: Bronwen Lewis (unwell), Ian Roy (travelling)."
    assert label_list(sub, sub, "absent", node, text) == ["Bronwen Lewis", "Ian Roy"]


# ---- arrays of dosed goods ----


def _dosed_schema(unit: dict | None = None) -> dict:
    item = _obj(
        name={"type": "string", "maxLength": 40},
        dose={"type": "number", "exclusiveMinimum": 0},
        unit=unit or {"enum": ["mg", "mcg", "ml", "g", "units"]},
        frequency={"enum": ["once_daily", "twice_daily", "as_needed", "weekly"]},
    )
    return _obj(medications={"type": "array", "minItems": 1, "maxItems": 6, "items": item})


def test_the_dosed_goods_shape():
    schema = _dosed_schema()
    items = schema["properties"]["medications"]["items"]
    assert dosed_fields(schema, items) == ("name", "dose", "unit", "frequency")
    # a measurement (a free string unit and a flag) is the measurement rule's
    lab = _obj(test=STR, value={"type": "number"}, unit=STR, flag={"enum": ["low", "high"]})
    assert dosed_fields(lab, lab) is None
    three = _obj(name=STR, dose={"type": "number"}, unit={"enum": ["mg", "g"]})
    assert dosed_fields(three, three) is None


def test_dosed_goods_in_a_text():
    text = (
        "Please take: prednisolone forty milligrams once daily for five days; salbutamol "
        "inhaler 100 mcg, two puffs as needed; alendronic acid 70 mg once a week. Weight 82 kg."
    )
    got = [(n, d, u) for _, _, n, d, u in dosed_goods(text)]
    assert got == [
        ("prednisolone", Decimal(40), "milligrams"),
        ("salbutamol inhaler", Decimal(100), "mcg"),
        ("alendronic acid", Decimal(70), "mg"),
        ("Weight", Decimal(82), "kg"),
    ]


def test_a_medication_list_with_schedules():
    schema = _dosed_schema()
    text = (
        "Continue the following: bisoprolol 5 mg once a day in the morning; apixaban "
        "2.5 mg twice daily; furosemide 20 mg, one tablet each morning. Paracetamol 500 mg "
        "may be taken when needed for pain. Alendronic acid 70 mg once a week, on Sundays."
    )
    model = [{"name": "bisoprolol", "dose": 1951, "unit": "mg", "frequency": "once_daily"}]
    got = dosed_items(schema, schema["properties"]["medications"], text, model)
    assert got == [
        {"name": "bisoprolol", "dose": 5, "unit": "mg", "frequency": "once_daily"},
        {"name": "apixaban", "dose": 2.5, "unit": "mg", "frequency": "twice_daily"},
        {"name": "furosemide", "dose": 20, "unit": "mg", "frequency": "once_daily"},
        {"name": "Paracetamol", "dose": 500, "unit": "mg", "frequency": "as_needed"},
        {"name": "Alendronic acid", "dose": 70, "unit": "mg", "frequency": "weekly"},
    ]
    out, changed = apply_evidence(schema, text, {"medications": model})
    assert out == {"medications": got} and "medications" in changed


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Take bisoprolol 5 mg daily with food.", "no schedule option written"),
        ("Take bisoprolol 5 mg once a day or twice daily.", "two options"),
        ("Take bisoprolol 5 mg once a day; aspirin 75 mg, when to take it unknown.", "one without"),
        ("Take metoprolol 5 mg once a day.", "no model item in it"),
        ("Take bisoprolol 5 oz once a day.", "oz: no unit option"),
    ],
)
def test_what_the_dosed_goods_rule_leaves(text, why):
    schema = _dosed_schema()
    model = [{"name": "bisoprolol", "dose": 1, "unit": "mg", "frequency": "weekly"}]
    assert dosed_items(schema, schema["properties"]["medications"], text, model) is None, why
