"""Session 35, h17 (#23): arrays of records read from lines cut into cells, a money total
as the largest amount written, and no rate for a money field; texts of their own, the
values read off them by hand."""

from __future__ import annotations

from decimal import Decimal

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.numbers import marked_numerals, number_candidates, total_value
from structgen.extraction.evidence.records import unit_numbers
from structgen.extraction.evidence.rows import cell_fields, cell_items
from structgen.extraction.evidence.text import TextWords, name_stems
from structgen.extraction.labels import amount_spans
from structgen.fsm.numerals import numeral_spans
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 60}
NUM = {"type": "number", "minimum": 0}
INT = {"type": "integer", "minimum": 0, "maximum": 9999}
LAP = {"type": "string", "pattern": "^[0-9]{1,2}:[0-9]{2}$"}


def _arr(item: dict, **kw) -> dict:
    return {"type": "array", "maxItems": 8, "items": item, **kw}


ORCHARD = _obj(variety=STR, use=STR, crates=INT, price=NUM)
ORCHARD_TEXT = (
    "Apple store, week 41\n"
    "Variety        Use            Crates   Price\n"
    "Bramley        cooking        40       £12.00\n"
    "Cox            dessert        25 crates   £15.50\n"
    "Egremont Russet  dessert      8        £18.25\n"
    "\n"
    "Stock checked by R. Hale."
)


def test_cell_rows_with_two_string_columns():
    rows = cell_items(_obj(apples=_arr(ORCHARD)), _arr(ORCHARD), ORCHARD_TEXT, [])
    assert rows == [
        {"variety": "Bramley", "use": "cooking", "crates": 40, "price": 12},
        {"variety": "Cox", "use": "dessert", "crates": 25, "price": 15.5},
        {"variety": "Egremont Russet", "use": "dessert", "crates": 8, "price": 18.25},
    ]


def test_cell_rows_through_apply_evidence_replace_an_empty_array():
    schema = _obj(shop=STR, apples=_arr(ORCHARD))
    out, changed = apply_evidence(schema, ORCHARD_TEXT, {"shop": "Apple store", "apples": []})
    assert [r["variety"] for r in out["apples"]] == ["Bramley", "Cox", "Egremont Russet"]
    assert "apples" in changed


COST = _obj(item=STR, amount=NUM)


def test_dot_leaders_drop_an_aside_in_brackets_and_a_total_line():
    text = (
        "Choir tour budget\n"
        "Minibus hire ......... €640.00\n"
        "Hostel beds .......... €1.296,00  (€36 per singer)\n"
        "Concert hall ......... €300,00\n"
        "Total ................ €2.236,00\n"
    )
    assert cell_items(_obj(costs=_arr(COST)), _arr(COST), text, []) == [
        {"item": "Minibus hire", "amount": 640},
        {"item": "Hostel beds", "amount": 1296},
        {"item": "Concert hall", "amount": 300},
    ]


def test_dash_separated_lines_keep_a_code_as_a_string_and_a_leading_rank_goes():
    item = _obj(code=STR, boxes=INT, weight=NUM)
    text = (
        "Despatch note\n"
        "1. KX-204 - 12 boxes - 88.5 kg\n"
        "2. KX-219 - 3 boxes - 20 kg\n"
        "Signed: T. Ward"
    )
    assert cell_items(_obj(lines=_arr(item)), _arr(item), text, []) == [
        {"code": "KX-204", "boxes": 12, "weight": 88.5},
        {"code": "KX-219", "boxes": 3, "weight": 20},
    ]


def test_a_pattern_field_takes_its_cell():
    item = _obj(lap=INT, time=LAP, note=STR)
    text = "Track session\n1    1:42    warm-up\n2    1:38    push\n3    1:40    steady"
    # "1" alone is no rank (no "." or ")" after it): the lap numbers are the number cells
    assert cell_items(_obj(laps=_arr(item)), _arr(item), text, []) == [
        {"lap": 1, "time": "1:42", "note": "warm-up"},
        {"lap": 2, "time": "1:38", "note": "push"},
        {"lap": 3, "time": "1:40", "note": "steady"},
    ]


def test_cell_rows_left_alone():
    schema = _obj(costs=_arr(COST))
    # one row is no run; two runs of one length give no decision
    assert cell_items(schema, _arr(COST), "Taxi ...... $40.00\nThanks.", []) is None
    two = "Day 1\nTaxi .... $40.00\nLunch .... $18.00\n\nDay 2\nBus .... $6.00\nDinner .... $31.00"
    assert cell_items(schema, _arr(COST), two, []) is None
    # a cell with two numerals is neither a number cell nor a string cell starting a row
    assert cell_items(schema, _arr(COST), "Taxi  $40.00 $5.00\nBus  $6.00 $1.00", []) is None
    # more rows than maxItems: none
    many = "\n".join(f"Item {c} .... £{i}.00" for i, c in enumerate("ABCDEFGHI", 1))
    assert cell_items(schema, _arr(COST, maxItems=4), many, []) is None
    # an item with an enum, a boolean or a date is no cell row
    assert cell_fields(schema, _obj(item=STR, kind={"enum": ["a", "b"]}, amount=NUM)) is None
    assert cell_fields(schema, _obj(item=STR, paid={"type": "boolean"}, amount=NUM)) is None
    assert cell_fields(schema, _obj(day={"type": "string", "format": "date"}, amount=NUM)) is None
    assert cell_fields(schema, _obj(a=NUM, b=NUM)) is None


def test_a_money_total_is_the_largest_amount_written():
    schema = _obj(room=NUM, breakfast=NUM, total_cost=NUM, total_nights=INT)
    text = (
        "Guesthouse bill: room £180.00 for 2 nights, breakfast £25.00, "
        "tourist tax £4.00. Amount due: £209.00."
    )
    value = {"room": 180, "breakfast": 25, "total_cost": 180, "total_nights": 2}
    out, changed = apply_evidence(schema, text, value)
    assert out["total_cost"] == 209
    assert out["total_nights"] == 2  # a total of nights is no money: left alone
    assert "total_cost" in changed


def test_a_total_of_something_else_or_in_an_unmarked_text_is_left_alone():
    root = _obj(total_litres=NUM, total=NUM, total_income=NUM)
    text = "Filled 40 litres for $62.00, later 31.5 litres for $48.80. Paid in cash."
    marked = amount_spans(text)
    # a total of litres is no money
    assert total_value(root, NUM, "total_litres", 40, marked, text) is None
    # no currency mark in the text: no amount to take
    bare = "40 litres, then 31.5."
    assert total_value(root, NUM, "total", 40, amount_spans(bare), bare) is None
    # already the largest amount: no change; else the largest (income is money too)
    assert total_value(root, NUM, "total", 62, marked, text) is None
    assert total_value(root, NUM, "total_income", 48.8, marked, text) == Decimal("62.00")
    # the largest reading that fits the field's bounds ("1.800 EUR" reads 1.8 or 1800)
    small = {"type": "number", "maximum": 100}
    one = "1.800 EUR"
    assert total_value(root, small, "total", 0, amount_spans(one), one) == Decimal("1.800")


def test_a_largest_amount_listed_with_others_is_a_total_only_when_it_sums_them():
    root = _obj(total=NUM)
    items = "Invoice Q-1. Items $4,500.00 and $1,250.00."
    assert total_value(root, NUM, "total", 3, amount_spans(items), items) is None
    summed = "Items $4,500.00 and $1,250.00 and $5,750.00."
    assert total_value(root, NUM, "total", 3, amount_spans(summed), summed) == Decimal("5750.00")
    twice = "Rent £900; deposit £900; fee £40."
    assert total_value(root, NUM, "total", 40, amount_spans(twice), twice) == Decimal("900")


def test_a_money_field_takes_no_rate():
    schema = _obj(service_charge=NUM, net=NUM)
    text = "Dinner for four: €180.00. Service charge 12.5%: €22.50."
    out, _ = apply_evidence(schema, text, {"service_charge": 12.5, "net": 180})
    assert out["service_charge"] == 22.5
    text = "Bank charge of two per cent, i.e. £3.10, is added."
    out, _ = apply_evidence(_obj(bank_charge=NUM), text, {"bank_charge": 2})
    assert out["bank_charge"] == 3.1


def test_a_mention_by_money_words_alone_ranks_after_the_names_own_word():
    schema = _obj(vat_amount=NUM)
    text = "Net EUR 500,00. VAT 19 %: EUR 95,00. Gross amount: EUR 595,00."
    # "amount" is next to 595.00, "VAT" three words before 95.00: the name's own word wins
    out, _ = apply_evidence(schema, text, {"vat_amount": 500})
    assert out["vat_amount"] == 95
    doc = TextWords(text)
    got = number_candidates(doc, numeral_spans(text), name_stems("vat_amount"), NUM)
    values = [value for _, _, value in got]
    assert values.index(Decimal("95.00")) < values.index(Decimal("595.00"))


GOODS = _obj(product=STR, quantity=INT, unit_price=NUM)


def test_goods_named_before_their_count():
    text = (
        "Market stall order. Wanted: runner beans, 2 bags at £3.20; "
        "honey, six jars à £7.50; 3 kg new potatoes at £1.10 per kg; "
        "brown eggs, 12 at £0.35. Collect Friday."
    )
    out, _ = apply_evidence(_obj(items=_arr(GOODS)), text, {"items": []})
    assert out["items"] == [
        {"product": "runner beans", "quantity": 2, "unit_price": 3.2},
        {"product": "honey", "quantity": 6, "unit_price": 7.5},
        {"product": "new potatoes", "quantity": 3, "unit_price": 1.1},
        {"product": "brown eggs", "quantity": 12, "unit_price": 0.35},
    ]


def test_goods_after_their_count_keep_their_words():
    text = "Order: 2 large oak planters at €45.00; 1 bag of compost for €6.50."
    out, _ = apply_evidence(_obj(items=_arr(GOODS)), text, {"items": []})
    assert out["items"] == [
        {"product": "large oak planters", "quantity": 2, "unit_price": 45},
        {"product": "bag of compost", "quantity": 1, "unit_price": 6.5},
    ]


MED = _obj(name=STR, dose_mg=NUM)


def test_item_numbers_named_for_a_unit_take_the_numeral_written_with_it():
    schema = _obj(meds=_arr(MED))
    text = "Plan: ibuprofen 400 mg three times a day; omeprazole 20 mg at night. Weight 81 kg."
    model = [{"name": "ibuprofen", "dose_mg": 3}, {"name": "omeprazole", "dose_mg": 20}]
    out, changed = apply_evidence(schema, text, {"meds": model})
    assert out["meds"] == [
        {"name": "ibuprofen", "dose_mg": 400},
        {"name": "omeprazole", "dose_mg": 20},
    ]
    assert "meds" in changed
    assert unit_numbers(schema, _arr(MED), text, out["meds"]) is None  # nothing left to change


def test_item_unit_numbers_left_alone():
    schema = _obj(meds=_arr(MED))
    item = _arr(MED)
    # another unit after the numeral, two numerals for one name, or no numeral next to it
    assert (
        unit_numbers(schema, item, "paracetamol 2 tablets", [{"name": "paracetamol", "dose_mg": 1}])
        is None
    )
    twice = "Took ramipril 5 mg, later ramipril 10 mg."
    assert unit_numbers(schema, item, twice, [{"name": "ramipril", "dose_mg": 1}]) is None
    far = "Started sertraline after a long talk about side effects, 50 mg daily."
    assert unit_numbers(schema, item, far, [{"name": "sertraline", "dose_mg": 1}]) is None
    # a field not named for a unit is no such field
    plain = _obj(name=STR, dose=NUM)
    assert unit_numbers(plain, _arr(plain), "x 5 mg", [{"name": "x", "dose": 1}]) is None


def test_money_fields_take_marked_numerals_first_and_pupils_are_students():
    schema = _obj(students=INT, staff=INT, cost_per_student=NUM)
    text = "Group: 46 pupils, 5 staff. Parents pay £172 per pupil."
    value = {"students": 5, "staff": 5, "cost_per_student": 46}
    out, _ = apply_evidence(schema, text, value)
    assert out == {"students": 46, "staff": 5, "cost_per_student": 172}
    spans = numeral_spans(text)
    marked = marked_numerals(name_stems("cost_per_student"), spans, amount_spans(text))
    assert marked is not None and [text[spans[i][0] : spans[i][1]] for i in marked] == ["172"]
    # a field that is no money, or a text without marks: every numeral alike
    assert marked_numerals(name_stems("students"), spans, amount_spans(text)) is None
    assert marked_numerals(name_stems("total_litres"), spans, amount_spans(text)) is None
    assert marked_numerals(name_stems("cost_per_student"), spans, []) is None
