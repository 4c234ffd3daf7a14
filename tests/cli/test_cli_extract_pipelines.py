"""`structgen extract --input FILE.jsonl` on the host pipelines (tiny random Llama): both
pipelines run, continuously batched (three cards running at a time per pipeline), the lines
come in input order and equal the API's one-pipeline results, a failing text is its own error
line and the batch goes on, the progress bar and the summary on stderr."""

from __future__ import annotations

import json

import pytest

from structgen import Engine, SamplingParams, cli
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
TEXTS = [f"Person {i} is called Ann{i} and is {i * 7 % 90} years old." for i in range(11)]
TOO_LONG = "word " * 600  # over the tiny model's 512 positions: this text fails alone


@pytest.fixture(scope="module")
def engine(tiny_llama_dir):
    return Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=4096, page_size=4)


def test_the_batch_runs_on_both_pipelines_in_input_order(engine, tmp_path, monkeypatch, capsys):
    texts = [*TEXTS[:5], TOO_LONG, *TEXTS[5:]]
    monkeypatch.setattr(extractor, "HOST_PIPELINES_MIN_TEXTS", 2)
    monkeypatch.setattr(extractor, "HOST_PIPELINES", 1)
    params = SamplingParams(max_tokens=24, temperature=0.0)
    one = extract(engine, SCHEMA, texts, params=params, errors="return")
    monkeypatch.setattr(extractor, "HOST_PIPELINES", 2)
    pipes = host_pipelines(engine)
    for e in pipes.engines:  # three cards at a time: the rest admitted as those finish
        monkeypatch.setattr(e.scheduler, "max_running_requests", 3)
    before = [e.runner.num_forward_passes for e in pipes.engines]
    monkeypatch.setattr(cli, "_engine", lambda args: engine)
    schema, inp = tmp_path / "s.json", tmp_path / "in.jsonl"
    schema.write_text(json.dumps(SCHEMA))
    inp.write_text("".join(json.dumps(t) + "\n" for t in texts))
    code = cli.main(["extract", "--schema", str(schema), "--input", str(inp), "--max-tokens", "24"])
    cap = capsys.readouterr()
    assert code == 1  # one text failed
    assert all(a > b for a, b in zip((e.runner.num_forward_passes for e in pipes.engines), before))
    rows = [json.loads(line) for line in cap.out.splitlines()]
    assert len(rows) == len(texts)
    for i, (row, ref) in enumerate(zip(rows, one)):
        if isinstance(ref, ExtractionError):
            assert i == 5 and set(row) == {"error", "raw_text"}
            assert row["error"].startswith(f"{inp}:6: ")
        else:
            assert row == ref
    assert "extract: 100%" in cap.err  # the progress bar
    assert f"{len(texts)} documents in" in cap.err and f"1 failed ({inp}:6)" in cap.err
    assert "Traceback" not in cap.err
