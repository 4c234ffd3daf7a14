"""A JSON output cut by the end of the context is closed validly, as one cut by ``max_tokens``.

The matcher's budget is the output's real room: ``min(max_tokens, context - prompt)``
(``RequestFactory._make_requests``); ``step._check_limits`` finishes the request at either
limit. Reference: ``json.loads`` + ``jsonschema`` on the text, the finish reason ``"length"``.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen import Engine, SamplingParams
from structgen.fsm import compile_json_schema

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "n": {"type": "integer"},
    },
    "required": ["name", "tags", "n"],
}


@pytest.fixture(scope="module")
def short_engine(tiny_llama_dir):
    return Engine(
        str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=4, max_model_len=64
    )


@pytest.mark.parametrize("room", [12, 20, 31])
def test_a_json_cut_by_the_context_is_closed_validly(short_engine, room):
    grammar = compile_json_schema(SCHEMA, short_engine.vocab)
    prompt = list(range(5, 5 + short_engine.max_request_tokens() - room))
    params = SamplingParams(max_tokens=500, temperature=1.0, seed=room)
    [out] = short_engine.generate([prompt], params, constraint=grammar)
    text = out.text
    assert len(out.token_ids) <= room
    assert out.finish_reason in ("stop", "length"), out.finish_reason
    jsonschema.validate(json.loads(text), SCHEMA)


def test_max_tokens_still_bounds_when_smaller_than_the_room(short_engine):
    grammar = compile_json_schema(SCHEMA, short_engine.vocab)
    params = SamplingParams(max_tokens=15, temperature=1.0, seed=3)
    [out] = short_engine.generate([[5, 6, 7]], params, constraint=grammar)
    assert len(out.token_ids) <= 15
    jsonschema.validate(json.loads(out.text), SCHEMA)
