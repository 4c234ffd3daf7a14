"""``structgen.fsm.nesting`` (#20): JSON decoding and encoding at any depth, checked against
``json`` (where ``json`` can recurse: the values are wrapped 150 containers deep, past the
point where ``nesting`` switches to its iterative code, within ``json``'s reach), and the
depth limits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.errors import GrammarTooComplexError
from structgen.fsm.nesting import MAX_JSON_DEPTH, check_depth, dumps, fresh_stack, json_depth, loads

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


def _wrap(value, depth: int):
    for i in range(depth):
        value = [value] if i % 2 else {"k": value, "x": 1}
    return value


@settings(max_examples=60, deadline=None)
@given(_VALUES)
def test_loads_and_dumps_agree_with_json(value):
    deep = _wrap(value, 150)
    text = json.dumps(deep)
    assert loads(text) == deep
    assert dumps(deep) == text
    assert dumps(deep, sort_keys=True) == json.dumps(deep, sort_keys=True)
    depth = check_depth(deep, 10_000, "value")  # the depth a caller passes on to dumps
    assert depth == json_depth(deep)[0]
    assert dumps(deep, depth=depth) == text
    shallow = _wrap(value, 3)
    assert dumps(shallow, depth=check_depth(shallow, 10_000, "value")) == json.dumps(shallow)
    spaced = json.dumps(deep, indent=1)
    assert loads(spaced) == deep


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200 + "]" * 199,
        "[" * 200 + "1,]" + "]" * 199,
        '[{"a" 1}' + "]",
        "[" * 200 + "nul" + "]" * 200,
    ],
)
def test_loads_rejects_what_json_rejects(text):
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        loads(text)


def test_depth_1000_round_trips_and_100000_names_the_limit():
    text = "[" * 1000 + '{"a": 1}' + "]" * 1000
    value = loads(text)
    assert json_depth(value) == (1001, "/0" * 1000)
    assert dumps(value) == text  # (== on the values would recurse)
    with pytest.raises(GrammarTooComplexError, match=f"the depth limit is {MAX_JSON_DEPTH}"):
        loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(GrammarTooComplexError, match="more than 500 .* at /0/0/0"):
        check_depth(value, 500, "value")


def test_fresh_stack_returns_and_raises():
    assert fresh_stack(sum, [1, 2]) == 3
    with pytest.raises(ZeroDivisionError):
        fresh_stack(lambda: 1 / 0)
