"""``gen(tools=...)``: calls in the chat template's format, parsed back into the capture
(greedy, tiny models: the ChatML fixture's fallback format and the Qwen-style template)."""

from __future__ import annotations

import json

import pytest

import structgen
from structgen import SamplingParams, assistant, gen, user
from structgen.errors import InvalidSchemaError, RequestError
from structgen.tools import FORMATS, ToolCallParser, collect, detect_format, tool_call_constraint

jsonschema = pytest.importorskip("jsonschema")

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 0, "maximum": 9},
                "b": {"type": "integer", "minimum": 0, "maximum": 9},
            },
            "required": ["a", "b"],
        },
    },
}
NOW = {"type": "function", "function": {"name": "now"}}


@pytest.fixture(scope="module")
def qwen_engine(tiny_tokenizer, tmp_path_factory):
    from structgen import Engine
    from tests.server.test_tool_calls_openai import tiny_qwen_dir

    path = tiny_qwen_dir(tiny_tokenizer, tmp_path_factory.mktemp("tiny_qwen_lang"))
    return Engine(str(path), dtype="float32", max_kv_tokens=2048, page_size=4)


@pytest.mark.parametrize("which", ["chatml", "qwen"])
def test_gen_tools_returns_parsed_calls(which, tiny_engine, request):
    engine = tiny_engine if which == "chatml" else request.getfixturevalue("qwen_engine")
    fmt = detect_format(engine.tokenizer.chat_template)
    assert fmt is FORMATS["structgen_json" if which == "chatml" else "hermes"]

    @structgen.function
    def prog(s):
        s += user("Add 2 and 3.") + assistant(gen("calls", tools=[ADD, NOW], max_tokens=60))

    s = prog.run(backend=engine)
    calls = s["calls"]
    assert calls and all(c["name"] in ("add", "now") for c in calls)
    for c in calls:
        if c["name"] == "add":
            jsonschema.validate(c["arguments"], ADD["function"]["parameters"])
    # the same greedy generation, by hand: the constraint of the format, then the parser
    prompt = engine.apply_chat_template([{"role": "user", "content": "Add 2 and 3."}])
    spec = tool_call_constraint(fmt, [ADD, NOW], "required")
    out = engine.generate([prompt], SamplingParams(max_tokens=60, temperature=0.0), spec)[0]
    parser = ToolCallParser(fmt, "call")
    _, want = collect(parser.feed(out.text) + parser.finish())
    assert calls == [
        {"name": w["function"]["name"], "arguments": json.loads(w["function"]["arguments"])}
        for w in want
    ]


def test_gen_tools_errors():
    bad = {"type": "function", "function": {"name": "b", "parameters": {"type": "nope"}}}
    with pytest.raises(InvalidSchemaError, match=r"tools\[0\] \('b'\).*/type"):
        gen("x", tools=[bad])
    with pytest.raises(RequestError, match="at most one"):
        gen("x", tools=[ADD], regex="a")
    with pytest.raises(RequestError, match="tool_choice"):
        gen("x", tools=[ADD], tool_choice="none")
    with pytest.raises(RequestError, match="not in tools"):
        gen("x", tools=[ADD], tool_choice={"type": "function", "function": {"name": "zz"}})
