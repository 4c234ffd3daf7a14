"""Jump-forward through the engine: same validity as without, fewer forward passes, the
retokenization plan applied (dropped tokens, extended text), budgets honoured."""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen import Engine, JsonSchema, Regex, SamplingParams

SCHEMA = {
    "type": "object",
    "properties": {
        "reservation_id": {"type": "string", "maxLength": 8},
        "special_requests": {
            "type": "array",
            "items": {"enum": ["window", "quiet"]},
            "maxItems": 3,
        },
        "confirmed": {"type": "boolean"},
    },
    "required": ["reservation_id", "special_requests", "confirmed"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def engines(tiny_llama_dir):
    return {
        jf: Engine(str(tiny_llama_dir), dtype="float32", page_size=4, jump_forward=jf)
        for jf in (True, False)
    }


@pytest.mark.parametrize("seed", range(6))
def test_outputs_validate_with_and_without_jump_forward(engines, seed):
    params = SamplingParams(max_tokens=120, temperature=1.0, seed=seed, logprobs=0)
    outs = {
        jf: e.generate(["Book a table:"], params, JsonSchema(SCHEMA))[0]
        for jf, e in engines.items()
    }
    for out in outs.values():
        assert out.finish_reason == "stop", out
        jsonschema.validate(json.loads(out.text), SCHEMA)
        assert len(out.logprobs) == len(out.token_ids)
        # the text is exactly the bytes of the tokens (drops were undone in the text too)
        assert engines[True].vocab.decode(out.token_ids).decode() == out.text
    assert outs[True].metrics.num_forward_passes < outs[False].metrics.num_forward_passes


def test_forced_tokens_follow_canonical_tokenization(engines):
    engine = engines[True]
    out = engine.generate(
        ["Book"], SamplingParams(max_tokens=120, temperature=0.0), JsonSchema(SCHEMA)
    )[0]
    assert out.finish_reason == "stop"
    # every key is forced: its tokens equal the tokenizer's own split of the keys
    canonical = engine.tokenizer.encode('{"reservation_id":"', add_special_tokens=False)
    assert out.token_ids[: len(canonical)] == canonical


def test_budget_closes_the_document(engines):
    regex = r"\[(?:[a-z]{1,6},){0,30}[a-z]{1,6}\]"
    for jf, engine in engines.items():
        out = engine.generate(
            ["list:"], SamplingParams(max_tokens=12, temperature=1.0, seed=1), Regex(regex)
        )[0]
        assert len(out.token_ids) <= 12
        import re

        assert re.fullmatch(regex, out.text), (jf, out.text)
