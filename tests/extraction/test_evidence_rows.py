"""Arrays of records read from labelled amount lists and from table rows
(``evidence.rows``, session 34, h16): texts of their own, values read off them by hand."""

from __future__ import annotations

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.rows import amount_items, amount_lists, row_items, table_rows
from tests.extraction._schemas import strict_object as _obj

STR = {"type": "string", "maxLength": 60}
NUM = {"type": "number", "minimum": 0}
INT = {"type": "integer", "minimum": 0, "maximum": 99}
DATE = {"type": "string", "format": "date"}


def _arr(item: dict) -> dict:
    return {"type": "array", "maxItems": 8, "items": item}


LINE = _obj(label=STR, amount=NUM)


def test_amount_lists_split_at_semicolons_else_commas_and_and():
    text = (
        "Choir fund, spring 2027. Income: ticket sales £2,310.50 (three concerts); a "
        "bake sale £184.00. Costs: piano tuning 95,00 €, sheet music 41,20 € and a new "
        "banner 260,00 €. Thanks to everyone."
    )
    lists = amount_lists(text)
    assert [(label, [(d, str(v[0])) for d, v in e]) for label, e in lists] == [
        ("Income", [("ticket sales", "2310.50"), ("bake sale", "184.00")]),
        ("Costs", [("piano tuning", "95.00"), ("sheet music", "41.20"), ("new banner", "260.00")]),
    ]


def test_amount_list_named_by_its_label_and_the_rest_in_order():
    schema = _obj(club=STR, income=_arr(LINE), expenses=_arr(LINE))
    text = (
        "Chess club accounts. Spent: room hire $300.00; new clocks $129.99. "
        "Income: membership dues $450.00; tournament fees $75.00."
    )
    out, changed = apply_evidence(
        schema, text, {"club": "Chess club", "income": [], "expenses": []}
    )
    # "Income" names ``income``; "Spent" names nothing and goes to the one array left
    assert out["income"] == [
        {"label": "membership dues", "amount": 450},
        {"label": "tournament fees", "amount": 75},
    ]
    assert out["expenses"] == [
        {"label": "room hire", "amount": 300},
        {"label": "new clocks", "amount": 129.99},
    ]
    assert set(changed) >= {"income", "expenses"}


def test_amount_lists_left_alone_where_they_cannot_be_placed():
    item = _arr(LINE)
    # two unnamed lists for one array: no decision
    text = "Week one: bread £2.10; milk £1.05. Week two: eggs £3.00; tea £2.50."
    assert amount_items(_obj(x=item), item, text, [], ["purchases"], "purchases") is None
    # an entry without an amount ends the list: no list of two
    text = "Notes: the hall is booked; cost £50.00 for the evening."
    assert amount_lists(text) == []
    # an item with a count is the counted-goods rule's, not this one's
    counted = _arr(_obj(label=STR, quantity=INT, price=NUM))
    text = "Items: cups £4.00; plates £6.00."
    assert amount_items(_obj(x=counted), counted, text, [], ["x"], "x") is None


TEAM = _obj(team=STR, played=INT, won=INT, lost=INT, points=INT)


def test_table_rows_with_a_rank_column():
    text = (
        "Hockey ladder, round 9\n"
        "#  Club            P  W  L  Pts\n"
        "1  Tarn Valley     9  7  2  14\n"
        "2. Kestrel HC      9  5  4  10\n"
        "3  Old Mill        8  2  6  4\n"
        "Next round on Saturday."
    )
    out = row_items(_obj(teams=_arr(TEAM)), _arr(TEAM), text, [])
    assert out == [
        {"team": "Tarn Valley", "played": 9, "won": 7, "lost": 2, "points": 14},
        {"team": "Kestrel HC", "played": 9, "won": 5, "lost": 4, "points": 10},
        {"team": "Old Mill", "played": 8, "won": 2, "lost": 6, "points": 4},
    ]


def test_date_rows_read_in_the_order_the_run_shows():
    item = _obj(date=DATE, kwh=NUM, cost=NUM)
    text = (
        "Charging log (EV):\n"
        "02/05/2027 | 31.5 kWh | €9.45\n"
        "14/05/2027 | 28.0 kWh | €8.40\n"
        "Signed off by fleet desk."
    )
    # 14/05 can only be day first, so 02/05 is the 2nd of May
    rows = table_rows(text, "date", 2)
    assert [(d, [float(x) for x in n]) for d, n in rows] == [
        ("2027-05-02", [31.5, 9.45]),
        ("2027-05-14", [28.0, 8.40]),
    ]
    schema = _obj(sessions=_arr(item))
    out, changed = apply_evidence(schema, text, {"sessions": []})
    assert out["sessions"] == [
        {"date": "2027-05-02", "kwh": 31.5, "cost": 9.45},
        {"date": "2027-05-14", "kwh": 28, "cost": 8.4},
    ]
    assert changed == ["sessions"]
    # every date ambiguous: no order shown, the model's array stays
    text = "Charging log:\n02/05/2027 | 31.5 kWh | €9.45\n03/05/2027 | 28.0 kWh | €8.40\n"
    assert table_rows(text, "date", 2) == []


def test_lines_with_words_between_numbers_are_no_rows():
    text = (
        "Ferry times\n"
        "Departs 9 then again at 11 and 15 daily\n"
        "Returns 10 then again at 12 and 16 daily\n"
    )
    item = _obj(name=STR, a=INT, b=INT, c=INT)
    assert row_items(_obj(x=_arr(item)), _arr(item), text, []) is None
    # two runs of the same length: no decision
    text = "A 1 2\nB 3 4\n\nC 5 6\nD 7 8\n"
    assert table_rows(text, "string", 2) == []


def test_a_money_field_takes_no_year_where_amounts_are_marked():
    schema = _obj(opening_balance=NUM, members=INT)
    text = "Opening balance from 2026: €612.40. Members: 31."
    out, changed = apply_evidence(schema, text, {"opening_balance": 2026, "members": 31})
    assert out["opening_balance"] == 612.4 and changed == ["opening_balance"]
    # a count keeps its numerals; and with no marked amount a year stays a candidate
    text = "Opening balance carried over from 2026 was 612.40 in cash."
    out, _ = apply_evidence(schema, text, {"opening_balance": 612.4, "members": 0})
    assert out["opening_balance"] == 612.4


def test_a_whole_word_mention_outranks_a_prefix_in_a_tie():
    schema = _obj(matchday=INT, postponed_matches=INT)
    text = "Standings after matchday 12. Two fixtures were postponed."
    # "matchday 12" mentions ``matchday`` by a whole word and ``postponed_matches`` by
    # a prefix ("match"): a tie that left both to the model before
    out, changed = apply_evidence(schema, text, {"matchday": 12, "postponed_matches": 12})
    assert out == {"matchday": 12, "postponed_matches": 2} and changed == ["postponed_matches"]


def test_a_bracketed_count_is_a_detail_of_its_item():
    item = _obj(dish=STR, quantity=INT, unit_price=NUM)
    schema = _obj(items=_arr(item))
    text = (
        "Order: 20 x spring rolls at €0.90 each; 2 boxes of dumplings (30 pieces per box) "
        "at €24.00 per box; 20 x sesame balls at €0.70."
    )
    out, _ = apply_evidence(schema, text, {"items": []})
    assert out["items"] == [
        {"dish": "spring rolls", "quantity": 20, "unit_price": 0.9},
        {"dish": "boxes of dumplings", "quantity": 2, "unit_price": 24},
        {"dish": "sesame balls", "quantity": 20, "unit_price": 0.7},
    ]


def test_a_money_field_the_text_denies_is_zero():
    schema = _obj(repair_cost=NUM, deposit_paid=NUM)
    text = "Repair cost £80.00 for the new hinge. She didn't leave a deposit."
    out, changed = apply_evidence(schema, text, {"repair_cost": 80, "deposit_paid": 80})
    assert out == {"repair_cost": 80, "deposit_paid": 0} and changed == ["deposit_paid"]
    # a number not named for money keeps the model's value
    schema = _obj(repair_cost=NUM, weight_kg=NUM)
    text = "Repair cost £80.00 for the new hinge. No weight was recorded."
    out, _ = apply_evidence(schema, text, {"repair_cost": 80, "weight_kg": 3})
    assert out["weight_kg"] == 3


def test_dated_entries_in_one_sentence():
    item = _obj(date=DATE, kwh=NUM, cost=NUM)
    schema = _obj(owner=STR, sessions=_arr(item))
    text = (
        "Charging claim from Ines Duarte. I charged twice: on 3 May 2027, 22.5 kWh for "
        "€7.10, and on 19 May 2027, forty kWh for €12.60. Please refund with May pay."
    )
    out, changed = apply_evidence(schema, text, {"owner": "Ines Duarte", "sessions": []})
    assert out["sessions"] == [
        {"date": "2027-05-03", "kwh": 22.5, "cost": 7.1},
        {"date": "2027-05-19", "kwh": 40, "cost": 12.6},
    ]
    assert changed == ["sessions"]
    # a date followed by one numeral only: no records
    text = "I charged on 3 May 2027 for €7.10 and on 19 May 2027, forty kWh for €12.60."
    out, _ = apply_evidence(schema, text, {"owner": "Ines Duarte", "sessions": []})
    assert out["sessions"] == []


def test_a_label_ending_in_a_colon_names_its_value():
    schema = _obj(shipping_fee=NUM, subtotal=NUM)
    text = "Subtotal £64.00. Shipping and secure handling costs: £7.95. Thank you."
    # "Shipping" is five words from 7.95, but the whole label names its value
    out, changed = apply_evidence(schema, text, {"shipping_fee": 64, "subtotal": 64})
    assert out == {"shipping_fee": 7.95, "subtotal": 64} and changed == ["shipping_fee"]
    # a label holding a numeral is no such label
    text = "Subtotal £64.00. Shipping for 2 parcels, handled: £7.95."
    out, _ = apply_evidence(schema, text, {"shipping_fee": 64, "subtotal": 64})
    assert out["shipping_fee"] != 7.95


def test_a_listed_line_total_after_equals():
    text = "Bill: lift pass 3 x €52.00 = €156.00; ski hire €90.00. Thanks for visiting."
    lists = amount_lists(text)
    assert [(d, str(v[0])) for d, v in lists[0][1]] == [
        ("lift pass", "156.00"),
        ("ski hire", "90.00"),
    ]
