"""Copy constraints (``fsm.copy``, ``fsm.numerals``, ``fsm.json_schema.copy``) against
brute-force references: a copied string is accepted exactly when its value is a span of
the text (every substring of the text enumerated and judged by the span rule written out
here, not by the automaton), a copied number exactly when it is one of the text's
numerals within the schema's bounds; values outside the text are refused; a field whose
own grammar leaves no span keeps that grammar (and is not reported).
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from structgen.errors import InvalidSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.compiler import compile_spec
from structgen.fsm.copy import SubstringAutomaton, text_units
from structgen.fsm.json_schema.copy import CopyJsonSchema
from structgen.fsm.numerals import json_numeral, numeral_spans, numerals
from structgen.fsm.regex.definitions import INTERSECT

LYON = 'Zoë "Z" O\'Neil, 4 Rue Bleue, Lyon 69001'
TRICKY = 'Zoë "Z" O\'Neil paid\t$1,250.50 at C:\\shop\\x\nline two: Zoë again.'


def _is_span(text: str, i: int, j: int) -> bool:
    """The span rule, written out: both ends at unit boundaries, no whitespace at either end."""

    def boundary(k: int) -> bool:
        return k in (0, len(text)) or not (text[k - 1].isalnum() and text[k].isalnum())

    return (
        i < j
        and boundary(i)
        and boundary(j)
        and not text[i].isspace()
        and not text[j - 1].isspace()
    )


def _spans(text: str) -> set[str]:
    return {
        text[i:j]
        for i in range(len(text))
        for j in range(i + 1, len(text) + 1)
        if _is_span(text, i, j)
    }


def _doc(key: str, value) -> str:
    return json.dumps({key: value}, ensure_ascii=False, separators=(",", ":"))


def _string_grammar(text: str, field: dict | None = None):
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", **(field or {})}},
        "required": ["v"],
    }
    spec = CopyJsonSchema(schema, copy_from=(text,))
    return spec, compile_spec(spec)


@pytest.mark.parametrize(
    "text", ["Aiko Tanaka", TRICKY, "a a a b a", "  leading and trailing  \n", "x"]
)
def test_automaton_spans_equal_the_brute_force_spans(text) -> None:
    assert SubstringAutomaton(text).spans() == _spans(text)
    assert "".join(text_units(text)) == text


@pytest.mark.parametrize("text", ["Aiko Tanaka lives in Osaka", TRICKY])
def test_copied_string_accepts_exactly_the_spans(text) -> None:
    spec, grammar = _string_grammar(text)
    assert spec.copied_fields() == ("/properties/v",)
    every = {text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)}
    spans = _spans(text)
    for value in every | {"", "Bakery", "aiko", "Tanaka Aiko", text + "!"}:
        assert grammar.matches(_doc("v", value)) == (value in spans), value


def test_quotes_backslashes_newlines_are_written_escaped() -> None:
    _, grammar = _string_grammar(TRICKY)
    assert grammar.matches('{"v":"\\"Z\\" O\'Neil"}')
    assert grammar.matches('{"v":"C:\\\\shop\\\\x\\nline"}')
    assert grammar.matches('{"v":"paid\\t$1,250.50"}')
    assert not grammar.matches('{"v":"paid\t$1,250.50"}')  # a raw tab is not JSON
    assert not grammar.matches('{"v":"Zo\\u00eb"}')  # one spelling: non-ASCII as UTF-8
    assert grammar.matches('{"v":"Zoë"}')


def test_copied_string_is_intersected_with_its_own_grammar() -> None:
    text = "Call 555-0100 or mail ann@example.com, ref AB12"
    spec, grammar = _string_grammar(text, {"pattern": "^[A-Z]{2}[0-9]+$"})
    assert spec.copied_fields() == ("/properties/v",)
    assert grammar.matches(_doc("v", "AB12"))
    assert not grammar.matches(_doc("v", "CD34")) and not grammar.matches(_doc("v", "Call"))
    spec, grammar = _string_grammar(text, {"format": "email"})
    assert grammar.matches(_doc("v", "ann@example.com"))
    assert not grammar.matches(_doc("v", "bob@example.com"))
    spec, grammar = _string_grammar(text, {"maxLength": 4})
    for value in _spans(text):
        assert grammar.matches(_doc("v", value)) == (len(value) <= 4), value


@pytest.mark.parametrize("lo,hi", [(0, 12), (1, 60), (0, None), (1, None), (2, 60), (0, 20)])
@pytest.mark.parametrize("text", ["Aiko Tanaka, Osaka", LYON])
def test_length_only_field_needs_no_intersection(text, lo, hi) -> None:
    """Texts shorter and longer than maxLength; brute force over the spans either way."""
    field = {"minLength": lo} if hi is None else {"minLength": lo, "maxLength": hi}
    spec, grammar = _string_grammar(text, field)
    # every span fits: the spans as they are; else the spans that fit, enumerated
    assert INTERSECT not in "".join(spec.lower().definitions)
    every = {text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)}
    spans = _spans(text)
    for value in every | {"", "Bakery"}:
        allowed = value in spans and lo <= len(value) <= (hi or len(value))
        assert grammar.matches(_doc("v", value)) == allowed, value


def test_empty_intersection_falls_back_to_the_field_grammar() -> None:
    text = "no digits here at all"
    spec, grammar = _string_grammar(text, {"pattern": "^[0-9]{3}$"})
    assert spec.copied_fields() == ()
    assert grammar.matches(_doc("v", "123"))  # the field's own grammar
    spec, grammar = _string_grammar("abcdef ghijkl", {"maxLength": 3})
    assert spec.copied_fields() == () and grammar.matches(_doc("v", "xy"))
    spec, grammar = _string_grammar("abcdef ghijkl", {"minLength": 14})
    assert spec.copied_fields() == () and grammar.matches(_doc("v", "x" * 14))
    spec, grammar = _string_grammar("abcdef ghijkl", {"minLength": 8, "maxLength": 13})
    assert spec.copied_fields() == ("/properties/v",)
    assert grammar.matches(_doc("v", "abcdef ghijkl")) and not grammar.matches(_doc("v", "abcdef"))
    spec, grammar = _string_grammar("   \n  ")
    assert spec.copied_fields() == () and grammar.matches(_doc("v", "anything"))


NUMBERS = "Order 77120: three boxes at $1,250.50 each, 12.5% off, forty-one left (-4 C)."


def test_numerals_normalised() -> None:
    values = {json_numeral(v) for v in numerals(NUMBERS)}
    assert values == {"77120", "3", "1250.5", "12.5", "41", "4", "-4"}
    assert [json_numeral(v) for v in numerals("1.250,75 and 3,5 and two hundred and five")] == [
        "1250.75",
        "3.5",
        "205",
    ]
    assert json_numeral(Decimal("0.050")) == "0.05"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Delivered 2024-11-30: 5 packs", ["2024", "5"]),
        ("on 23.12.2026, 3 guests", ["2026", "3"]),
        ("06/15/2026 or 11-02-2026, room 12", ["2026", "12"]),
        ("at 19:30 for 4 people, back by 9:05:30 or 14h30", ["4"]),
        ("2024 sales: 11 units, 30 returns", ["2024", "11", "30"]),  # no date: all numbers
        ("score 3-2, pages 10-12", ["3", "2", "10", "12"]),
    ],
)
def test_date_and_time_parts_are_not_numerals(text, expected) -> None:
    """The month and day of a numeric date and the parts of a clock time are never a
    number of their own (a quantity read from '2024-11-30' was 11); the year is."""
    assert [json_numeral(v) for v in numerals(text)] == expected
    spans = [text[a:b] for a, b, _ in numeral_spans(text)]
    assert list(dict.fromkeys(json_numeral(v) for s in spans for v in numerals(s))) == expected


@pytest.mark.parametrize(
    "field,allowed",
    [
        ({"type": "integer"}, {77120, 3, 41, 4, -4}),
        ({"type": "number"}, {77120, 3, 1250.5, 12.5, 41, 4, -4}),
        ({"type": "integer", "minimum": 0, "maximum": 100}, {3, 41, 4}),
        ({"type": "number", "exclusiveMaximum": 13}, {3, 12.5, 4, -4}),
    ],
)
def test_copied_number_accepts_exactly_the_numerals_in_bounds(field, allowed) -> None:
    schema = {"type": "object", "properties": {"n": field}, "required": ["n"]}
    spec = CopyJsonSchema(schema, copy_from=(NUMBERS,))
    grammar = compile_spec(spec)
    assert spec.copied_fields() == ("/properties/n",)
    for value in range(-10, 200):
        assert grammar.matches(_doc("n", value)) == (value in allowed), value
    for value in [77120, 1250.5, 12.5, 771200, 7712, 1250.55, 0.5]:
        assert grammar.matches(_doc("n", value)) == (value in allowed), value


def test_enum_boolean_const_never_copied_and_keyword_per_field() -> None:
    text = "Priority is below normal; shipped: yes. Tags red, blue."
    schema = {
        "type": "object",
        "properties": {
            "level": {"enum": ["low", "high"]},
            "ok": {"type": "boolean"},
            "kind": {"const": "ticket"},
            "note": {"type": "string", "x-structgen-copy": False},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["level", "ok", "kind", "note", "tags"],
    }
    spec = CopyJsonSchema(schema, copy_from=(text,))
    grammar = compile_spec(spec)
    assert spec.copied_fields() == ("/properties/tags/items",)
    doc = {"level": "low", "ok": True, "kind": "ticket", "note": "free", "tags": ["red", "blue"]}
    assert grammar.matches(json.dumps(doc, separators=(",", ":")))
    assert not grammar.matches(json.dumps({**doc, "tags": ["green"]}, separators=(",", ":")))
    off = CopyJsonSchema(
        {
            **schema,
            "properties": {
                **schema["properties"],
                "tags": {**schema["properties"]["tags"], "x-structgen-copy": False},
            },
        },
        copy_from=(text,),
        copy_default=True,
    )
    assert off.copied_fields() == ()
    only = CopyJsonSchema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "x-structgen-copy": True},
                "b": {"type": "string"},
            },
        },
        copy_from=(text,),
        copy_default=False,
    )
    assert only.copied_fields() == ("/properties/a",)


def test_array_of_copied_numbers_has_no_more_items_than_numerals() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    grammar = compile_spec(CopyJsonSchema(schema, copy_from=("rooms 12 and 14",)))
    assert grammar.matches("[12,14]") and grammar.matches("[14,14]")
    assert not grammar.matches("[12,14,12]") and not grammar.matches("[13]")


def test_copy_keyword_without_sources_and_bad_values() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-structgen-copy": True}}}
    assert compile_json_schema(schema).matches('{"a":"anything"}')
    with pytest.raises(InvalidSchemaError) as info:
        compile_json_schema({"type": "string", "x-structgen-copy": "yes"})
    assert "x-structgen-copy" in str(info.value)


def test_several_sources_and_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"type": ["string", "null"]}},
        "required": ["v"],
    }
    grammar = compile_spec(CopyJsonSchema(schema, copy_from=("first text", "second one")))
    for value, ok in [("first", True), ("second one", True), ("text second", False), (None, True)]:
        assert grammar.matches(_doc("v", value)) == ok, value
