"""benchmarks/bench_extract.py's scoring and table, untimed and without a model, so the
benchmark cannot rot: a peer's results scored against the dev set's expected values."""

from __future__ import annotations

import sys
from pathlib import Path

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
