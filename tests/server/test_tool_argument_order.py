"""A tool call's arguments are written in the order of the tool's ``properties``, as
``response_format``'s JSON is (README: "object members in the order of the schema's
properties"): the tool's own order, never the keys sorted.

Reference: the call text ``ToolCallFormat.render_calls`` writes with the arguments in the
schema's order (accepted) and in sorted order (refused), in every format, for a named tool,
``required`` and ``strict``.
"""

from __future__ import annotations

import json

import pytest

from structgen.tools import FORMATS
from structgen.tools.constraint import tool_call_constraint

# listed out of alphabetical order, nested too, with a $ref to a sibling definition
PARAMS = {
    "type": "object",
    "$defs": {
        "When": {
            "type": "object",
            "properties": {"time": {"type": "string"}, "day": {"type": "string"}},
            "required": ["time", "day"],
        }
    },
    "properties": {
        "restaurant": {"type": "string"},
        "people": {"type": "integer"},
        "when": {"$ref": "#/$defs/When"},
    },
    "required": ["restaurant", "people", "when"],
}
IN_ORDER = {"restaurant": "Chez Nous", "people": 2, "when": {"time": "19:00", "day": "Mon"}}


def _sorted(value):
    return {k: _sorted(value[k]) for k in sorted(value)} if isinstance(value, dict) else value


def _text(fmt, args: dict) -> str:
    return fmt.render_calls([("book", json.dumps(args, separators=(",", ":")))])


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("choice", ["required", "named"])
@pytest.mark.parametrize("strict", [False, True])
def test_arguments_follow_the_schema_order(name, choice, strict):
    fmt = FORMATS[name]
    fn = {"name": "book", "parameters": PARAMS}
    if strict:
        fn["strict"] = True
    tools = [{"type": "function", "function": fn}]
    tool_choice = (
        "required" if choice == "required" else {"type": "function", "function": {"name": "book"}}
    )
    grammar = tool_call_constraint(fmt, tools, tool_choice).compile(None)
    assert list(_sorted(IN_ORDER)) != list(IN_ORDER)  # the two orders differ
    assert grammar.matches(_text(fmt, IN_ORDER))
    assert not grammar.matches(_text(fmt, _sorted(IN_ORDER)))
