"""Tool prompt, grammar plan and the incremental call parser (no model)."""

from __future__ import annotations

import json

import pytest

from structgen.server.protocol import APIError, NamedToolChoice, Tool
from structgen.server.tools import ToolCallStream, collect, plan_tools

TOOLS = [
    Tool.model_validate({"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}),
    Tool.model_validate({"type": "function", "function": {"name": "now"}}),
]


def test_plan_modes_and_prompt():
    auto = plan_tools(TOOLS, None)
    assert auto.mode == "auto" and "plain text" in auto.system_text
    assert '"name": "get_weather"' in auto.system_text
    assert auto.constraint.pattern.endswith("|[^{][\\s\\S]*")
    req = plan_tools(TOOLS, "required")
    assert req.mode == "call" and len(req.constraint.schema["anyOf"]) == 2
    named = plan_tools(TOOLS, NamedToolChoice.model_validate({"function": {"name": "now"}}))
    assert named.constraint.schema["properties"]["name"] == {"const": "now"}
    assert plan_tools(TOOLS, "none") is None
    with pytest.raises(APIError, match="not in tools"):
        plan_tools(TOOLS, NamedToolChoice.model_validate({"function": {"name": "nope"}}))


@pytest.mark.parametrize("step", [1, 3, 100])
def test_call_stream_any_chunking(step):
    text = '{"name":"get_weather","arguments":{"city":"Pa\\"ris}"}}'
    ts = ToolCallStream("call")
    deltas = []
    for i in range(0, len(text), step):
        deltas += ts.feed(text[i:i + step])
    deltas += ts.finish()
    content, calls = collect(deltas)
    assert content is None and ts.is_complete_call
    assert calls[0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": 'Pa"ris}'}
    assert deltas[0]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": ""}


def test_auto_text_and_truncated_call():
    ts = ToolCallStream("auto")
    content, calls = collect(ts.feed("Hello ") + ts.feed("{x}") + ts.finish())
    assert content == "Hello {x}" and calls is None and not ts.is_tool_call
    ts = ToolCallStream("auto")
    content, calls = collect(ts.feed('{"name":"now","argu') + ts.finish())
    assert content == '{"name":"now","argu' and calls is None
