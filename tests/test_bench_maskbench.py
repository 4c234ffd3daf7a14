"""benchmarks/bench_maskbench.py's scoring, in process and untimed, so the benchmark cannot
rot: structgen (no vocabulary) on embedded schemas with valid and invalid instances, the
outcome classes (passed, refused, crashed), the tallies, the corpus reader's sample order,
and the worker pool's crash and timeout handling with stand-in engines."""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_maskbench as bench  # noqa: E402 - the benchmark is a script beside the tests

OBJECT = {
    "type": "object",
    "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
    "required": ["b"],
}
DOC = {
    "schema": OBJECT,
    "tests": [
        {"valid": True, "data": {"a": "x", "b": 3.0}},  # canonical: {"b":3,"a":"x"}
        {"valid": True, "data": {"b": -1, "extra": [1.0]}},  # extra keys: the spec reading
        {"valid": False, "data": {"a": "x"}},
        {"valid": False, "data": {"b": 2.5}},
    ],
}


def _tests(doc):
    return [(v, text, []) for v, text in bench.canonical_tests(doc)]


def test_canonical_tests_are_the_corpus_helper_form():
    assert [t for _, t, _ in _tests(DOC)] == [
        '{"b":3,"a":"x"}',
        '{"b":-1,"extra":[1]}',
        '{"a":"x"}',
        '{"b":2.5}',
    ]


def test_structgen_scores_a_schema_exactly():
    rec = bench.score(bench.Structgen(None), OBJECT, _tests(DOC))
    assert rec["status"] == "compiled", rec
    assert (rec["valid"], rec["invalid"]) == (2, 2)
    assert (rec["valid_rejected"], rec["invalid_accepted"]) == (0, 0)
    assert rec["compile_s"] > 0 and rec["ttfm_s"] >= rec["compile_s"]


@pytest.mark.parametrize("name", ["llguidance", "xgrammar"])
def test_peer_scores_a_schema_exactly(name):
    """The peer engine classes against the pinned peers (benchmarks/requirements-peers.txt):
    an API change of theirs would turn this schema's record into "crashed" or "refused"."""
    pytest.importorskip(name)
    from benchmarks.support import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    tests = [(v, t, tok.encode(t, add_special_tokens=False)) for v, t, _ in _tests(DOC)]
    rec = bench.score(bench.ENGINES[name](tok), OBJECT, tests)
    assert rec["status"] == "compiled", rec
    assert (rec["valid_rejected"], rec["invalid_accepted"]) == (0, 0), rec


def test_structgen_refusal_names_the_keyword():
    schema = {"type": "string", "pattern": "(a)\\1"}  # a backreference: never regular
    rec = bench.score(bench.Structgen(None), schema, [(True, '"aa"', [])])
    assert rec["status"] == "refused"
    assert rec["reason"] == "UnsupportedSchemaError: pattern"


class AcceptsAll:
    """Compiles anything and accepts every instance: its invalid acceptances must count."""

    refusals = (ValueError,)

    def __init__(self, tok=None):
        pass

    def compile(self, schema):
        return schema

    def first_mask(self, grammar):
        pass

    def accepts(self, grammar, text, ids):
        return True


class Raises(AcceptsAll):
    """Raises ``exc`` from compile."""

    def __init__(self, exc):
        self.exc = exc

    def compile(self, schema):
        raise self.exc


class Panic(BaseException):
    """Stands for a native panic surfacing as a BaseException (pyo3's PanicException)."""


def test_outcome_classes_and_tally():
    tests = _tests(DOC)
    wrong = bench.score(AcceptsAll(), OBJECT, tests)
    assert (wrong["status"], wrong["valid_rejected"], wrong["invalid_accepted"]) == (
        "compiled",
        0,
        2,
    )
    refused = bench.score(Raises(ValueError("Unknown format: uri-template at /a/b/3")), {}, tests)
    assert refused["status"] == "refused"
    assert refused["reason"] == "ValueError: Unknown format: uri-template at <ptr>"
    assert bench.score(Raises(RuntimeError("boom")), {}, tests)["status"] == "crashed"
    assert bench.score(Raises(Panic("native")), {}, tests)["status"] == "crashed"
    good = bench.score(bench.Structgen(None), OBJECT, tests)
    empty = bench.score(bench.Structgen(None), OBJECT, [])
    recs = [
        {"name": "good", "tests": 4, **good},
        {"name": "wrong", "tests": 4, **wrong},
        {"name": "refused", "tests": 4, **refused},
        {"name": "empty", "tests": 0, **empty},
        {"name": "slow", "tests": 4, "status": "timeout", "reason": "over 60 s"},
    ]
    t = bench.tally(recs)
    assert t["schemas"] == 5 and t["with_instances"] == 4
    assert (t["compiled"], t["refused"], t["timeout"], t["crashed"]) == (3, 1, 1, 0)
    assert t["passed"] == 1  # the no-instance schema compiles but is counted apart
    assert t["no_instances_compiled"] == 1
    assert (t["invalid_accepted"], t["valid_rejected"]) == (2, 0)
    assert t["reasons"] == {"ValueError: Unknown format: uri-template at <ptr>": 1}
    lines = bench.table({"structgen": {"S": recs}}, ["structgen"])
    assert lines[2].startswith("| structgen | 5 | 4 | 3 | 1 | 0 | 1 | 1 | 25.0% |")
    # an engine with fewer records (an interrupted run): totals over the common schemas
    lines = bench.table(
        {"structgen": {"S": recs}, "other": {"S": recs[:2]}}, ["structgen", "other"]
    )
    assert lines[0].startswith("Totals over the 2 schemas every engine finished")
    assert lines[4].startswith("| structgen | 2 | 2 | 2 | 0 | 0 | 0 | 1 | 50.0% |")


def test_iter_corpus_takes_the_first_members_in_sorted_name_order(tmp_path):
    with tarfile.open(tmp_path / "Sub.tar.xz", "w:xz") as tar:
        for name in ("Sub/c.json", "Sub/a.json", "Sub/b.json"):
            data = json.dumps({"schema": {}, "tests": [], "n": name}).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert bench.subsets_on_disk(tmp_path) == ["Sub"]
    got = list(bench.iter_corpus(["Sub"], 2, tmp_path))
    assert [(s, n) for s, n, _ in got] == [("Sub", "a.json"), ("Sub", "b.json")]
    assert json.loads(got[1][2])["n"] == "Sub/b.json"
    assert len(list(bench.iter_corpus(["Sub"], None, tmp_path))) == 3


class Crash(AcceptsAll):
    """Takes its worker process down."""

    def compile(self, schema):
        os._exit(3)


class Hang(AcceptsAll):
    """Runs past any timeout."""

    def compile(self, schema):
        time.sleep(600)


@pytest.mark.timeout(300)
def test_pool_replaces_crashed_and_hung_workers():
    me = "tests.test_bench_maskbench"
    engines = [f"{me}:Crash", f"{me}:Hang", f"{me}:AcceptsAll"]
    raw = json.dumps(DOC).encode()
    seen = []
    info = bench.run_pool(
        iter([("S", "one.json", raw)]),
        engines,
        workers=1,
        timeout_s=10.0,
        on_result=lambda sub, name, eng, rec: seen.append((eng.split(":")[1], rec["status"])),
        tokenizer=False,
    )
    assert seen == [("Crash", "crashed"), ("Hang", "timeout"), ("AcceptsAll", "compiled")]
    assert info["restarts"] == 2
