"""A response_format schema with vendor keys and annotations (``x-unit``, ``description``)
is served: those keys assert nothing, so the request answers 200 with JSON the schema
accepts (before, the unknown key was a 400)."""

from __future__ import annotations

import json

import jsonschema


def test_vendor_keyword_in_response_format_is_served(client):
    schema = {
        "type": "object",
        "properties": {
            "weight": {"type": "integer", "minimum": 0, "maximum": 99, "x-unit": "kg"},
            "name": {"type": "string", "maxLength": 6, "description": "who"},
        },
        "required": ["weight", "name"],
        "additionalProperties": False,
    }
    r = client.post(
        "/v1/chat/completions",
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "A parcel"}],
            "max_tokens": 40,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "parcel", "schema": schema, "strict": True},
            },
        },
    )
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    data = json.loads(choice["message"]["content"])
    jsonschema.validate(data, schema)
    assert list(data) == ["weight", "name"]
