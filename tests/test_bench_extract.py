"""benchmarks/bench_extract.py's scoring and table, untimed and without a model, so the
benchmark cannot rot: a peer's results scored against the dev set's expected values."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_extract as bench  # noqa: E402 - the benchmark is a script beside the tests
import extraction_scoring as scoring  # noqa: E402


def _first(v):
    if isinstance(v, dict) and "$any" in v:
        return _first(v["$any"][0])
    if isinstance(v, dict):
        return {k: _first(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_first(x) for x in v]
    return v


def test_a_peer_is_scored_against_the_dev_set():
    docs = scoring.load_documents()[:3]
    perfect = {k: v for k, v in _first(docs[0].expected).items() if v is not None}
    wrong_one = dict(_first(docs[1].expected), customer_name="Somebody Else")
    results = [
        {"id": docs[0].id, "value": perfect, "finish_reason": "stop"},
        {"id": docs[1].id, "value": wrong_one, "finish_reason": "length"},
        {"id": docs[2].id, "value": None, "finish_reason": "error"},  # failed
    ]
    res = {
        "load_s": 1.0,
        "batch1": [{"s": 2.0}, {"s": 4.0}],
        "results": results,
        "batched_s_per_doc": 0.5,
    }
    row = bench.score_peer(docs, res)
    n = [len(scoring.score_document(d.schema, d.expected, None)) for d in docs]
    assert row["fields"] == sum(n)
    assert row["fields_right"] == n[0] + n[1] - 1
    assert (row["docs_fully_right"], row["schema_valid"], row["max_tokens_hits"]) == (1, 2, 1)
    assert row["batch1_s_per_doc"] == 3.0
    table = bench.table({"structgen": row, "llama.cpp": dict(row, batch1_s_per_doc=6.0)})
    lines = table.splitlines()
    assert len(lines) == 4 and lines[2].startswith("| structgen | ")
    assert "| 1.00x | 6.0x |" in lines[2] and "| 2.00x | 12.0x |" in lines[3]


def test_every_peer_gets_the_messages_extract_builds(tiny_engine, monkeypatch):
    """The benchmark's messages (given to llama.cpp and XGrammar) are the prompts
    ``extract`` hands the engine, document by document (the first of every third domain)."""
    from structgen import SamplingParams
    from structgen.extraction import extract

    seen = []
    make_request = tiny_engine.make_request

    def spy(prompt, params, constraint):
        seen.append(prompt)
        return make_request(prompt, params, constraint)

    monkeypatch.setattr(tiny_engine, "make_request", spy)
    docs = [d for d in scoring.load_documents() if d.id.endswith("-01")][::3]
    assert len(docs) >= 4
    params = SamplingParams(max_tokens=2, temperature=0.0)
    for doc in docs:
        seen.clear()
        extract(tiny_engine, doc.schema, [doc.text], params=params, errors="return")
        assert seen == [bench.peer_messages(doc)], doc.id


def _fake_peer(docs, wrong=frozenset(), calls=None):
    by_id = {d.id: d for d in docs}

    def one(job_doc):
        if calls is not None:
            calls.append(job_doc["id"])
        value = _first(by_id[job_doc["id"]].expected)
        if job_doc["id"] in wrong:
            value = None
        return bench._record(job_doc, value, "", "stop" if value else "error", None)

    return {"one": one, "load_s": 0.5, "notes": ["fake"]}


def test_a_streamed_run_is_written_as_it_goes_resumed_and_scored(tmp_path):
    docs = scoring.load_documents()[:4]
    job_docs = [{"id": d.id, "schema": d.schema, "text": d.text, "messages": []} for d in docs]
    calls_a, calls_b = [], []
    peers = {
        "structgen": _fake_peer(docs, calls=calls_a),
        "llama.cpp": _fake_peer(docs, wrong={docs[1].id}, calls=calls_b),
    }
    lines = []
    bench.stream_documents(job_docs[:2], peers, tmp_path, resume=False, log=lines.append)
    # warm-up on the first document, then the two documents, the peers' order rotated
    assert calls_a == [docs[0].id, docs[0].id, docs[1].id] == calls_b
    assert [ln.split()[1] for ln in lines] == ["structgen", "llama.cpp", "llama.cpp", "structgen"]
    with pytest.raises(SystemExit, match="--resume"):
        bench.stream_documents(job_docs, peers, tmp_path, resume=False)
    calls_a.clear()
    bench.stream_documents(job_docs, peers, tmp_path, resume=True, log=lines.append)
    assert calls_a == [docs[0].id, docs[2].id, docs[3].id]  # warm-up, then only the new ones
    rows = {}
    for peer in peers:
        have, res = bench.streamed_result(tmp_path / f"{peer}.jsonl", docs)
        assert [r["id"] for r in res["results"]] == [d.id for d in docs] and have == docs
        assert all(r["s"] >= 0 and "load_avg" in r for r in res["results"])
        rows[peer] = dict(bench.score_peer(have, res), per_doc=res["results"])
        mate = "llama.cpp" if peer == "structgen" else "structgen"
        assert res["notes"][-1] == f"streamed: 4/4 documents, batch 1, interleaved with {mate}"
    fields = [len(scoring.score_document(d.schema, d.expected, None)) for d in docs]
    assert rows["structgen"]["fields_right"] == sum(fields) == rows["structgen"]["fields"]
    assert rows["llama.cpp"]["fields_right"] == sum(fields) - fields[1]
    assert rows["llama.cpp"]["docs_fully_right"] == 3 and rows["llama.cpp"]["load_s"] == 0.5
    seconds = bench.seconds_table(rows).splitlines()
    assert len(seconds) == 4 and seconds[2].startswith("| structgen | 4 | ")


def test_a_cut_streamed_file_scores_the_documents_it_holds(tmp_path):
    docs = scoring.load_documents()[:3]
    rec = {"id": docs[1].id, "value": None, "raw_text": "", "finish_reason": "error",
           "error": "x", "s": 2.0}  # fmt: skip
    path = tmp_path / "llama.cpp.jsonl"
    path.write_text(json.dumps({"event": "start", "load_s": 1.0, "notes": []}) + "\n"
                    + json.dumps(rec) + "\n")  # fmt: skip
    have, res = bench.streamed_result(path, docs)
    assert have == [docs[1]] and res["batch1"] == [rec] and res["load_s"] == 1.0
    path.write_text("{not json\n")
    with pytest.raises(SystemExit, match="llama.cpp.jsonl:1"):
        bench.streamed_result(path, docs)


@pytest.mark.slow
def test_llama_cpp_renders_the_same_prompt_ids_as_structgen(smollm2_engine):
    """llama-cpp-python renders chat messages with the GGUF's own template (as its
    ``chat_template.default`` handler does: ``Jinja2ChatFormatter``, then ``tokenize``
    with ``special=True``); on every dev document the prompt ids equal structgen's
    ``apply_chat_template``. (A streamed run also checks the ids llama.cpp evaluated.)"""
    pytest.importorskip("llama_cpp")
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from structgen.runtime.loader import default_model_path

    llm = Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)
    text = llm._model.token_get_text
    fmt = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"],
                              eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos()),
                              stop_token_ids=[llm.token_eos()])  # fmt: skip
    for doc in scoring.load_documents():
        msgs = bench.peer_messages(doc)
        rendered = fmt(messages=msgs)
        ids = llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special,
                           special=True)  # fmt: skip
        assert ids == smollm2_engine.apply_chat_template(msgs), doc.id
