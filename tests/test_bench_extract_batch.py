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
