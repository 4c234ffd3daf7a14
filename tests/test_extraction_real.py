"""Extraction on the real SmolLM2: every output parses and validates (with formats)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from pydantic import BaseModel, Field

from structgen import Choice, Regex, SamplingParams
from structgen.errors import ExtractionError

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT.parent / "shared" / "cases" / "field_cases.jsonl"


def _example(name: str) -> dict:
    return json.loads((ROOT / "examples" / "schemas" / f"{name}.json").read_text())


def _field_case(case_id: str) -> dict:
    if not CASES.is_file():
        pytest.skip("shared/cases not present beside the checkout")
    for line in CASES.read_text().splitlines():
        case = json.loads(line)
        if case["id"] == case_id:
            return case["schema"]
    raise KeyError(case_id)


PAIRS = [
    ("person", "Maria Lopez, 34, works as a nurse in Lyon."),
    (
        "invoice",
        "Invoice INV-2041 for Acme GmbH: 3 x USB cable at 4.50 EUR each and 1 x keyboard at "
        "29.90 EUR. Total due: 43.40 EUR.",
    ),
    (
        "event",
        "PyCon Lyon runs from 2026-05-14 to 2026-05-16 at the Centre des Congres. "
        "It is an in-person event.",
    ),
    # a text the 135M model copies instead of looping on (it repeats "I'm here." to
    # max_tokens on 'She said "hi" and left.'); the output still carries a JSON escape
    (
        "field-string-escaped-quote",
        'Quote of the day: "Stay hungry, stay foolish." Saved in C:\\temp.',
    ),
    ("field-eos-masked-until-complete", "Alan Turing was 41 when he died."),
    ("field-pattern-with-anchors", "Send it to 77 Mass Ave, Cambridge MA 02139."),
]


def _schema(name: str) -> dict:
    return _field_case(name) if name.startswith("field-") else _example(name)


@pytest.fixture(scope="module")
def extracted(smollm2_engine):
    schemas = [_schema(name) for name, _ in PAIRS]
    results = []
    for schema, (_, text) in zip(schemas, PAIRS):
        results.append(smollm2_engine.extract(schema, text))
    return schemas, results


@pytest.mark.parametrize("i", range(len(PAIRS)), ids=[name for name, _ in PAIRS])
def test_extraction_validates(extracted, i):
    schemas, results = extracted
    obj = results[i]
    jsonschema.validate(obj, schemas[i], format_checker=jsonschema.FormatChecker())


def test_extraction_reads_the_facts(extracted):
    _, results = extracted
    # names, cities and dates are copied from the text; the 135M model's digits are not
    # reliable enough to assert (it reads 34 as 25 under some batch shapes)
    person = results[0]
    assert "Maria" in person["name"] and person["city"] == "Lyon"
    assert results[2]["start_date"] == "2026-05-14"


def test_batch_extraction(smollm2_engine):
    schema = _example("person")
    texts = [
        PAIRS[0][1],
        "Our new colleague is Kenji Watanabe; he is 51 and teaches physics in Osaka.",
    ]
    batched = smollm2_engine.extract(schema, texts)
    for obj in batched:
        jsonschema.validate(obj, schema)
    assert "Kenji" in batched[1]["name"] and batched[1]["city"] == "Osaka"


def test_pydantic_model_comes_back_as_instance(smollm2_engine):
    class Person(BaseModel):
        name: str = Field(max_length=40)
        age: int = Field(ge=0, le=150)

    person = smollm2_engine.extract(Person, "Maria Lopez, 34, works as a nurse in Lyon.")
    assert isinstance(person, Person) and "Maria" in person.name


def test_truncated_output_raises_with_raw_text(smollm2_engine):
    with pytest.raises(ExtractionError) as info:
        smollm2_engine.extract(
            _example("invoice"), PAIRS[1][1], params=SamplingParams(max_tokens=5, temperature=0)
        )
    assert info.value.finish_reason == "length"
    assert info.value.raw_text.startswith("{")


def _top2_margins(out) -> list[float]:
    """Per generated position, the chosen token's logprob lead over the runner-up (``inf``
    where one token was possible)."""
    tops = [sorted(top.values(), reverse=True) + [float("-inf")] for top in out.logprobs]
    return [t[0] - t[1] for t in tops]


def test_unconstrained_generation_and_chat(smollm2_engine):
    """A chat question, no constraint: the greedy answer's 8 tokens, each >= 1.0 logprob ahead
    of the runner-up on every build and activation dtype (benchmarks/greedy_margins.py)."""
    out = smollm2_engine.generate(
        [[{"role": "user", "content": "What is the chemical symbol for gold?"}]],
        SamplingParams(max_tokens=8, temperature=0.0, logprobs=2),
    )[0]
    assert out.text == "The chemical symbol for gold is Au."
    assert min(_top2_margins(out)) >= 1.0, (out.text, out.logprobs)
    assert out.metrics.ttft_s > 0 and out.metrics.num_generated_tokens == len(out.token_ids)


def _readme_generate_example() -> tuple[str, str]:
    """README's ``outs = engine.generate(...)`` statement and the text its comment says
    ``print(outs[0].text)`` shows."""
    readme = (ROOT / "README.md").read_text()
    call = re.search(r"^outs = engine\.generate\(\n.*?^\)\n", readme, re.M | re.S)
    shown = re.search(r"^print\(outs\[0\]\.text\) +# (.+)$", readme, re.M)
    assert call and shown, "README lost its engine.generate example or its printed text"
    return call.group(0), shown.group(1)


def test_readme_generate_example(smollm2_engine):
    """README's generate example (chat and raw prompts, regex and choice constraints) prints
    what README shows, with a margin: the greedy answer leads the runner-up token by >= 1.0
    logprob at every position, so a numerically neutral change of the int8-activation path
    (it moves logprobs by up to ~1, benchmarks/q8_sensitivity.py) cannot flip it. Run with
    ``logprobs=2`` added, which changes no sampled token; margins per candidate prompt and
    build: benchmarks/greedy_margins.py."""
    call, shown = _readme_generate_example()
    api = SimpleNamespace(
        SamplingParams=functools.partial(SamplingParams, logprobs=2), Regex=Regex, Choice=Choice
    )
    scope = {"engine": smollm2_engine, "structgen": api}
    exec(call, scope)
    outs = scope["outs"]
    assert outs[0].text == shown
    assert outs[1].text in (" yes", " no") and outs[1].finish_reason == "stop"
    for out in outs:
        assert out.metrics.ttft_s > 0 and out.metrics.num_generated_tokens == len(out.token_ids)
        assert min(_top2_margins(out)) >= 1.0, (out.text, out.logprobs)
