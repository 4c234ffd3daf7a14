"""``multipleOf`` with a non-decimal step on numbers (0.5, 0.25, 0.75, 2.5, 0.3, 0.125,
1/3), alone, within bounds and inside ``oneOf``/``not`` (#20: the issue's own example
``oneOf: [integer, number multipleOf 0.5]``), against ``jsonschema``.

Brute force over a fixed set of number spellings (signs, integer parts, fractions with
and without trailing zeros, exponents). The reference reads numbers exactly
(``Decimal``; ``jsonschema``'s ``multipleOf`` on two floats divides in binary, so
``0.9`` would not be a multiple of ``0.3``), an integer-valued value as the int it is
(the 2020-12 reading: ``7.0`` is the integer 7). Checked for every spelling ``s`` of a
value ``v``: ``matches(s)`` implies ``v`` is valid (sound, exponent spellings included);
``matches(canonical text of v) == valid(v)`` (exact over the one spelling every grammar
shares: integers as integers, other values without trailing zeros or exponent); and for
the schemas without ``oneOf``/``not``, ``matches(s) == valid(v)`` for every spelling
without an exponent (the numeric lowering writes all of them).
"""

from __future__ import annotations

import itertools
import json
from decimal import Decimal
from fractions import Fraction

import jsonschema
import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.numeric import decimal_multiple_regex

_WHOLES = ["0", "1", "2", "3", "7", "10", "12", "25", "100", "123"]
_FRACTIONS = ["", ".0", ".00", ".5", ".50", ".25", ".75", ".125", ".3", ".30", ".05", ".9",
              ".333", ".1", ".2", ".6", ".8", ".4", ".375", ".625"]  # fmt: skip
_EXPONENTS = ["", "e0", "E1", "e-1", "e+2", "e-2"]
SPELLINGS = [
    sign + whole + frac + exp
    for sign, whole, frac, exp in itertools.product(["", "-"], _WHOLES, _FRACTIONS, _EXPONENTS)
]


def _value(text: str):
    """The exact value of a JSON number: an int where it is integer-valued, else a Decimal."""
    v = json.loads(text, parse_float=Decimal)
    return int(v) if isinstance(v, Decimal) and v == v.to_integral_value() else v


def _canonical_text(v) -> str:
    return str(v) if isinstance(v, int) else format(v.normalize(), "f")


STEPS = ["0.5", "0.25", "0.75", "2.5", "12.5", "0.8", "0.3", "0.125"]
EXACT_SCHEMAS = [
    *({"type": "number", "multipleOf": float(step)} for step in STEPS),
    {"type": "number", "multipleOf": 0.5, "minimum": -2, "exclusiveMaximum": 10.5},
    {"type": "number", "multipleOf": 0.25, "exclusiveMinimum": 0.25, "maximum": 100},
]
CANONICAL_SCHEMAS = [
    {"oneOf": [{"type": "integer"}, {"type": "number", "multipleOf": 0.5}]},
    {"oneOf": [{"type": "number", "multipleOf": 0.5}, {"type": "number", "multipleOf": 0.75}]},
    {"type": "number", "not": {"multipleOf": 0.25}},
    {"oneOf": [{"multipleOf": 2.5}, {"type": "number", "maximum": 3}]},
]


def _reference(schema):
    exact = json.loads(json.dumps(schema), parse_float=Decimal)
    return jsonschema.Draft202012Validator(exact).is_valid


@pytest.mark.timeout(120)
@pytest.mark.parametrize("schema", EXACT_SCHEMAS + CANONICAL_SCHEMAS, ids=json.dumps)
def test_number_multiples_agree_with_jsonschema(schema):
    grammar = compile_json_schema(schema)
    valid = _reference(schema)
    exact = schema in EXACT_SCHEMAS
    seen_valid = seen_invalid = 0
    for text in SPELLINGS:
        v = _value(text)
        ok = valid(v)
        seen_valid += ok
        seen_invalid += not ok
        if grammar.matches(text):
            assert ok, (text, "accepted but invalid")
        assert grammar.matches(_canonical_text(v)) is ok, (text, _canonical_text(v))
        if exact and "e" not in text.lower():
            assert grammar.matches(text) is ok, text
    assert seen_valid > 50 and seen_invalid > 50  # the spellings probe both sides


def test_the_issue_example_against_7_and_7_0():
    """``oneOf: [integer, number multipleOf 0.5]``: an integer matches both branches, so
    ``7`` and ``7.0`` (the same value) are invalid; ``7.5`` is valid, as ``jsonschema``."""
    schema = {"oneOf": [{"type": "integer"}, {"type": "number", "multipleOf": 0.5}]}
    grammar = compile_json_schema(schema)
    for text, ok in [("7", False), ("7.0", False), ("7.5", True), ("-0.5", True), ("0", False)]:
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is ok
        assert grammar.matches(text) is ok, text
    assert not grammar.matches("7.50") and not grammar.matches("75e-1")  # other spellings


@pytest.mark.parametrize(
    "step", ["0.5", "0.25", "0.75", "2.5", "12.5", "0.8", "0.3", "0.125", "1/3", "0.001"]
)
def test_decimal_multiple_regex_brute_force(step):
    """Every spelling ``-?d+(.d+)?`` of 0..30 with up to 3 fraction digits: matched exactly
    when its value is a multiple of ``step`` (exact arithmetic)."""
    import re

    regex = re.compile(decimal_multiple_regex(Fraction(step)))
    s = Fraction(step)
    for n in range(0, 30_000, 37):
        for digits in (0, 1, 2, 3):
            text = f"{n / 1000:.{digits}f}"
            for t in (text, "-" + text, text + "0" if digits else text):
                expected = (Fraction(t) / s).denominator == 1
                assert bool(regex.fullmatch(t)) is expected, (step, t)


def test_steps_too_large_for_a_regex_are_still_refused():
    with pytest.raises(UnsupportedSchemaError, match="multipleOf"):
        compile_json_schema({"type": "number", "multipleOf": 0.07})
    assert decimal_multiple_regex(Fraction("0.0001")) is None  # past MAX_FRACTION_DIGITS
