"""The app in process (TestClient over the tiny Llama): fields, errors, metrics."""

from __future__ import annotations

import json
import logging
import re

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"


def chat(client, **body):
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hi there"}],
        "max_tokens": 8,
        "temperature": 0,
        **body,
    }
    return client.post(CHAT, json=body)


def test_models_health_stats(client):
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/v1/models").json()["data"][0]["id"] == "tiny"
    assert {"pages_total", "pages_free", "running"} <= set(client.get("/stats").json())


def test_completion_echo_logprobs_usage(client):
    r = client.post(
        COMP,
        json={
            "model": "tiny",
            "prompt": "The quick brown fox",
            "max_tokens": 5,
            "temperature": 0,
            "logprobs": 2,
            "echo": True,
            "ignore_eos": True,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    choice = body["choices"][0]
    assert choice["text"].startswith("The quick brown fox")
    lp = choice["logprobs"]
    n_prompt = body["usage"]["prompt_tokens"]
    assert len(lp["tokens"]) == n_prompt + 5 == len(lp["token_logprobs"])
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(v <= 0 for v in lp["token_logprobs"][1:])
    assert all(1 <= len(t) <= 2 for t in lp["top_logprobs"][1:])
    assert "".join(lp["tokens"]) == choice["text"] or "\ufffd" in choice["text"]
    assert body["usage"]["completion_tokens"] == 5


def test_n_seeded_choices_and_cached_tokens(client):
    prompt = "Maria Lopez, 34, works as a nurse in Lyon. " * 3
    body = {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": 6,
        "n": 3,
        "seed": 7,
        "temperature": 1.0,
        "ignore_eos": True,
    }
    first = client.post(COMP, json=body).json()
    assert [c["index"] for c in first["choices"]] == [0, 1, 2]
    second = client.post(COMP, json=body).json()
    assert [c["text"] for c in first["choices"]] == [c["text"] for c in second["choices"]]
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached <= second["usage"]["prompt_tokens"]
    assert second["usage"]["completion_tokens"] == 18


def _counter(client, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", client.get("/metrics").text, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def test_n_branches_share_the_prompt_kv(client):
    """A fresh prompt with n=4: one branch computes the prompt, the other three read its
    pages from the prefix cache (all but the last, partly filled page, page size 4)."""
    prompt = "Zanzibar kettle orbit number 77, a prompt no other test sends. " * 2
    before = _counter(client, "structgen_cached_prompt_tokens_total")
    r = client.post(
        COMP,
        json={
            "model": "tiny",
            "prompt": prompt,
            "max_tokens": 3,
            "n": 4,
            "temperature": 1.0,
            "seed": 1,
            "ignore_eos": True,
        },
    ).json()
    n_prompt = r["usage"]["prompt_tokens"]
    assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # the fewest: branch 0
    cached = _counter(client, "structgen_cached_prompt_tokens_total") - before
    assert 3 * (n_prompt - 4) <= cached <= 3 * n_prompt


def test_chat_logprobs_and_stream_matches(client):
    full = chat(client, logprobs=True, top_logprobs=3, ignore_eos=True).json()
    content = full["choices"][0]["logprobs"]["content"]
    assert len(content) == 8 and all(len(c["top_logprobs"]) == 3 for c in content)
    r = client.post(
        CHAT,
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "Hi there"}],
            "max_tokens": 8,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == full["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8


def test_choice_regex_json_object(client):
    r = chat(client, extra=None, choice=["yes", "no", "maybe"]).json()
    assert r["choices"][0]["message"]["content"] in ("yes", "no", "maybe")
    r = client.post(
        COMP,
        json={"model": "tiny", "prompt": "Code:", "max_tokens": 10, "regex": r"[A-Z]{3}-[0-9]{2}"},
    ).json()
    assert re.fullmatch(r"[A-Z]{3}-[0-9]{2}", r["choices"][0]["text"])
    r = chat(client, max_tokens=40, response_format={"type": "json_object"}).json()
    assert isinstance(json.loads(r["choices"][0]["message"]["content"]), dict)


def test_json_schema_strict(client):
    import jsonschema

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
    }
    r = chat(
        client,
        max_tokens=40,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "p", "schema": schema, "strict": True},
        },
    )
    data = json.loads(r.json()["choices"][0]["message"]["content"])
    jsonschema.validate(data, schema)
    assert set(data) == {"name", "age"}


def test_tool_choice_required_stream(client):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "add",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer", "maximum": 99}},
                    "required": ["a"],
                },
            },
        }
    ]
    r = client.post(
        CHAT,
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "2+2"}],
            "max_tokens": 30,
            "temperature": 0,
            "tools": tools,
            "tool_choice": "required",
            "stream": True,
            "parallel_tool_calls": False,
        },
    )
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    calls = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    assert calls[0]["function"]["name"] == "add" and calls[0]["id"].startswith("call_")
    args = json.loads("".join(tc["function"]["arguments"] for tc in calls))
    assert isinstance(args["a"], int) and args["a"] <= 99
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def _error(r, status=400):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return err


def test_bad_inputs_are_400(client):
    err = _error(client.post(CHAT, content=b"{nope", headers={"content-type": "application/json"}))
    assert err["code"] == "invalid_json"
    err = _error(client.post(CHAT, json={"model": "tiny", "messages": "hi"}))
    assert err["param"] == "messages"
    err = _error(chat(client, max_tokens="lots"))
    assert err["param"] == "max_tokens"
    err = _error(chat(client, temperature=-1))
    assert err["param"] == "temperature"
    err = _error(
        chat(
            client,
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": "x",
                    "schema": {
                        "type": "object",
                        "properties": {"tags": {"type": "array", "uniqueItems": True}},
                    },
                },
            },
        )
    )
    assert "uniqueItems" in err["message"] and "/properties/tags" in err["message"]
    err = _error(
        chat(
            client,
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": "x",
                    "schema": {"type": "object", "properties": {"a": {"type": "strang"}}},
                },
            },
        )
    )
    assert "/properties/a" in err["message"] and err["code"] == "invalid_schema"
    err = _error(chat(client, regex="(?=a)b"))
    assert err["param"] == "regex"
    err = _error(client.post(COMP, json={"model": "tiny", "prompt": "x " * 600}))
    assert err["code"] == "context_length_exceeded"
    err = _error(chat(client, n=17))
    assert err["param"] == "n"
    err = _error(chat(client, regex="a", choice=["a"]))
    assert "at most one" in err["message"]
    err = _error(chat(client, model="gpt-4"), status=404)
    assert err["code"] == "model_not_found"
    assert chat(client).status_code == 200  # still serving


def test_api_key(tiny_async_engine):
    from fastapi.testclient import TestClient

    from structgen.server import create_app

    with TestClient(create_app(tiny_async_engine, api_key="k")) as c:
        assert _error(c.get("/v1/models"), 401)["type"] == "authentication_error"
        assert c.get("/v1/models", headers={"Authorization": "Bearer k"}).status_code == 200
        assert c.get("/health").status_code == 200


def test_metrics(client):
    chat(client)
    text = client.get("/metrics").text
    for name in (
        "structgen_time_to_first_token_seconds_count",
        "structgen_time_per_output_token_seconds_count",
        "structgen_prompt_tokens_total",
        "structgen_generation_tokens_total",
        "structgen_cached_prompt_tokens_total",
        "structgen_prefix_cache_hit_rate",
        "structgen_kv_pages_free",
        "structgen_kv_pages_used",
        "structgen_num_requests_running",
        "structgen_num_requests_waiting",
    ):
        assert re.search(rf"^{name} ", text, re.MULTILINE), name


def test_completion_logprob_start_len_reuses_cache(client):
    """SGLang's logprob_start_len: prompt log-probs from there on equal the full computation,
    earlier ones are null, and the cached prompt before it is reused."""
    prompt = "Classify the sentiment of this review of a small cafe: the coffee was great. Answer:"
    base = {"model": "tiny", "max_tokens": 1, "temperature": 0, "logprobs": 0, "echo": True}
    full = client.post(COMP, json={**base, "prompt": prompt + " positive"}).json()
    n_full = full["usage"]["prompt_tokens"]
    client.post(
        COMP, json={**base, "prompt": prompt, "echo": False, "logprobs": None}
    )  # warm the cache
    start = n_full - 2
    part = client.post(
        COMP, json={**base, "prompt": prompt + " positive", "logprob_start_len": start}
    ).json()
    assert part["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    got = part["choices"][0]["logprobs"]["token_logprobs"][:n_full]
    want = full["choices"][0]["logprobs"]["token_logprobs"][:n_full]
    assert all(v is None for v in got[1:start])
    for g, w in zip(got[start:], want[start:]):
        assert abs(g - w) < 1e-4
    bad = client.post(COMP, json={**base, "prompt": prompt, "logprob_start_len": -1})
    assert bad.status_code == 400 and "logprob_start_len" in bad.text


def test_unknown_fields_are_ignored_and_logged(client, caplog):
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        "guided_jsn": {"type": "integer"},
        "x_client_tag": 1,
    }
    with caplog.at_level(logging.WARNING, logger="structgen.server"):
        r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "structgen.server"]
    assert len(lines) == 1
    assert "'guided_jsn' (did you mean 'guided_json'?)" in lines[0]
    assert "'x_client_tag'" in lines[0] and "were ignored" in lines[0]
    assert "'x_client_tag' (did you mean" not in lines[0]


def test_ignored_schema_keywords_are_logged(client, caplog):
    """A misspelt keyword in ``response_format``'s schema (ignored, as JSON Schema says)
    is logged with its pointer and the keyword it resembles; a clean schema logs
    nothing."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLen": 3}}}
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }
    with caplog.at_level(logging.WARNING, logger="structgen.server"):
        assert client.post("/v1/chat/completions", json=body).status_code == 200
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "structgen.server"]
    assert len(lines) == 1 and lines[0].startswith("response_format")
    assert "'maxLen'" in lines[0] and "maxLength" in lines[0] and "/properties/a" in lines[0]
    caplog.clear()
    del schema["properties"]["a"]["maxLen"]
    with caplog.at_level(logging.WARNING, logger="structgen.server"):
        assert client.post("/v1/chat/completions", json=body).status_code == 200
    assert not [r for r in caplog.records if r.name == "structgen.server"]
