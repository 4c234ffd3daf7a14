"""benchmarks/bench_runtime.py's workload 1 bookkeeping, without a model: structgen and
transformers alternate run by run (A B, B A, ...) so both see the same load, structgen's prefix
cache is flushed before each of its runs, and the reported rates are the medians of the runs."""

from __future__ import annotations

import statistics
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_runtime as bench  # noqa: E402 - the benchmark is a script beside the tests

from structgen.errors import ConfigError  # noqa: E402


def test_alternate_runs_reverses_the_order_every_other_round():
    log = []

    def run(name, values):
        it = iter(values)

        def f():
            log.append(name)
            return next(it)

        return f

    got = bench.alternate_runs({"a": run("a", [3.0, 1.0, 2.0]), "b": run("b", [5.0, 6.0, 4.0])}, 3)
    assert log == ["a", "b", "b", "a", "a", "b"]
    assert got == {"a": [3.0, 1.0, 2.0], "b": [5.0, 6.0, 4.0]}


@pytest.mark.parametrize("repeats,runs", [(0, {"a": lambda: 1.0}), (2, {})])
def test_alternate_runs_rejects_no_rounds_or_no_runs(repeats, runs):
    with pytest.raises(ConfigError, match="repeats"):
        bench.alternate_runs(runs, repeats)


class _FakeEngine:
    """Engine's surface that workload 1 uses; each batched generate takes a scripted time."""

    def __init__(self, clock, durations):
        self.clock, self.durations, self.log = clock, iter(durations), []
        self.tokenizer = types.SimpleNamespace(encode=lambda t, add_special_tokens: [1] * 900)
        self.scheduler = types.SimpleNamespace(running=[])
        self.pool = types.SimpleNamespace(page_size=16)

    def step(self):
        return []

    def flush_cache(self):
        self.log.append("flush")
        return 0

    def generate(self, prompts, params, use_tqdm=False):
        params = params if isinstance(params, list) else [params] * len(prompts)
        if len(prompts) > 1:
            self.log.append("generate")
            self.clock[0] += next(self.durations)
        return [types.SimpleNamespace(token_ids=[0] * p.max_tokens) for p in params]


def test_workload_throughput_reports_medians_of_alternating_runs(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock[0])
    engine = _FakeEngine(clock, [2.0, 8.0, 4.0])
    hf = iter([10.0, 30.0, 20.0])
    monkeypatch.setitem(sys.modules, "bench_models", types.SimpleNamespace(_hf_llama=object))
    monkeypatch.setattr(
        bench, "_transformers_throughput", lambda m, p, o: engine.log.append("hf") or next(hf)
    )
    tp = bench.workload_throughput(engine, 4, 0, repeats=3)
    sg = ["flush", "generate"]
    assert engine.log == sg + ["hf", "hf"] + sg + sg + ["hf"]  # A B, B A, A B
    tokens = tp["output_tokens"]
    assert tp["structgen_runs"] == [tokens / 2.0, tokens / 8.0, tokens / 4.0]
    assert tp["structgen_tps"] == statistics.median(tp["structgen_runs"]) == tokens / 4.0
    assert tp["hf_runs"] == [10.0, 30.0, 20.0] and tp["hf_tps"] == 20.0
