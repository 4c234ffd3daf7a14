"""SmolLM2 generates under 20 real schemas from the corpora (MaskBench sample): every output
is complete JSON that validates with jsonschema (FormatChecker on), even when the token
budget cuts generation (the matcher is budget-aware)."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from benchmarks.corpus import CORPORA
from structgen import JsonSchema, SamplingParams
from structgen.errors import GrammarTooComplexError, UnsupportedSchemaError
from structgen.fsm import compile_json_schema

pytestmark = pytest.mark.slow

PLAIN = CORPORA / "jsonschemabench" / "plain"
SUBSETS = [
    "Glaiveai2K",
    "BFCL_simple",
    "BFCL_multiple",
    "JME",
    "Github_easy",
    "MCPspec",
    "Synthesized",
    "BFCL_java",
    "Github_trivial",
    "WashingtonPost",
]


def _pick_schemas(n: int = 20) -> list[tuple[str, dict]]:
    rng = random.Random(0)
    picked: list[tuple[str, dict]] = []
    for subset in SUBSETS:
        files = sorted((PLAIN / subset).glob("*.json"))
        rng.shuffle(files)
        taken = 0
        for f in files:
            schema = json.loads(f.read_text(encoding="utf-8"))["schema"]
            try:
                compile_json_schema(schema)
            except (UnsupportedSchemaError, GrammarTooComplexError):
                continue
            picked.append((f"{subset}/{f.name}", schema))
            taken += 1
            if taken == 2:
                break
    return picked[:n]


@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
def test_smollm2_outputs_validate_on_20_corpus_schemas(smollm2_engine):
    picked = _pick_schemas()
    assert len(picked) == 20
    prompts = [
        [
            {
                "role": "user",
                "content": "Write one realistic JSON instance of this JSON "
                f"Schema:\n{json.dumps(schema)[:1500]}",
            }
        ]
        for _, schema in picked
    ]
    outs = smollm2_engine.generate(
        prompts,
        SamplingParams(max_tokens=200, temperature=0.0),
        [JsonSchema(schema) for _, schema in picked],
    )
    problems = []
    for (name, schema), out in zip(picked, outs):
        try:
            jsonschema.validate(
                json.loads(out.text), schema, format_checker=jsonschema.FormatChecker()
            )
        except Exception as exc:  # collect every failure, report them together
            problems.append(
                f"{name} ({out.finish_reason}): {type(exc).__name__}: "
                f"{str(exc)[:200]} :: {out.text[:200]!r}"
            )
    assert not problems, "\n".join(problems)
