"""Deep input over HTTP (#20): a 100,000-deep JSON body, a schema past the depth limit (by
nesting or by a ``$ref`` chain) and a pattern or regex with 20,000 nested groups each answer
400 with a message naming the limit (and the schema's pointer), and the server then answers
the next request."""

from __future__ import annotations

import pytest

from structgen.fsm.nesting import MAX_JSON_DEPTH, MAX_SCHEMA_DEPTH, dumps

COMP = "/v1/completions"
BASE = {"model": "tiny", "prompt": "Hi", "max_tokens": 2, "temperature": 0}


def _next_request_works(client) -> None:
    r = client.post(COMP, json={**BASE, "choice": ["yes", "no"]})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] in ("yes", "no")


def _post_schema(client, schema, **extra):
    """POST a completion under ``schema`` (encoded without recursion: httpx's ``json=``
    would use ``json.dumps``, which stops at Python's recursion limit)."""
    body = {
        **BASE,
        **extra,
        "response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": schema}},
    }
    return client.post(COMP, content=dumps(body), headers={"content-type": "application/json"})


@pytest.mark.timeout(60)
def test_body_100000_deep_is_400_then_next_request(client):
    body = '{"model": "tiny", "prompt": ' + "[" * 100_000 + "]" * 100_000 + "}"
    r = client.post(COMP, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert f"the depth limit is {MAX_JSON_DEPTH}" in r.json()["error"]["message"]
    _next_request_works(client)


@pytest.mark.timeout(60)
def test_schema_past_the_depth_limit_is_400_with_pointer(client):
    schema: dict = {"type": "integer"}
    for _ in range(MAX_SCHEMA_DEPTH + 50):
        schema = {"type": "array", "items": schema}
    r = _post_schema(client, schema)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert f"more than {MAX_SCHEMA_DEPTH}" in message and "/items/items" in message, message
    _next_request_works(client)


@pytest.mark.timeout(60)
def test_ref_chain_100000_is_400_with_pointer(client):
    """A 100,000-long ``$ref`` chain nests without JSON nesting: 400 naming the limit and
    the pointer where the chain passes it, then the next request is served."""
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(100_000)}
    defs["d100000"] = {"type": "integer"}
    r = _post_schema(client, {"$defs": defs, "$ref": "#/$defs/d0"})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert f"more than {MAX_SCHEMA_DEPTH}" in message, message
    assert message.endswith(f"at /$defs/d{MAX_SCHEMA_DEPTH - 1}"), message
    _next_request_works(client)


@pytest.mark.timeout(60)
def test_deep_pattern_and_regex_are_400(client):
    deep = "(" * 20_000 + "a" + ")" * 20_000
    r = _post_schema(client, {"type": "string", "pattern": deep})
    assert r.status_code == 400, r.text
    assert "nests parentheses" in r.json()["error"]["message"]
    _next_request_works(client)
    r = client.post(COMP, json={**BASE, "regex": deep})
    assert r.status_code == 400, r.text
    assert "MAX_NESTING" in r.json()["error"]["message"]
    _next_request_works(client)


@pytest.mark.timeout(60)
def test_schema_1000_deep_is_served(client):
    schema: dict = {"type": "integer"}
    for _ in range(1000):
        schema = {"type": "array", "items": schema, "minItems": 1, "maxItems": 1}
    r = _post_schema(client, schema, max_tokens=4)
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["text"]
    assert text and set(text) == {"["}, text  # the grammar forces the brackets


@pytest.mark.timeout(60)
def test_pattern_1000_deep_is_served_and_100000_is_400(client):
    """A schema ``pattern`` 1,000 groups deep compiles (the output follows it); 100,000
    deep answers 400 with ``compile_regex``'s limit, and the next request is served."""
    deep = "^" + "(" * 1000 + "ab" + ")" * 1000 + "$"
    r = _post_schema(client, {"type": "string", "pattern": deep}, max_tokens=8)
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["text"]
    assert '"ab"'.startswith(text) and text, text
    deeper = "(" * 100_000 + "a" + ")" * 100_000
    r = _post_schema(client, {"type": "string", "pattern": deeper})
    assert r.status_code == 400, r.text
    assert "MAX_NESTING" in r.json()["error"]["message"]
    _next_request_works(client)
