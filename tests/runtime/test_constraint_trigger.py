"""Python API: ``JsonSchema(..., trigger=...)`` / ``Regex(..., trigger=...)`` through the
Engine (tiny Llama): the answer after the trigger validates (jsonschema / re), the text
before it is the model's own greedy text (reference: the unconstrained run with the
tokens a constraint never allows banned)."""

from __future__ import annotations

import json
import os
import re

import jsonschema

from structgen import JsonSchema, Regex, SamplingParams

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["n"],
}


def test_engine_trigger_json_and_regex(tiny_engine):
    vocab = tiny_engine.vocab
    ban = {t: -100.0 for t in vocab.special_token_ids | vocab.eos_token_ids}
    prompt = "Let me think about it."
    free = tiny_engine.generate(
        prompt, SamplingParams(max_tokens=40, temperature=0, logit_bias=ban)
    )[0].text
    params = SamplingParams(max_tokens=40, temperature=0)
    out = tiny_engine.generate(prompt, params, JsonSchema(SCHEMA, trigger="</think>"))[0]
    head, sep, answer = out.text.partition("</think>")
    assert sep and out.finish_reason in ("stop", "length")
    jsonschema.validate(json.loads(answer), SCHEMA)
    common = len(os.path.commonprefix([head, free]))
    assert common >= min(len(head), 20), (head, free)
    out = tiny_engine.generate(prompt, params, Regex(r"[a-z]{3}", trigger="\n#"))[0]
    assert re.fullmatch(r"(?s)(.*?)\n#[a-z]{3}", out.text) and out.text.count("\n#") == 1
