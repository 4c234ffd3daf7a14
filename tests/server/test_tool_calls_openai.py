"""Native tool calls end to end: the real openai client against a server over the tiny
random Llama whose chat template is the Qwen-style fixture (calls as ``<tool_call>``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.server.conftest import in_process_server
from tests.tiny_llama import save_tiny_llama

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

QWEN = Path(__file__).resolve().parent.parent / "fixtures" / "chat_templates" / "qwen.jinja"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 8},
                "unit": {"enum": ["C", "F"]},
            },
            "required": ["city", "unit"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
            "required": ["a"],
        },
    },
}
TOOLS = [WEATHER, ADD]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MSGS = [{"role": "user", "content": "Weather in Lyon?"}]


def tiny_qwen_dir(tokenizer, path: Path) -> Path:
    """A tiny random Llama (2048 positions: the byte-level tiny tokenizer spells the tools
    section in ~600 tokens) with the Qwen-style chat template."""
    return save_tiny_llama(
        path, tokenizer, max_position_embeddings=2048, chat_template=QWEN.read_text()
    )


@pytest.fixture(scope="module")
def qwen_dir(tiny_tokenizer, tmp_path_factory) -> Path:
    """The tiny Llama with the Qwen-style template, saved."""
    return tiny_qwen_dir(tiny_tokenizer, tmp_path_factory.mktemp("tiny_qwen"))


@pytest.fixture(scope="module")
def qwen_server(qwen_dir):
    """Base URL of an in-process server over a tiny Llama with the Qwen-style template."""
    from structgen import AsyncEngine

    engine = AsyncEngine(str(qwen_dir), dtype="float32", max_kv_tokens=4096, page_size=4)
    with in_process_server(engine, "qwen-server", served_model_name="tiny-qwen") as base:
        yield base


@pytest.fixture(scope="module")
def oa(qwen_server):
    return openai.OpenAI(base_url=qwen_server + "/v1", api_key="x", max_retries=0, timeout=60)


def check_calls(calls) -> None:
    """Every call names a tool and its arguments are JSON valid against its schema."""
    assert calls
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_")
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])


def streamed(oa, **kw) -> tuple[str, dict[int, list], list[str]]:
    """(content, {index: [id, name, arguments]}, finish reasons) of a streamed request."""
    content, calls, reasons = "", {}, []
    for chunk in oa.chat.completions.create(**kw, stream=True):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            entry = calls.setdefault(tc.index, [None, None, ""])
            entry[0] = entry[0] or tc.id
            entry[1] = entry[1] or (tc.function.name if tc.function else None)
            entry[2] += (tc.function.arguments if tc.function else None) or ""
        if chunk.choices[0].finish_reason:
            reasons.append(chunk.choices[0].finish_reason)
    return content, calls, reasons


def test_required_and_named_streamed_and_not(oa):
    kw = {"model": "tiny-qwen", "messages": MSGS, "max_tokens": 80, "temperature": 0}
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        r = oa.chat.completions.create(**kw, tools=TOOLS, tool_choice=choice)
        msg = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls" and msg.content is None
        check_calls(msg.tool_calls)
        if isinstance(choice, dict):
            assert [c.function.name for c in msg.tool_calls] == ["get_weather"]
        content, calls, reasons = streamed(oa, **kw, tools=TOOLS, tool_choice=choice)
        assert content == "" and reasons == ["tool_calls"]
        assert [calls[i][1:] for i in sorted(calls)] == [
            [c.function.name, c.function.arguments] for c in msg.tool_calls
        ]
        assert sorted(calls) == list(range(len(calls)))


def test_parallel_calls_indices(oa):
    kw = {
        "model": "tiny-qwen",
        "messages": MSGS,
        "max_tokens": 120,
        "temperature": 0,
        "tools": [ADD],
        "tool_choice": "required",
        "extra_body": {"min_tokens": 40},  # the grammar's only way on after a call: another
    }
    r = oa.chat.completions.create(**kw)
    calls = r.choices[0].message.tool_calls
    assert len(calls) >= 2 and len({c.id for c in calls}) == len(calls)
    check_calls(calls)
    _, streamed_calls, _ = streamed(oa, **kw)
    assert sorted(streamed_calls) == list(range(len(calls)))
    one = oa.chat.completions.create(**{**kw, "parallel_tool_calls": False, "extra_body": {}})
    assert len(one.choices[0].message.tool_calls) == 1


def test_reasoning_then_call(oa):
    r = oa.chat.completions.create(
        model="tiny-qwen",
        messages=MSGS,
        max_tokens=90,
        temperature=0,
        tools=TOOLS,
        tool_choice="required",
        extra_body={"constraint_trigger": "</think>"},
    )
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"]  # the free text before "</think>"
    check_calls(msg.tool_calls)
    assert r.choices[0].finish_reason == "tool_calls"


def test_auto_calls_valid_text_is_content(oa):
    """In ``auto`` whatever the model writes is text, or calls that validate (the trigger
    cannot appear outside a checked call)."""
    for seed in range(4):
        r = oa.chat.completions.create(
            model="tiny-qwen",
            messages=MSGS,
            max_tokens=40,
            temperature=1.0,
            seed=seed,
            tools=TOOLS,
        )
        msg = r.choices[0].message
        assert "<tool_call>" not in (msg.content or "")
        if msg.tool_calls:
            check_calls(msg.tool_calls)


def test_history_with_calls_and_none(oa):
    """A conversation holding a call and its result renders; ``none`` gives text only,
    without the tools in the prompt."""
    r = oa.chat.completions.create(
        model="tiny-qwen",
        messages=MSGS,
        max_tokens=60,
        temperature=0,
        tools=TOOLS,
        tool_choice="required",
    )
    call = r.choices[0].message.tool_calls[0]
    history = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "12 C"},
    ]
    with_tools = oa.chat.completions.create(
        model="tiny-qwen", messages=history, max_tokens=3, tools=TOOLS, tool_choice="required"
    )
    none = oa.chat.completions.create(
        model="tiny-qwen", messages=history, max_tokens=3, tools=TOOLS, tool_choice="none"
    )
    assert none.choices[0].message.tool_calls is None
    assert none.usage.prompt_tokens < with_tools.usage.prompt_tokens  # no tools section


def test_bad_tool_schema_is_400_before_streaming(oa):
    bad = {
        "type": "function",
        "function": {
            "name": "broken",
            "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}},
        },
    }
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as info:
            oa.chat.completions.create(
                model="tiny-qwen", messages=MSGS, max_tokens=5, tools=[ADD, bad], stream=stream
            )
        assert info.value.status_code == 400
        message = info.value.body["message"]
        assert "tools[1]" in message and "broken" in message and "/properties/x/type" in message


def test_gen_tools_through_openai_backend(qwen_server, qwen_dir):
    """``gen(tools=...)`` with ``OpenAIBackend`` against the server: the calls equal
    those of the same program on a local Engine over the same weights (greedy)."""
    import structgen
    from structgen import Engine, OpenAIBackend, assistant, gen, user

    @structgen.function
    def prog(s, choice):
        s += user("Weather in Lyon?")
        s += assistant(gen("calls", tools=TOOLS, tool_choice=choice, max_tokens=80))

    backend = OpenAIBackend(qwen_server, model="tiny-qwen", tokenizer=str(qwen_dir))
    local = Engine(str(qwen_dir), dtype="float32", max_kv_tokens=2048, page_size=4)
    try:
        named = {"type": "function", "function": {"name": "add"}}
        for choice in ("required", named):
            got = prog.run(choice, backend=backend)["calls"]
            assert got and all(c["name"] in SCHEMAS for c in got)
            for c in got:
                jsonschema.validate(c["arguments"], SCHEMAS[c["name"]])
            assert got == prog.run(choice, backend=local)["calls"]
            if choice is named:
                assert [c["name"] for c in got] == ["add"]
    finally:
        backend.close()
