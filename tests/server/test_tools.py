"""Tool prompt, grammar plan and the incremental call parser (no model)."""

from __future__ import annotations

import json

import pytest

from structgen.server.protocol import APIError, NamedToolChoice, Tool
from structgen.server.tools import collect, plan_tools
from structgen.tools import FORMATS, ToolCallParser


def fallback_parser(mode: str) -> ToolCallParser:
    """The parser of the fallback convention (``structgen_json``)."""
    return ToolCallParser(FORMATS["structgen_json"], mode)


TOOLS = [
    Tool.model_validate(
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather of a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ),
    Tool.model_validate({"type": "function", "function": {"name": "now"}}),
]


def test_plan_modes_and_prompt():
    auto = plan_tools(TOOLS, None)
    assert auto.mode == "auto" and "plain text" in auto.system_text
    assert '"name": "get_weather"' in auto.system_text
    assert auto.constraint.pattern.endswith("|[^{][\\s\\S]*")
    req = plan_tools(TOOLS, "required", parallel=False)
    weather = '{"name":"get_weather","arguments":{"city":"Paris"}}'
    now = '{"name":"now","arguments":{}}'
    g = req.constraint.compile(None)  # one call of either tool
    assert req.mode == "call" and g.matches(weather) and g.matches(now)
    assert not g.matches(weather + "\n" + now) and not g.matches('{"name":"x","arguments":{}}')
    assert "several tools" not in req.system_text
    par = plan_tools(TOOLS, "required")  # parallel_tool_calls absent: OpenAI's default, on
    assert par.parallel and "one such JSON object per line" in par.system_text
    named = plan_tools(TOOLS, NamedToolChoice.model_validate({"function": {"name": "now"}}))
    g = named.constraint.compile(None)
    assert g.matches(now) and not g.matches(weather) and not named.parallel
    assert plan_tools(TOOLS, "none") is None
    with pytest.raises(APIError, match="not in tools"):
        plan_tools(TOOLS, NamedToolChoice.model_validate({"function": {"name": "nope"}}))


@pytest.mark.parametrize("step", [1, 3, 100])
def test_call_stream_any_chunking(step):
    text = '{"name":"get_weather","arguments":{"city":"Pa\\"ris}"}}'
    ts = fallback_parser("call")
    deltas = []
    for i in range(0, len(text), step):
        deltas += ts.feed(text[i : i + step])
    deltas += ts.finish()
    content, calls = collect(deltas)
    assert content is None and ts.is_complete_call
    assert calls[0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": 'Pa"ris}'}
    assert deltas[0]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": ""}


def test_auto_text_and_truncated_call():
    ts = fallback_parser("auto")
    content, calls = collect(ts.feed("Hello ") + ts.feed("{x}") + ts.finish())
    assert content == "Hello {x}" and calls is None and not ts.is_tool_call
    ts = fallback_parser("auto")
    content, calls = collect(ts.feed('{"name":"now","argu') + ts.finish())
    assert content == '{"name":"now","argu' and calls is None


def test_parallel_grammar_accepts_lines_of_calls():
    # the constraints are Regex specs with shared definitions: compiled as specs
    par = plan_tools(TOOLS, "required").constraint.compile(None)
    one = '{"name":"get_weather","arguments":{"city":"Paris"}}'
    two = one + '\n{"name":"now","arguments":{}}'
    assert par.matches(one) and par.matches(two) and not par.matches(two + "\n")
    single = plan_tools(TOOLS, "auto", parallel=False).constraint.compile(None)
    assert single.matches(one) and not single.matches(two) and single.matches("Hi {")
    auto = plan_tools(TOOLS, "auto").constraint.compile(None)
    assert auto.matches(two) and not auto.matches('{"name":"nope","arguments":{}}')


@pytest.mark.parametrize("step", [1, 2, 7, 1000])
def test_parallel_call_stream_indexes(step):
    calls = [
        ("get_weather", '{"city":"a}b\\"]{","n":[1,{"x":2}]}'),
        ("now", "{}"),
        ("get_weather", '{"city":"Rome"}'),
    ]
    text = "\n".join(
        json.dumps({"name": n, "arguments": json.loads(a)}, separators=(",", ":")) for n, a in calls
    )
    ts = fallback_parser("auto")
    deltas = []
    for i in range(0, len(text), step):
        deltas += ts.feed(text[i : i + step])
    deltas += ts.finish()
    content, merged = collect(deltas)
    assert content is None and ts.is_complete_call
    assert [c["function"]["name"] for c in merged] == [n for n, _ in calls]
    assert [json.loads(c["function"]["arguments"]) for c in merged] == [
        json.loads(a) for _, a in calls
    ]
    assert len({c["id"] for c in merged}) == 3
    indexes = [tc["index"] for d in deltas for tc in d.get("tool_calls", ())]
    assert indexes == sorted(indexes) and set(indexes) == {0, 1, 2}


def test_truncated_second_call():
    ts = fallback_parser("call")
    text = '{"name":"now","arguments":{}}\n{"name":"get_weather","arguments":{"ci'
    content, calls = collect(ts.feed(text) + ts.finish())
    assert [c["function"]["name"] for c in calls] == ["now", "get_weather"]
    assert calls[1]["function"]["arguments"] == '{"ci' and not ts.is_complete_call
    assert content is None
