"""benchmarks/bench_extract_batch.py's process-tree memory reading, without a model: a child's
peak resident set as read from the parent against the child's own ``/proc/self/status``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_extract_batch as bench  # noqa: E402 - the benchmark is a script beside the tests

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")

CHILD = """
import sys
block = bytearray(96 * 1024 * 1024)  # zero pages are touched: resident
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(hwm, flush=True)
sys.stdin.read()  # hold until the parent is done reading
"""


def test_tree_peak_rss_reads_a_childs_own_peak():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        own_mb = int(child.stdout.readline()) / 1024  # the child's peak, read by itself
        tree = bench.tree_peak_rss_mb()
    finally:
        child.stdin.close()
        child.wait(10)
    assert os.getpid() in tree and child.pid in tree
    assert tree[child.pid][1] == pytest.approx(own_mb, abs=1.0)  # no allocation in between
    assert own_mb >= 96
    gone = bench.tree_peak_rss_mb()
    assert child.pid not in gone  # an exited (reaped) child is not in the tree


class _Scheduler:
    max_running_requests = 64

    def schedule(self):
        return None


class _Runner:
    def execute(self, scheduled):
        return None


class _Engine:
    """Stands in for ``Engine``: each ``extract`` runs ``len(texts)`` forward passes of 2
    rows; ``vary`` makes the outputs depend on ``max_running_requests``."""

    def __init__(self, vary: bool = False):
        self.scheduler, self.runner, self.vary, self.flushes = _Scheduler(), _Runner(), vary, 0

    def flush_cache(self):
        self.flushes += 1

    def extract(self, schema, texts):
        one = isinstance(texts, str)
        for _ in [texts] if one else texts:
            self.scheduler.schedule()
            self.runner.execute(type("S", (), {"scheduled": [(None, 1), (None, 1)]})())
        tag = self.scheduler.max_running_requests if self.vary else ""
        out = [f"{t}{tag}" for t in ([texts] if one else texts)]
        return out[0] if one else out


def _args(**kw):
    import argparse

    return argparse.Namespace(**{"ab_max_running": "4,8", "rounds": 2, "batch1_docs": 1,
                                 "seed": 0, **kw})  # fmt: skip


def test_ab_max_running_counts_restores_and_flushes(capsys):
    engine = _Engine()
    bench.ab_max_running(engine, {}, ["a", "b", "c"], _args())
    out = capsys.readouterr().out
    assert engine.scheduler.max_running_requests == 64  # restored
    assert "execute" not in vars(engine.runner) and "schedule" not in vars(engine.scheduler)
    assert engine.flushes == 2 * 2 * 2  # before batch 1 and before batched, per arm and round
    rows = [line for line in out.splitlines() if line.startswith(("| 4 |", "| 8 |"))]
    assert len(rows) == 2
    cells = rows[0].split("|")
    assert cells[8].strip() == "3" and cells[9].strip() == "2"  # passes, rows / pass


def test_ab_max_running_refuses_different_outputs():
    with pytest.raises(AssertionError, match="other outputs"):
        bench.ab_max_running(_Engine(vary=True), {}, ["a", "b"], _args())


def test_batch1_sample_spreads_over_the_set():
    texts = [f"card {i}" for i in range(200)]
    sample = bench.batch1_sample(texts, 8)
    idx = [texts.index(t) for t in sample]
    assert idx[0] == 0 and idx[-1] == 199 and len(set(idx)) == 8
    gaps = [b - a for a, b in zip(idx, idx[1:])]
    assert max(gaps) - min(gaps) <= 1  # evenly spread, not the first eight
    assert bench.batch1_sample(texts, 200) == texts
    assert bench.batch1_sample(texts, 1) == texts[:1]
