"""gen(json_schema=..., max_tokens=N) cut by max_tokens: the budget closed the JSON, so the
capture is the parsed value and ``state.truncated(name)`` is True; a JSON cut before it
is complete still fails the program (tiny random model: it never ends a string itself)."""

from __future__ import annotations

import jsonschema
import pytest

import structgen
from structgen import SamplingParams, gen
from structgen.errors import ProgramError
from structgen.fsm.spec import JsonSchema

TICKET = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "prio": {"type": "integer"}},
    "required": ["summary", "prio"],
}


def _prog(max_tokens):
    @structgen.function
    def prog(s):
        s += "Ticket:\n" + gen("ticket", json_schema=TICKET, max_tokens=max_tokens)
        s += "\nNote:" + gen("note", max_tokens=3)

    return prog


def test_a_budget_closed_json_is_captured_and_marked_truncated(tiny_engine):
    s = _prog(24).run(backend=tiny_engine)
    params = SamplingParams(max_tokens=24, temperature=0.0)
    (ref,) = tiny_engine.generate(["Ticket:\n"], params, JsonSchema(TICKET))
    assert ref.finish_reason == "length"  # the engine's own output was cut too
    jsonschema.validate(s["ticket"], TICKET)
    assert s.text().startswith("Ticket:\n" + ref.text)
    assert s.truncated("ticket") is True
    assert s.truncated("note") is True  # a plain gen that ran to its max_tokens


def test_a_complete_json_is_not_truncated(tiny_engine):
    small = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

    @structgen.function
    def prog(s):
        s += "A:" + gen("a", json_schema=small, max_tokens=30)

    s = prog.run(backend=tiny_engine)
    assert isinstance(s["a"]["ok"], bool)
    assert s.truncated("a") is False
    with pytest.raises(KeyError, match="no generation captured as 'b'"):
        s.truncated("b")


def test_a_json_cut_before_it_closes_still_fails(tiny_engine):
    with pytest.raises(ProgramError) as info:
        _prog(2).run(backend=tiny_engine)
    assert str(info.value.original) == (
        "gen(json_schema=...) hit max_tokens=2 before the JSON was complete; "
        "raise the gen's max_tokens"
    )
