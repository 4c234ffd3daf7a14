"""Copied arrays of objects in text order (``fsm.json_schema.copy_items``) against a
brute-force reference: an array is accepted exactly when it is valid under the schema,
every copied value is a span / numeral of the text (spans enumerated by the span rule of
``test_copy``), and the items' lead values can be placed at occurrences of the text, each
starting with a letter or digit after the end of the one before (every choice of
occurrences enumerated).
"""

from __future__ import annotations

import itertools
import json
import random
from decimal import Decimal

import jsonschema
import pytest

from structgen.fsm.compiler import compile_spec
from structgen.fsm.copy import text_units
from structgen.fsm.json_schema.copy import CopyJsonSchema
from structgen.fsm.json_schema.copy_items import has_ordered_leads, lead_property
from structgen.fsm.numerals import numerals

from .test_copy import _is_span, _spans

TEXT = 'Buy 2 red apples, 3 pears and 2 apples; then "5 figs" at C:\\x\nand 3 pears.'
SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 12},
                    "qty": {"type": "integer"},
                },
                "required": ["name", "qty"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}


def _occurrences(text: str, value: str) -> list[tuple[int, int]]:
    """``(start, end)`` unit indices of every place ``text`` writes ``value`` as a span."""
    bounds = list(itertools.accumulate(len(u) for u in text_units(text)))
    starts = {0, *bounds}
    unit_at = {pos: k for k, pos in enumerate([0, *bounds])}
    out = []
    at = text.find(value)
    while at >= 0:
        end = at + len(value)
        if at in starts and end in starts and _is_span(text, at, end):
            out.append((unit_at[at], unit_at[end] - 1))
        at = text.find(value, at + 1)
    return out


def _in_order(text: str, leads: list[str]) -> bool:
    """Whether one occurrence per lead can be chosen, each starting with a letter or digit
    after the end of the one before (every choice enumerated).
    """
    places = [[o for o in _occurrences(text, v) if v[0].isalnum()] for v in leads]
    for choice in itertools.product(*places):
        if all(b[0] > a[1] for a, b in zip(choice, choice[1:])):
            return True
    return False


def _reference(text: str, value: dict) -> bool:
    if not jsonschema.Draft202012Validator(SCHEMA).is_valid(value):
        return False
    spans = _spans(text)
    numbers = set(numerals(text))
    rows = value["items"]
    if not all(r["name"] in spans and Decimal(r["qty"]) in numbers for r in rows):
        return False
    return _in_order(text, [r["name"] for r in rows])


@pytest.mark.parametrize("text", [TEXT, "apples apples apples 2 3"])
def test_ordered_items_accept_exactly_the_reference(text) -> None:
    grammar = compile_spec(CopyJsonSchema(SCHEMA, copy_from=(text,)))
    names = ["apples", "red apples", "pears", "3 pears", "figs", '"5 figs"', "x", "and", "kiwi"]
    names = [n for n in names if n in text] + ["kiwi", ", 3"]
    rows = [{"name": n, "qty": q} for n in names for q in (2, 3, 7)]
    rng = random.Random(23)
    candidates = [[]] + [[r] for r in rows]
    candidates += [list(c) for c in itertools.product(rows[::2], repeat=2)]
    candidates += [rng.sample(rows, k) for k in (3, 3, 4) for _ in range(50)]
    accepted = 0
    for items in candidates:
        value = {"items": items}
        doc = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        expected = _reference(text, value)
        assert grammar.matches(doc) == expected, doc
        accepted += expected
    assert 3 < accepted < len(candidates) - 3  # both answers occur: the test can fail both ways


def test_items_follow_the_text_and_never_repeat_a_mention() -> None:
    grammar = compile_spec(CopyJsonSchema(SCHEMA, copy_from=(TEXT,)))

    def doc(*names: str) -> str:
        rows = [{"name": n, "qty": 2} for n in names]
        return json.dumps({"items": rows}, ensure_ascii=False, separators=(",", ":"))

    assert grammar.matches(doc("red apples", "pears", "apples"))
    assert grammar.matches(doc("apples", "apples"))  # two mentions of "apples"
    assert not grammar.matches(doc("apples", "apples", "apples"))  # only two mentions
    assert not grammar.matches(doc("pears", "red apples"))  # out of text order
    assert not grammar.matches(doc("red apples", "apples", "pears", "pears"))  # > maxItems
    assert grammar.matches(doc("pears", "pears"))  # "3 pears" twice in the text
    assert not grammar.matches(doc("red", "red apples"))  # overlaps the previous lead


def test_arrays_that_do_not_qualify_keep_their_grammar() -> None:
    item = SCHEMA["properties"]["items"]["items"]
    assert lead_property(item) == "name"
    optional = {**item, "required": ["qty"]}
    nested = {**item, "properties": {**item["properties"], "tags": {"type": "array"}}}
    formatted = {
        **item,
        "properties": {"name": {"type": "string", "format": "date"}, "qty": {"type": "integer"}},
    }
    number_first = {**item, "properties": {"qty": {"type": "integer"}, "name": {"type": "string"}}}
    for other in (optional, nested, formatted, number_first):
        assert lead_property(other) is None
        schema = {"type": "array", "items": other}
        grammar = compile_spec(CopyJsonSchema(schema, copy_from=(TEXT,)))
        values = [{"name": "pears", "qty": 2}, {"name": "red apples", "qty": 2}]
        rows = [{k: v[k] for k in other["properties"] if k in v} for v in values]  # key order
        valid = jsonschema.Draft202012Validator(schema).is_valid(rows)
        doc = json.dumps(rows, separators=(",", ":"))
        assert grammar.matches(doc) == (valid and other is not formatted), other


def _has_ordered_leads_brute(units: list[str], lo: int, hi: int | None, count: int) -> bool:
    spans = []
    for i in range(len(units)):
        for j in range(i, len(units)):
            size = sum(len(u) for u in units[i : j + 1])
            ok = units[i][0].isalnum() and not units[j].isspace()
            if ok and size >= lo and (hi is None or size <= hi):
                spans.append((i, j))
    for choice in itertools.combinations(sorted(spans), count):
        if all(b[0] > a[1] for a, b in zip(choice, choice[1:])):
            return True
    return count == 0


def test_has_ordered_leads_matches_brute_force() -> None:
    rng = random.Random(7)
    words = ["ab", "c", "defg", "h1", ",", "-", "xyz"]
    for _ in range(300):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 4)))
        units = text_units(text)
        lo, hi = rng.randint(0, 5), rng.choice([None, 1, 2, 4, 8])
        count = rng.randint(0, 3)
        assert has_ordered_leads(units, lo, hi, count) == _has_ordered_leads_brute(
            units, lo, hi, count
        ), (text, lo, hi, count)


def test_min_items_beyond_the_mentions_falls_back() -> None:
    schema = {"type": "array", "minItems": 3, "items": SCHEMA["properties"]["items"]["items"]}
    grammar = compile_spec(CopyJsonSchema(schema, copy_from=("one, two",)))
    # two mentions for three items: the order is dropped, the copy constraints stay
    assert grammar.matches('[{"name":"two","qty":1},{"name":"one","qty":2},{"name":"one","qty":1}]')
