"""``response_format`` of type ``structural_tag``: in process and through the openai client.

References: the plain-Python reading of structural tags (``tests.fsm.tags._reference``)
with ``jsonschema`` on each region's content.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.fsm.tags._reference import tag_reference

CHAT = "/v1/chat/completions"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 6}},
    "required": ["city"],
}
TAG = {
    "type": "structural_tag",
    "structures": [{"begin": "<call>", "schema": SCHEMA, "end": "</call>"}],
    "triggers": ["<call>"],
    "at_least_one": True,
    "stop_after_first": True,
}


def _content_ok(text: str) -> bool:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    return text == text.strip() and jsonschema.Draft202012Validator(SCHEMA).is_valid(value)


def _valid(text: str) -> bool:
    ref = [("<call>", _content_ok, "</call>")]
    return tag_reference(text, ["<call>"], ref, at_least_one=True, stop_after_first=True)


def _chat(client, **body):
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hi there"}],
        "max_tokens": 40,
        "temperature": 0,
        **body,
    }
    return client.post(CHAT, json=body)


def test_structural_tag_in_process(client):
    r = _chat(client, response_format=TAG)
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["message"]["content"]
    assert _valid(text), text


def test_bad_structural_tag_is_400_with_pointer(client):
    bad_schema = {"type": "object", "properties": {"city": {"type": "strang"}}}
    tag = {**TAG, "structures": [{"begin": "<call>", "schema": bad_schema, "end": "</call>"}]}
    r = _chat(client, response_format=tag, stream=True)
    assert r.status_code == 400  # before any streamed byte
    err = r.json()["error"]
    assert "/structures/0/schema/properties/city" in err["message"]
    assert err["code"] == "invalid_schema"
    tag = {"type": "structural_tag", "format": {"type": "qwen_xml_parameter", "x": 1}}
    err = _chat(client, response_format=tag).json()["error"]
    assert err["param"] == "response_format" and "/format/type" in err["message"]
    tag = {**TAG, "triggers": ["<other>"]}
    err = _chat(client, response_format=tag).json()["error"]
    assert "/structures/0" in err["message"] and "triggers" in err["message"]


def test_structural_tag_through_openai_client(tiny_server):
    openai = pytest.importorskip("openai")
    from tests.server.conftest import API_KEY

    oa = openai.OpenAI(base_url=tiny_server + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
    r = oa.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Weather?"}],
        max_tokens=40,
        response_format=TAG,
    )
    text = r.choices[0].message.content
    assert _valid(text), text
    with pytest.raises(openai.BadRequestError, match="/structures/0/schema"):
        oa.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "Weather?"}],
            max_tokens=8,
            response_format={
                **TAG,
                "structures": [{"begin": "<call>", "schema": {"type": 3}, "end": "</call>"}],
            },
        )
