"""``extract`` over many texts on two host pipelines: the same results as one pipeline (tiny
random Llama; SmolLM2 in the slow test), each reported once on the calling thread, a failed
text or a failed pipeline reported in its own slots."""

from __future__ import annotations

import threading

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import ExtractionError
from structgen.extraction import extract, extractor
from structgen.runtime.host_pipelines import host_pipelines

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
}
TEXTS = [f"Person {i} is called Ann{i} and is {i * 7 % 90} years old." for i in range(9)]
PARAMS = SamplingParams(max_tokens=24, temperature=0.0)


@pytest.fixture(scope="module")
def engine(tiny_llama_dir):
    return Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=4096, page_size=4)


def _run(engine, pipelines, monkeypatch, texts=TEXTS, **kw):
    monkeypatch.setattr(extractor, "HOST_PIPELINES", pipelines)
    monkeypatch.setattr(extractor, "HOST_PIPELINES_MIN_TEXTS", 2)
    reported = []
    out = extract(
        engine, SCHEMA, texts, params=PARAMS, errors="return",
        on_result=lambda i, r: reported.append((i, r, threading.get_ident())), **kw,
    )  # fmt: skip
    return out, reported


def _forwards(engine) -> list[int]:
    return [e.runner.num_forward_passes for e in host_pipelines(engine).engines]


def test_two_pipelines_return_what_one_does(engine, monkeypatch):
    one, rep1 = _run(engine, 1, monkeypatch)
    before = _forwards(engine)
    two, rep2 = _run(engine, 2, monkeypatch, return_details=True)
    assert all(a > b for a, b in zip(_forwards(engine), before))  # both pipelines ran
    assert [r.value for r in two] == one
    for reported in (rep1, rep2):
        assert sorted(i for i, _, _ in reported) == list(range(len(TEXTS)))
        assert {t for _, _, t in reported} == {threading.get_ident()}
    assert all(r is two[i] for i, r, _ in rep2)


def test_a_failed_text_is_reported_in_its_slot(engine, monkeypatch):
    too_long = "word " * 600  # over the tiny model's 512 positions: that request fails alone
    texts = [*TEXTS[:4], too_long, *TEXTS[4:]]
    one, _ = _run(engine, 1, monkeypatch, texts=texts)
    two, reported = _run(engine, 2, monkeypatch, texts=texts)
    assert isinstance(one[4], ExtractionError) and isinstance(two[4], ExtractionError)
    assert two[:4] + two[5:] == one[:4] + one[5:]
    assert any(i == 4 and isinstance(r, ExtractionError) for i, r, _ in reported)


def test_a_failed_pipeline_loses_only_its_own_texts(engine, monkeypatch):
    one, _ = _run(engine, 1, monkeypatch)
    broken = host_pipelines(engine).engines[1]

    def down(*args, **kwargs):
        raise RuntimeError("pipeline down")

    monkeypatch.setattr(broken, "run_requests", down)
    two, reported = _run(engine, 2, monkeypatch)
    for i, r in enumerate(two):
        if i % 2:  # pipeline 1's texts
            assert isinstance(r, ExtractionError) and "pipeline down" in str(r)
        else:
            assert r == one[i]
    assert sorted(i for i, _, _ in reported) == list(range(len(TEXTS)))
    monkeypatch.setattr(extractor, "HOST_PIPELINES", 2)
    with pytest.raises(ExtractionError, match="text 1 failed"):  # errors="raise": the first
        extract(engine, SCHEMA, TEXTS, params=PARAMS)


def test_below_the_threshold_one_pipeline_runs(engine, monkeypatch):
    monkeypatch.setattr(extractor, "HOST_PIPELINES_MIN_TEXTS", 100)
    before = _forwards(engine)
    extract(engine, SCHEMA, TEXTS[:3], params=PARAMS)
    assert _forwards(engine) == before


@pytest.mark.slow
def test_two_pipelines_on_the_default_model(smollm2_engine, monkeypatch):
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    from bench_extract_batch import documents  # the benchmark's seeded contact cards

    schema = json.loads((root / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(6, seed=3)
    monkeypatch.setattr(extractor, "HOST_PIPELINES_MIN_TEXTS", 2)
    monkeypatch.setattr(extractor, "HOST_PIPELINES", 1)
    one = extract(smollm2_engine, schema, texts)
    monkeypatch.setattr(extractor, "HOST_PIPELINES", 2)
    before = _forwards(smollm2_engine)
    two = extract(smollm2_engine, schema, texts)
    assert all(a > b for a, b in zip(_forwards(smollm2_engine), before))
    assert two == one


def _pipeline_hits(engine) -> int:
    return sum(e.scheduler.num_prefix_hit_tokens for e in host_pipelines(engine).engines)


def _flush_all(engine) -> None:
    engine.flush_cache()
    host_pipelines(engine).flush_cache()


def test_the_shared_head_is_computed_once_on_the_engine(engine, monkeypatch):
    """A fresh job: the prompts' shared head is computed on the engine (in its cache after
    the call), and both pipelines copy it instead of computing it (more prefix hits than
    with the head left to the pipelines), the values unchanged."""
    _flush_all(engine)
    before = _pipeline_hits(engine)
    off = monkeypatch.context()
    with off as m:
        m.setattr(extractor, "_cache_shared_head", lambda engine, job: None)
        without, _ = _run(engine, 2, monkeypatch)
    hits_without = _pipeline_hits(engine) - before
    assert engine.cache.num_cached_pages == 0  # nothing ran on the engine itself
    _flush_all(engine)
    before = _pipeline_hits(engine)
    with_head, _ = _run(engine, 2, monkeypatch)
    assert engine.cache.num_cached_pages > 0
    assert _pipeline_hits(engine) - before > hits_without
    assert with_head == without


def test_grammars_compiled_at_admission_return_what_one_pipeline_does(engine, monkeypatch):
    import inspect

    one, _ = _run(engine, 1, monkeypatch)
    compiled = extractor._compiled
    where = []  # per grammar compile on a pipeline's thread: inside its scheduler's admission?

    def counted(plan, schema, vocab):
        if threading.current_thread().name.startswith("structgen-pipeline-"):
            where.append(any(f.function == "_admit" for f in inspect.stack()))
        return compiled(plan, schema, vocab)

    monkeypatch.setattr(extractor, "_compiled", counted)
    two, reported = _run(engine, 2, monkeypatch)
    assert two == one
    assert sorted(i for i, _, _ in reported) == list(range(len(TEXTS)))
    assert len(where) == len(TEXTS) and all(where)  # each text's grammar, as it was admitted
    assert all(e.scheduler.on_admit is None for e in host_pipelines(engine).engines)
    texts = [*TEXTS[:4], "word " * 600, *TEXTS[4:]]  # too long: fails at add, never admitted
    one, _ = _run(engine, 1, monkeypatch, texts=texts)
    where.clear()
    two, _ = _run(engine, 2, monkeypatch, texts=texts)
    assert isinstance(two[4], ExtractionError) and two[:4] + two[5:] == one[:4] + one[5:]
    assert len(where) == len(texts) and where.count(False) == 1  # compiled for its result
