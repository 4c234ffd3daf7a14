"""The real openai client against ``structgen serve`` (tiny Llama) in a subprocess."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from tests.server.conftest import API_KEY, MAX_RUNNING, wait_idle

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

MSGS = [{"role": "user", "content": "Tell me about Lyon."}]


@pytest.fixture(scope="module")
def oa(tiny_server):
    return openai.OpenAI(base_url=tiny_server + "/v1", api_key=API_KEY, max_retries=0, timeout=60)


def stats(base):
    return httpx.get(base + "/stats", timeout=10).json()


def test_models_and_401(tiny_server, oa):
    assert [m.id for m in oa.models.list()] == ["tiny"]
    bad = openai.OpenAI(base_url=tiny_server + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="tiny", messages=MSGS, max_tokens=2)


def test_chat_stream_equals_greedy(oa):
    kw = {
        "model": "tiny",
        "messages": MSGS,
        "max_tokens": 12,
        "temperature": 0,
        "extra_body": {"ignore_eos": True},
    }
    full = oa.chat.completions.create(**kw)
    assert full.choices[0].finish_reason == "length"
    assert full.usage.completion_tokens == 12
    stream = oa.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True})
    parts, usage = [], None
    for chunk in stream:
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
        if chunk.usage:
            usage = chunk.usage
    assert "".join(parts) == full.choices[0].message.content
    assert usage.completion_tokens == 12


def test_completions_n_logprobs_cached(oa):
    prompt = "def f(x): return x * 2  # a function. " * 4
    r1 = oa.completions.create(
        model="tiny",
        prompt=prompt,
        max_tokens=4,
        n=2,
        logprobs=1,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert len(r1.choices) == 2 and r1.choices[0].text == r1.choices[1].text
    assert len(r1.choices[0].logprobs.token_logprobs) == 4
    r2 = oa.completions.create(
        model="tiny", prompt=prompt, max_tokens=4, temperature=0, extra_body={"ignore_eos": True}
    )
    assert r2.choices[0].text == r1.choices[0].text
    assert r2.usage.prompt_tokens_details.cached_tokens > 0


def test_regex_choice_json_schema(oa):
    r = oa.chat.completions.create(
        model="tiny", messages=MSGS, max_tokens=10, extra_body={"regex": r"[0-9]{3}"}
    )
    assert re.fullmatch(r"[0-9]{3}", r.choices[0].message.content)
    r = oa.chat.completions.create(
        model="tiny", messages=MSGS, max_tokens=10, extra_body={"choice": ["red", "green"]}
    )
    assert r.choices[0].message.content in ("red", "green")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    r = oa.chat.completions.create(
        model="tiny",
        messages=MSGS,
        max_tokens=20,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "r", "schema": schema, "strict": True},
        },
    )
    assert isinstance(json.loads(r.choices[0].message.content)["ok"], bool)


TOOLS = [
    {
        "type": "function",
        "function": {  # small: the tiny model's context is 512 tokens
            "name": "weather",
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
]


def test_tools_named_and_streamed(oa):
    r = oa.chat.completions.create(
        model="tiny",
        messages=MSGS,
        max_tokens=40,
        temperature=0,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "weather"}},
    )
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "weather"
    args = json.loads(call.function.arguments)
    assert set(args) == {"city", "unit"} and args["unit"] in ("C", "F")
    stream = oa.chat.completions.create(
        model="tiny",
        messages=MSGS,
        max_tokens=40,
        temperature=0,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "weather"}},
        stream=True,
    )
    name, pieces = None, []
    for chunk in stream:
        for tc in chunk.choices[0].delta.tool_calls or []:
            name = name or tc.function.name
            pieces.append(tc.function.arguments or "")
    assert name == "weather" and "".join(pieces) == call.function.arguments
    # the conversation continues with the call and its result
    r = oa.chat.completions.create(
        model="tiny",
        max_tokens=5,
        tools=TOOLS,
        tool_choice="none",
        messages=MSGS
        + [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "12 C"},
        ],
    )
    assert r.choices[0].finish_reason in ("stop", "length") and not r.choices[0].message.tool_calls


def test_bad_requests(oa):
    with pytest.raises(openai.BadRequestError) as ei:
        oa.chat.completions.create(model="tiny", messages=MSGS, n=99)
    assert ei.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError, match="context"):
        oa.completions.create(model="tiny", prompt="x " * 700)
    with pytest.raises(openai.BadRequestError, match="minimum"):
        oa.chat.completions.create(
            model="tiny",
            messages=MSGS,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": "zero"}},
            },
        )


def _aborted(base: str) -> float:
    """The server's count of requests finished with ``"abort"`` (from /metrics)."""
    text = httpx.get(base + "/metrics", timeout=10).text
    m = re.search(r'structgen_requests_finished_total\{finish_reason="abort"\} (\S+)', text)
    return float(m.group(1)) if m else 0.0


def _wait_aborted(base: str, before: float, timeout_s: float = 30.0) -> float:
    """Poll the abort count until it passes ``before`` (or the deadline); returns it."""
    deadline = time.monotonic() + timeout_s
    while _aborted(base) <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    return _aborted(base)


def test_32_concurrent_then_pages_free(gated_server):
    """32 concurrent chats all succeed; ``max_running_requests`` caps the engine's running
    set (recorded at every step boundary) while the others wait; afterwards every page is
    free or cached. The engine is paused until all 32 are queued, so the cap is reached
    whatever the machine's speed."""
    base, gate = gated_server
    engine = gate.engine
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=API_KEY, max_retries=0, timeout=120)

    async def one(i):
        return await client.chat.completions.create(
            model="tiny",
            max_tokens=16,
            temperature=0,
            extra_body={"ignore_eos": True},
            messages=[
                {"role": "system", "content": "Shared system prompt. " * 4},
                {"role": "user", "content": f"question {i}"},
            ],
        )

    async def run():
        engine.pause()
        try:
            tasks = [asyncio.ensure_future(one(i)) for i in range(32)]
            deadline = time.monotonic() + 60
            while engine.stats()["waiting"] < 32:  # polled: every request is queued
                assert time.monotonic() < deadline, engine.stats()
                await asyncio.sleep(0.01)
            gate.settle()  # the previous test's last step is recorded before we count
            first = len(gate.seen)
            gate.resume()
            return await asyncio.wait_for(asyncio.gather(*tasks), 120), first
        finally:
            gate.resume()
            await client.close()

    outs, first = asyncio.run(run())
    seen = gate.seen[first:]
    assert all(o.usage.completion_tokens == 16 for o in outs)
    assert max(r for r, _ in seen) == MAX_RUNNING  # the cap is reached, never passed
    assert seen[0][1] >= 32 - MAX_RUNNING  # the others wait
    s = wait_idle(lambda: stats(base))
    assert s["running"] == 0 and s["pages_free"] + s["pages_cached"] == s["pages_total"]


def test_disconnect_mid_stream_aborts(gated_server):
    """A client that closes its stream after a few events aborts the request: the engine is
    paused after 40 of the 400 tokens, so the request is surely unfinished."""
    base, gate = gated_server
    headers = {"Authorization": f"Bearer {API_KEY}"}
    body = {
        "model": "tiny",
        "prompt": "Once upon a time",
        "max_tokens": 400,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
    }
    before = _aborted(base)
    gate.pause_after(40)
    try:
        with httpx.stream(
            "POST", base + "/v1/completions", json=body, headers=headers, timeout=30
        ) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i >= 4:
                    break
        assert _wait_aborted(base, before) == before + 1
        s = stats(base)  # the abort was handled while the engine stayed paused
        assert s["running"] == 0 and s["pages_free"] + s["pages_cached"] == s["pages_total"]
    finally:
        gate.resume()


ADD = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {"a": {"enum": [1, 2]}},
                "required": ["a"],
            },
        },
    }
]


def test_parallel_tool_calls(oa):
    """Several calls in one response (``min_tokens`` makes the grammar's only way on after
    the first call a second one), streamed as deltas with indexes 0, 1, ..."""
    kw = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 70,
        "temperature": 0,
        "tools": ADD,
        "tool_choice": "required",
        "parallel_tool_calls": True,
        "extra_body": {"min_tokens": 25},
    }
    r = oa.chat.completions.create(**kw)
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) >= 2
    assert all(json.loads(c.function.arguments)["a"] in (1, 2) for c in calls)
    merged: dict[int, list[str]] = {}
    for chunk in oa.chat.completions.create(**kw, stream=True):
        for tc in chunk.choices[0].delta.tool_calls or []:
            entry = merged.setdefault(tc.index, [None, ""])
            entry[0] = entry[0] or tc.function.name
            entry[1] += tc.function.arguments or ""
    assert [tuple(merged[i]) for i in sorted(merged)] == [
        (c.function.name, c.function.arguments) for c in calls
    ]
    one = oa.chat.completions.create(**{**kw, "parallel_tool_calls": False})
    assert len(one.choices[0].message.tool_calls) == 1


def test_trigger_and_guided_aliases(oa):
    import jsonschema

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    r = oa.chat.completions.create(
        model="tiny",
        messages=MSGS,
        max_tokens=40,
        temperature=0,
        extra_body={"guided_json": schema, "constraint_trigger": "</think>"},
    )
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"]  # the free text before "</think>"
    jsonschema.validate(json.loads(msg.content), schema)
    r = oa.completions.create(
        model="tiny", prompt="x", max_tokens=10, extra_body={"guided_regex": "[0-9]{2}"}
    )
    assert re.fullmatch("[0-9]{2}", r.choices[0].text)
    r = oa.completions.create(
        model="tiny", prompt="x", max_tokens=10, extra_body={"guided_choice": ["up", "down"]}
    )
    assert r.choices[0].text in ("up", "down")


def test_disconnect_non_streamed_aborts(gated_server):
    """A non-streamed request whose client gives up is aborted and its pages freed. The
    engine is paused after 2 of the 450 tokens, so no response can come before the
    client's read timeout."""
    base, gate = gated_server
    headers = {"Authorization": f"Bearer {API_KEY}"}
    body = {
        "model": "tiny",
        "prompt": "Once upon a time",
        "max_tokens": 450,
        "ignore_eos": True,
        "temperature": 0,
    }
    before = _aborted(base)
    gate.pause_after(2)
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                base + "/v1/completions",
                json=body,
                headers=headers,
                timeout=httpx.Timeout(10.0, read=0.5),
            )
        assert _wait_aborted(base, before) == before + 1
        s = stats(base)  # the abort was handled while the engine stayed paused
        assert s["running"] == 0 and s["pages_free"] + s["pages_cached"] == s["pages_total"]
    finally:
        gate.resume()
