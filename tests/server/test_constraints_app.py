"""In process (TestClient, tiny Llama): constraint_trigger, vLLM's guided_* aliases,
parallel tool calls; references: jsonschema, re, the unconstrained greedy output."""

from __future__ import annotations

import json
import re

import jsonschema

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["ok", "n"],
}


def test_trigger_free_text_then_schema(client, tiny_async_engine):
    """Before the trigger the output is the model's own greedy text; after it, JSON valid
    against the schema (the token budget makes the small random model write the trigger).
    Reference: the unconstrained greedy run with the tokens a constraint never allows
    (special tokens, EOS) banned by ``logit_bias``."""
    base = {
        "model": "tiny",
        "prompt": "Reasoning: the answer is",
        "temperature": 0,
        "max_tokens": 48,
    }
    vocab = tiny_async_engine.engine.vocab
    ban = {str(t): -100.0 for t in vocab.special_token_ids | vocab.eos_token_ids}
    free = client.post(COMP, json={**base, "logit_bias": ban}).json()["choices"][0]["text"]
    r = client.post(
        COMP,
        json={
            **base,
            "constraint_trigger": "</think>",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "a", "schema": SCHEMA, "strict": True},
            },
        },
    )
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    head, sep, answer = choice["text"].partition("</think>")
    assert sep and choice["finish_reason"] in ("stop", "length")  # length: budget-steered
    jsonschema.validate(json.loads(answer), SCHEMA)
    assert len(head) >= 20 and free.startswith(head[:20]), (head, free)


def test_trigger_with_regex_choice_and_stream(client):
    """Chat splits at the trigger, as vLLM's reasoning parsers do: ``reasoning_content``
    before it, ``content`` (the constrained answer) after it; streamed the same way."""
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Pick one."}],
        "temperature": 0,
        "max_tokens": 30,
        "constraint_trigger": "ANSWER:",
        "guided_choice": ["red", "green"],
    }
    msg = client.post(CHAT, json=body).json()["choices"][0]["message"]
    assert msg["content"] in ("red", "green")
    assert msg["reasoning_content"] and "ANSWER:" not in msg["reasoning_content"]
    r = client.post(CHAT, json={**body, "stream": True})
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == msg["content"]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == msg["reasoning_content"]
    comp = client.post(
        COMP,
        json={
            "model": "tiny",
            "prompt": "Pick one.",
            "temperature": 0,
            "max_tokens": 30,
            "constraint_trigger": "ANSWER:",
            "choice": ["red", "green"],
        },
    ).json()["choices"][0]["text"]
    assert re.fullmatch(r"(?s).*?ANSWER:(red|green)", comp)  # completions: the whole text


def _error(r, param):
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    return err


def test_trigger_errors(client):
    msgs = [{"role": "user", "content": "Hi"}]
    err = _error(
        client.post(
            CHAT, json={"model": "tiny", "messages": msgs, "constraint_trigger": "</think>"}
        ),
        "constraint_trigger",
    )
    assert "needs a constraint" in err["message"]
    _error(
        client.post(
            CHAT, json={"model": "tiny", "messages": msgs, "constraint_trigger": "", "regex": "a"}
        ),
        "constraint_trigger",
    )
    tools = [{"type": "function", "function": {"name": "f"}}]
    _error(
        client.post(
            CHAT,
            json={
                "model": "tiny",
                "messages": msgs,
                "tools": tools,
                "constraint_trigger": "x",
                "regex": "a",
            },
        ),
        "regex",
    )


def test_guided_aliases(client):
    base = {"model": "tiny", "prompt": "Answer:", "temperature": 0, "max_tokens": 30}
    r = client.post(COMP, json={**base, "guided_regex": r"[a-c]{4}"}).json()
    assert re.fullmatch(r"[a-c]{4}", r["choices"][0]["text"])
    r = client.post(COMP, json={**base, "guided_choice": ["alpha", "beta"]}).json()
    assert r["choices"][0]["text"] in ("alpha", "beta")
    for schema in (SCHEMA, json.dumps(SCHEMA)):
        r = client.post(COMP, json={**base, "guided_json": schema}).json()
        jsonschema.validate(json.loads(r["choices"][0]["text"]), SCHEMA)
    # the alias gives the same output as our own field
    a = client.post(COMP, json={**base, "regex": "[0-9]{3}"}).json()["choices"][0]["text"]
    b = client.post(COMP, json={**base, "guided_regex": "[0-9]{3}"}).json()["choices"][0]["text"]
    assert a == b
    err = _error(client.post(COMP, json={**base, "guided_json": "{nope"}), "guided_json")
    assert "not valid JSON" in err["message"]
    err = _error(
        client.post(COMP, json={**base, "regex": "a", "guided_choice": ["a"]}), "guided_choice"
    )
    assert "at most one" in err["message"]
    err = _error(
        client.post(
            COMP,
            json={
                **base,
                "guided_json": {"type": "object", "properties": {"a": {"type": "strang"}}},
            },
        ),
        "guided_json",
    )
    assert "/properties/a" in err["message"]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {  # one small tool:
                "type": "object",
                "properties": {"a": {"enum": [1, 2]}},
                "required": ["a"],
            },
        },
    }
]  # 512 ctx
PARAMS = {"add": TOOLS[0]["function"]["parameters"]}


def test_parallel_tool_calls_stream_and_full(client):
    """``min_tokens`` bans EOS after the first call, so the grammar's only way on is a
    second call on a new line; streamed deltas carry indexes 0, 1, ... and merge into
    the non-streamed ``tool_calls``."""
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 70,
        "min_tokens": 25,
        "temperature": 0,
        "tools": TOOLS,
        "tool_choice": "required",
    }
    full = client.post(CHAT, json=body).json()["choices"][0]
    calls = full["message"]["tool_calls"]
    assert full["finish_reason"] == "tool_calls" and len(calls) >= 2, full
    for c in calls:
        jsonschema.validate(json.loads(c["function"]["arguments"]), PARAMS[c["function"]["name"]])
    assert len({c["id"] for c in calls}) == len(calls)
    r = client.post(CHAT, json={**body, "stream": True})
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    merged: dict[int, dict] = {}
    for c in chunks:
        for tc in c["choices"][0]["delta"].get("tool_calls") or []:
            m = merged.setdefault(tc["index"], {"name": None, "arguments": ""})
            if tc.get("id"):
                m["name"] = tc["function"]["name"]
            m["arguments"] += tc["function"]["arguments"]
    assert sorted(merged) == list(range(len(calls)))
    assert [(m["name"], m["arguments"]) for _, m in sorted(merged.items())] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in calls
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    single = client.post(CHAT, json={**body, "parallel_tool_calls": False}).json()["choices"][0]
    assert len(single["message"]["tool_calls"]) == 1


def test_bad_tool_schema_is_400(client):
    bad = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"x": {"type": "strang"}}},
            },
        }
    ]
    for choice in ("auto", "required"):
        r = client.post(
            CHAT,
            json={
                "model": "tiny",
                "messages": [{"role": "user", "content": "x"}],
                "tools": bad,
                "tool_choice": choice,
            },
        )
        err = _error(r, "tools[0].function.parameters")  # the tool, then the pointer
        assert "tools[0] ('f')" in err["message"] and err["code"] == "invalid_schema"
        assert "/properties/x/type" in err["message"]


def test_min_tokens_above_the_room_left_is_400(client):
    r = client.post(
        COMP, json={"model": "tiny", "prompt": "x " * 250, "max_tokens": 400, "min_tokens": 300}
    )
    err = _error(r, "min_tokens")
    assert "left in the context" in err["message"]


def test_reasoning_then_tool_calls(client):
    """constraint_trigger with tools: free reasoning, then the call(s) under the tool
    grammar; streamed deltas reassemble into the non-streamed message."""
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 70,
        "temperature": 0,
        "tools": TOOLS,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "constraint_trigger": "</think>",
    }
    full = client.post(CHAT, json=body).json()["choices"][0]
    msg = full["message"]
    assert full["finish_reason"] == "tool_calls" and msg["reasoning_content"], full
    assert msg["content"] is None and len(msg["tool_calls"]) == 1
    call = msg["tool_calls"][0]
    assert call["function"]["name"] == "add"
    jsonschema.validate(json.loads(call["function"]["arguments"]), PARAMS["add"])
    r = client.post(CHAT, json={**body, "stream": True})
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == msg["reasoning_content"]
    args = "".join(tc["function"]["arguments"] for d in deltas for tc in d.get("tool_calls") or [])
    assert args == call["function"]["arguments"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
