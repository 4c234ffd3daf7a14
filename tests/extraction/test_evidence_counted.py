"""Arrays of counted goods read from the text's item phrases
(``structgen.extraction.evidence.counted``), against items read off the texts by hand."""

from __future__ import annotations

from decimal import Decimal

import jsonschema

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.counted import (
    counted_fields,
    counted_items,
    implied_flags,
    item_phrases,
    keyed_runs,
    measured_fields,
    measured_items,
    measurements,
    pair_fields,
    pair_items,
    quoted_items,
    quoted_runs,
)

STR = {"type": "string", "maxLength": 80}
INT = {"type": "integer", "minimum": 1}
NUM = {"type": "number", "minimum": 0}


def _array(max_items: int = 10, **props) -> dict:
    return {
        "type": "array",
        "maxItems": max_items,
        "items": {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        },
    }


GOODS = _array(description=STR, quantity=INT, unit_value=NUM)
RETURNS = _array(product=STR, quantity=INT)


def _schema(array: dict) -> dict:
    return {
        "type": "object",
        "properties": {"sender": STR, "items": array},
        "required": ["sender", "items"],
        "additionalProperties": False,
    }


CUSTOMS = (
    "CN23. Sender: Łukasz Nowak. Category of item: Gift. Contents: 2 x wool scarf, value "
    "35.00 EUR each; 1 x jar of forest honey, value 12.50 EUR; 3 x hand-painted Christmas "
    "ornament, value 8.00 EUR each. Total declared value: 106.50 EUR. Date: 28.11.2026."
)
EXPORT = (
    "Export declaration, air waybill 7781 2290 4415. Lines: 12 x SKU-4471 tea bowl @ USD "
    "18.40; 4 x SKU-5502 sake set @ USD 65.00. Invoice total USD 480.80."
)


def test_fields_of_the_item_shape():
    assert counted_fields({}, GOODS["items"]) == ("quantity", "description", "unit_value")
    assert counted_fields({}, RETURNS["items"]) == ("quantity", "product", None)
    # two free strings (a recipe's name and unit), a dose that is no count: not this shape
    assert counted_fields({}, _array(name=STR, quantity=NUM, unit=STR)["items"]) is None
    assert counted_fields({}, _array(name=STR, dose_mg=INT)["items"]) is None
    # a count that takes fractions is no count of goods
    assert counted_fields({}, _array(name=STR, quantity=NUM)["items"]) is None


def test_phrases_with_their_prices():
    got = [(c, d, p) for _, _, c, d, p in item_phrases(EXPORT)]
    assert got == [
        (Decimal(12), "SKU-4471 tea bowl", (Decimal("18.40"),)),
        (Decimal(4), "SKU-5502 sake set", (Decimal("65.00"),)),
    ]
    text = "Invoice F-3301. 12 wheels of comté at 38,50 € each. Four LED panels at ¥12,800 each."
    got = [(c, d, p[0]) for _, _, c, d, p in item_phrases(text)]
    assert got == [
        (Decimal(12), "wheels of comté", Decimal("38.50")),
        (Decimal(4), "LED panels", Decimal(12800)),
    ]


def test_customs_items_one_per_phrase():
    model = [{"description": "Gift", "quantity": 1, "unit_value": 12.5}]
    assert counted_items({}, GOODS, CUSTOMS, model) == [
        {"description": "wool scarf", "quantity": 2, "unit_value": 35},
        {"description": "jar of forest honey", "quantity": 1, "unit_value": 12.5},
        {"description": "hand-painted Christmas ornament", "quantity": 3, "unit_value": 8},
    ]
    value = {"sender": "Łukasz Nowak", "items": model}
    out, changed = apply_evidence(_schema(GOODS), CUSTOMS, value)
    assert changed == ["items"] and len(out["items"]) == 3
    jsonschema.validate(out, _schema(GOODS))
    assert value["items"] == model  # the input is not changed


def test_code_digits_are_no_count():
    model = [{"description": "2290", "quantity": 12, "unit_value": 12}]
    assert counted_items({}, GOODS, EXPORT, model) == [
        {"description": "SKU-4471 tea bowl", "quantity": 12, "unit_value": 18.4},
        {"description": "SKU-5502 sake set", "quantity": 4, "unit_value": 65},
    ]


def test_listed_phrases_without_a_price_field():
    text = (
        "RMA R-2290. Customer Raj is returning two Zenith phone cases and one Zenith screen "
        "protector from order #90 311 because they are the wrong items."
    )
    model = [{"product": "Zenith", "quantity": 1}, {"product": "Zenith", "quantity": 2}]
    assert counted_items({}, RETURNS, text, model) == [
        {"product": "Zenith phone cases", "quantity": 2},
        {"product": "Zenith screen protector", "quantity": 1},
    ]
    # phrases in different sentences are no list
    apart = "Returning two phone cases. Shipped in 3 boxes yesterday."
    assert counted_items({}, RETURNS, apart, model) is None


def test_one_phrase_needs_the_models_count():
    text = "Returning three packs of Lumo AA batteries because he no longer needs them."
    assert counted_items({}, RETURNS, text, [{"product": "Lumo AA", "quantity": 3}]) == [
        {"product": "packs of Lumo AA batteries", "quantity": 3}
    ]
    assert counted_items({}, RETURNS, text, [{"product": "Lumo AA", "quantity": 2}]) is None


def test_no_priced_phrase_and_invalid_results_keep_the_model():
    text = "Services: consulting. Total USD 480.80."
    model = [{"description": "consulting", "quantity": 1, "unit_value": 480.8}]
    assert counted_items({}, GOODS, text, model) is None
    # two phrases for an array of at most one item: the object would be invalid
    one = _array(1, description=STR, quantity=INT, unit_value=NUM)
    value = {"sender": "Kyoto", "items": [{"description": "x", "quantity": 1, "unit_value": 1}]}
    assert apply_evidence(_schema(one), EXPORT, value) == (value, [])


ENUM = {"enum": ["normal", "high", "low"]}
NSTR = {"type": ["string", "null"], "maxLength": 20}
TESTS = _array(6, name=STR, value={"type": "number"}, unit=NSTR, flag=ENUM)
LAB = (
    "Patient Zoë Lindqvist fasted twelve hours before her sample on the 4th of April 2026 "
    "at Nordlab. Potassium was 5.9 mmol/L, flagged high; sodium 139 mmol/L, normal; "
    "creatinine eighty-two µmol/L, normal."
)


def test_measurement_shape():
    assert measured_fields({}, TESTS["items"]) == ("name", "value", "unit", "flag")
    # no enum: a recipe's name, quantity and unit are no measurement of this rule
    assert measured_fields({}, _array(name=STR, quantity=NUM, unit=NSTR)["items"]) is None
    assert measured_fields({}, GOODS["items"]) is None


def test_measurement_clauses():
    text = "Fasting. Glucose 5.4 mmol/L (normal); HbA1c 6.1 % (high). Collected 2026-01-27 here."
    assert [(n, v[0], u, r) for n, v, u, r in measurements(text)] == [
        ("Glucose", Decimal("5.4"), "mmol/L", " (normal)"),
        ("HbA1c", Decimal("6.1"), "%", " (high)"),
    ]
    # what is measured written after the unit: no measurement clause
    assert measurements("Ingredients: 100 g almond flour, 2 egg whites.") == []


def test_lab_tests_one_per_clause():
    model = [{"name": "L", "value": 139, "unit": "mmol", "flag": "normal"}]
    assert measured_items({}, TESTS, LAB, model) == [
        {"name": "Potassium", "value": 5.9, "unit": "mmol/L", "flag": "high"},
        {"name": "sodium", "value": 139, "unit": "mmol/L", "flag": "normal"},
        {"name": "creatinine", "value": 82, "unit": "µmol/L", "flag": "normal"},
    ]
    schema = _schema(TESTS)
    out, changed = apply_evidence(schema, LAB, {"sender": "Nordlab", "items": model})
    assert "items" in changed and len(out["items"]) == 3


def test_a_clause_without_one_option_keeps_the_model():
    text = "Hemoglobin: 11.2 g/dL, see note. Ferritin: 9 ng/mL, low."
    model = [{"name": "Hemoglobin", "value": 11.2, "unit": "g", "flag": "normal"}]
    assert measured_items({}, TESTS, text, model) is None
    # two range words implying different flags, or one implying none: still none
    text = "Hemoglobin: 11.2 g/dL, below range, above the normal range. Ferritin: 9 ng/mL, low."
    assert measured_items({}, TESTS, text, model) is None
    text = "Hemoglobin: 11.2 g/dL, outside the normal range. Ferritin: 9 ng/mL, low."
    assert measured_items({}, TESTS, text, model) is None
    text = "Hemoglobin: 11.2 g/dL, low or normal. Ferritin: 9 ng/mL, low."
    assert measured_items({}, TESTS, text, model) is None


GRADES = _array(subject=STR, grade={"type": "string", "maxLength": 10})


def test_pair_shape():
    assert pair_fields({}, GRADES["items"]) == ("subject", "grade")
    assert pair_fields({}, RETURNS["items"]) is None
    assert pair_fields({}, TESTS["items"]) is None


def test_keyed_runs():
    text = (
        "Pupil: Noah Brennan-Kowalczyk, Year 9. Mathematics: A; English: B+; Physics: A*; "
        "History: B. Attendance 96.5% (three days absent)."
    )
    assert keyed_runs(text) == [
        [("Mathematics", "A"), ("English", "B+"), ("Physics", "A*"), ("History", "B")]
    ]
    text = "Grades: French 16/20, Mathematics 14/20, Biology 17.5/20. Attendance: 100 per cent."
    assert keyed_runs(text) == [
        [("French", "16/20"), ("Mathematics", "14/20"), ("Biology", "17.5/20")]
    ]
    # names in a list are no keyed values; two pairs are no run
    assert keyed_runs("Speakers: Ines Carvalho, Mark Obi, Chen Wei and Sara Lind.") == []
    assert keyed_runs("Mathematics: A; English: B+.") == []


def test_grades_from_the_one_run():
    text = "Year 9. Mathematics: A; English: B+; Physics: A*; History: B. Tutor: Mrs Pritchard."
    model = [{"subject": "English", "grade": "A"}, {"subject": "History", "grade": "B"}]
    assert pair_items({}, GRADES, text, model) == [
        {"subject": "Mathematics", "grade": "A"},
        {"subject": "English", "grade": "B+"},
        {"subject": "Physics", "grade": "A*"},
        {"subject": "History", "grade": "B"},
    ]
    # two runs: which one the array lists is not known
    two = text + " Effort: 1; Conduct: 2; Homework: 1."
    assert pair_items({}, GRADES, two, model) is None


def test_flags_implied_by_range_words_and_reference_ranges():
    options = ["normal", "high", "low"]
    one = Decimal("2.1")
    assert implied_flags(", below range", one, options) == ["low"]
    assert implied_flags(", under the reference range", one, options) == ["low"]
    assert implied_flags(" (above the normal range)", one, options) == ["high"]
    assert implied_flags(", within range", one, options) == ["normal"]
    assert implied_flags(" [ref 0.4-4.0]", one, options) == ["normal"]
    assert implied_flags(" [ref 2.5-4.0]", one, options) == ["low"]
    assert implied_flags(" (reference range: 0.4 - 1.9)", one, options) == ["high"]
    # no range word, two reference ranges, a reversed range, options spelt otherwise
    assert implied_flags(", repeat in 2 weeks", one, options) == []
    assert implied_flags(" [ref 0.4-4.0] [ref 1-2]", one, options) == []
    assert implied_flags(" [ref 4.0-0.4]", one, options) == []
    assert implied_flags(", below range", one, ["ok", "H", "L"]) == []


def test_lab_tests_with_implied_flags():
    text = (
        "Results for Tomás Ferreira, blood drawn on March 9, 2026. Non-fasting sample. "
        "Hemoglobin: 11.2 g/dL, below range. Ferritin: 9 ng/mL, low. Vitamin B12: 410 pg/mL, "
        "within range."
    )
    model = [{"name": "Hemoglobin", "value": 11.2, "unit": "g", "flag": "normal"}]
    assert measured_items({}, TESTS, text, model) == [
        {"name": "Hemoglobin", "value": 11.2, "unit": "g/dL", "flag": "low"},
        {"name": "Ferritin", "value": 9, "unit": "ng/mL", "flag": "low"},
        {"name": "Vitamin B12", "value": 410, "unit": "pg/mL", "flag": "normal"},
    ]
    # a name word glued to a digit ("T4") keeps it; the numeral after it is the value
    text = (
        "LABCORE NORTH | Name: Oluwaseun Adeyemi | Collected: 2026-01-27 | Fasting: no\n"
        "TSH 2.1 mIU/L [ref 0.4-4.0]\nFree T4 19 pmol/L [ref 12-22]\nCRP 12 mg/L [ref 0-5]"
    )
    model = [{"name": "Fasting", "value": 19, "unit": "L", "flag": "normal"}]
    assert measured_items({}, TESTS, text, model) == [
        {"name": "TSH", "value": 2.1, "unit": "mIU/L", "flag": "normal"},
        {"name": "Free T4", "value": 19, "unit": "pmol/L", "flag": "normal"},
        {"name": "CRP", "value": 12, "unit": "mg/L", "flag": "high"},
    ]


LOANS = _array(
    title={"type": "string", "maxLength": 120},
    due_date={"type": ["string", "null"], "format": "date"},
) | {"minItems": 1}  # probe 2's library notice: trim_items keeps one item
OVERDUE = (
    "Springfield Public Library - overdue notice. Member: Carlos Mendes, card 2904 5517 8830. "
    "The following items were due on 2 March 2026: 'The Left Hand of Darkness'; 'A Short "
    "History of Nearly Everything'. Fines so far: $1.50. Please return them to any branch."
)


def test_quoted_runs():
    assert quoted_runs(OVERDUE) == [
        ["The Left Hand of Darkness", "A Short History of Nearly Everything"]
    ]
    text = "He read “Dune”, \"Emma\" and ‘Ulysses’, then 'Beloved'. The tenants' AGM, Bob's car."
    assert quoted_runs(text) == [["Dune", "Emma", "Ulysses"], ["Beloved"]]
    # a space inside a quote's edge is no quoted span
    assert quoted_runs("items: ' Dune', 'Emma'") == [["Emma"]]


def test_quoted_items_one_per_span():
    model = [{"title": "A Short History of Nearly Everything", "due_date": "2026-03-02"}]
    assert quoted_items({}, LOANS, OVERDUE, model) == [
        {"title": "The Left Hand of Darkness", "due_date": "2026-03-02"},
        {"title": "A Short History of Nearly Everything", "due_date": "2026-03-02"},
    ]
    schema = {
        "type": "object",
        "properties": {"library": STR, "items": LOANS},
        "required": ["library", "items"],
        "additionalProperties": False,
    }
    out, changed = apply_evidence(schema, OVERDUE, {"library": "Springfield", "items": model})
    assert "items" in changed and [i["title"] for i in out["items"]] == [
        "The Left Hand of Darkness",
        "A Short History of Nearly Everything",
    ]


def test_quoted_items_keep_the_model():
    model = [{"title": "A Short History of Nearly Everything", "due_date": "2026-03-02"}]
    # one quoted span only; a model string in no run; two runs holding model strings
    one = "Reserved: 'Kafka on the Shore'. Collect by 14 April."
    assert quoted_items({}, LOANS, one, [{"title": "Kafka on the Shore", "due_date": None}]) is None
    assert quoted_items({}, LOANS, OVERDUE, [{"title": "Dune", "due_date": None}]) is None
    two = OVERDUE + " Also 'Dune', 'A Short History of Nearly Everything'."
    assert quoted_items({}, LOANS, two, model) is None
    # the model's items disagree on a field a new item needs
    three = "Due: 'Dune', 'Emma', 'Ulysses'."
    disagree = [{"title": "Dune", "due_date": "2026-03-02"}, {"title": "Emma", "due_date": None}]
    assert quoted_items({}, LOANS, three, disagree) is None
    # two free strings: not this shape
    assert quoted_items({}, GRADES, three, [{"subject": "Dune", "grade": "A"}]) is None
