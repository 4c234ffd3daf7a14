"""``const``/``enum`` by JSON equality (``json_schema.values``): numbers equal by value (``-2`` and
``-2.0``; never ``true``/``false``), objects equal whatever their key order. ``jsonschema`` is
the reference: every accepted text is valid, every canonical spelling of a valid value is
accepted."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.values import ANY_ORDER_BUDGET, MAX_ANY_ORDER_KEYS, number_spellings

from .._reference import jsonschema_valid as _valid


def _spellings(value) -> list[str]:
    """Texts that may or may not equal ``value``: canonical ones, padded, exponents, neighbours."""
    out = {json.dumps(value), str(value)}
    for x in (value, -value if value else 1):
        for form in (
            repr(float(x)) if abs(x) < 1e300 else "1e300",
            str(int(x)) if abs(x) < 1e300 else "1",
        ):
            out |= {form, form + "0", form + ".0", form + ".00", form + "e0", "-" + form}
    out |= {"true", "false", "null", "1e+16", "1e-07", "0.0", "-0.0", "-0", "9007199254740993.0"}
    return sorted(s for s in out if _is_json(s))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


NUMBERS = st.one_of(
    st.integers(-(10**25), 10**25),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [0, -0.0, 1.0, -2.0, 2**53, 2**53 + 1, float(2**53), 1e16, 1e-7, 0.1, 2.5e-300]
    ),
)


@settings(max_examples=300, deadline=None)
@given(value=NUMBERS, integer_only=st.booleans())
def test_number_spellings_are_exactly_equal_values(value, integer_only) -> None:
    regex = number_spellings(value, integer_only)
    canon = {
        json.dumps(v)
        for v in (
            value,
            float(value) if abs(value) < 1e308 else None,
            int(value) if float(value).is_integer() else None,
        )
        if v is not None and v == value
    }
    if integer_only:
        canon = {c for c in canon if re.fullmatch(r"-?[0-9]+", c)}
    for text in _spellings(value) + sorted(canon):
        ok = regex is not None and re.fullmatch(regex, text) is not None
        parsed = json.loads(text)
        if ok:  # accepted: equal under JSON equality, and a number
            assert not isinstance(parsed, bool) and parsed == value, (value, text)
            assert not integer_only or isinstance(parsed, int), (value, text)
        elif text in canon:  # what the canonical writer produces for an equal value
            raise AssertionError(f"{text!r} rejected for {value!r} ({regex})")


CASES = [
    ({"const": 1}, ["1", "1.0"], ["true", "01", "1.", "2", "1.01"]),
    ({"const": -2.0}, ["-2", "-2.0"], ["2", "-2.1"]),
    ({"const": 0}, ["0", "-0", "0.0", "-0.0"], ["false", "null", '""', "[]"]),
    ({"enum": [False, 0.5]}, ["false", "0.5"], ["0", "0.05", "true"]),
    ({"enum": [[0], {"k": 1}]}, ["[0]", "[0.0]", '{"k":1.0}'], ["[false]", '{"k":true}', "[0,0]"]),
    (
        {"const": 9007199254740992},
        ["9007199254740992", "9007199254740992.0"],
        ["9007199254740991", "9007199254740993"],
    ),
    ({"const": 1e16}, ["1e+16", "10000000000000000", "10000000000000000.0"], ["1e16x"]),
    ({"type": "integer", "enum": [1.0, 2.5]}, ["1"], ["2.5", "true"]),
    (
        {"const": {"a": 1, "b": [1, {"c": None}], "c": "x"}},
        [
            '{"a":1,"b":[1,{"c":null}],"c":"x"}',
            '{"c":"x","b":[1.0,{"c":null}],"a":1}',
            '{"b":[1,{"c":null}],"a":1,"c":"x"}',
        ],
        [
            '{"a":1,"c":"x"}',
            '{"a":1,"b":[1,{"c":null}],"c":"x","d":0}',
            '{"a":1,"a":1,"c":"x"}',
            '{"a":1,"b":[{"c":null},1],"c":"x"}',
        ],
    ),
]


def test_number_values_have_finitely_many_spellings() -> None:
    """Equal spellings beyond json.dumps' (1.00, 0.50) are valid instances but never written:
    a model allowed trailing zeros can emit them until max_tokens (a tool call cut short)."""
    for schema, longer in (
        ({"const": 1}, "1.00"),
        ({"enum": [1, 2]}, "1.0000000000"),
        ({"enum": [False, 0.5]}, "0.50"),
        ({"const": 0}, "-0.00"),
    ):
        assert _valid(schema, json.loads(longer))
        assert not compile_json_schema(schema).matches(longer), (schema, longer)


@pytest.mark.parametrize(("schema", "good", "bad"), CASES)
def test_const_and_enum_by_json_equality(schema, good, bad) -> None:
    grammar = compile_json_schema(schema)
    for text in good:
        assert _valid(schema, json.loads(text)), text  # the case itself is right
        assert grammar.matches(text), text
    for text in bad:
        assert not grammar.matches(text), text


def test_every_key_order_of_small_objects_and_listed_order_beyond() -> None:
    small = {k: i for i, k in enumerate("abcde"[:MAX_ANY_ORDER_KEYS])}
    grammar = compile_json_schema({"const": small})
    for order in itertools.permutations(small):
        assert grammar.matches(json.dumps({k: small[k] for k in order}, separators=(",", ":")))
    big = {k: i for i, k in enumerate("abcdefg"[: MAX_ANY_ORDER_KEYS + 1])}
    grammar = compile_json_schema({"const": big})
    assert grammar.matches(json.dumps(big, separators=(",", ":")))
    swapped = dict(reversed(list(big.items())))
    assert _valid({"const": big}, swapped)
    assert not grammar.matches(json.dumps(swapped, separators=(",", ":")))  # documented subset


def test_any_order_budget_keeps_the_listed_order_only() -> None:
    values = [{"a": i, "b": 0} for i in range(ANY_ORDER_BUDGET // 4 + 1)]
    grammar = compile_json_schema({"enum": values})
    assert grammar.matches('{"b":0,"a":0}')  # within the budget
    last = len(values) - 1
    assert grammar.matches('{"a":%d,"b":0}' % last)
    assert not grammar.matches('{"b":0,"a":%d}' % last)  # past it: listed order


def test_flexible_whitespace_inside_values() -> None:
    grammar = compile_json_schema({"const": {"a": [1, 2], "b": None}}, whitespace="flexible")
    assert grammar.matches('{ "b" : null , "a" : [ 1 , 2.0 ] }')
    assert not grammar.matches('{ "b" : null , "a" : [ 2 , 1 ] }')


@given(st.one_of(st.text(), st.booleans(), st.none(), st.integers(), st.floats(allow_nan=False)))
@settings(max_examples=400, deadline=None)
def test_json_text_is_json_dumps(value) -> None:
    """``values.json_text`` (a string through the encoder's own function) is
    ``json.dumps(value, ensure_ascii=False)``, lone surrogates and control characters
    included."""
    from structgen.fsm.json_schema.values import json_text

    assert json_text(value) == json.dumps(value, ensure_ascii=False)
