"""The server's copy_from (extra_body) on completions and chat (TestClient, tiny Llama):
the output is a span of the text (a brute-force reference), alone, under guided_json and
under a regex; with choices it is a 400 naming copy_from.
"""

from __future__ import annotations

import json

from tests.extraction._copy_reference import SCHEMA, TEXT
from tests.extraction._copy_reference import spans as _spans


def test_server_copy_from(client):
    base = {"model": "tiny", "prompt": "Answer:", "temperature": 0, "max_tokens": 30}
    r = client.post("/v1/completions", json={**base, "copy_from": TEXT}).json()
    assert r["choices"][0]["text"] in _spans(TEXT)
    r = client.post(
        "/v1/completions", json={**base, "guided_json": SCHEMA, "copy_from": [TEXT]}
    ).json()
    value = json.loads(r["choices"][0]["text"])
    assert value["name"] in _spans(TEXT) and value["age"] in (37, 12)
    chat = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Name?"}],
        "temperature": 0,
        "max_tokens": 12,
        "regex": "[A-Z][a-z]+",
        "copy_from": TEXT,
    }
    r = client.post("/v1/chat/completions", json=chat).json()
    assert r["choices"][0]["message"]["content"] in {"Ann", "Lee", "Bo", "Park"}
    bad = client.post("/v1/completions", json={**base, "choice": ["a"], "copy_from": TEXT})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "copy_from"
