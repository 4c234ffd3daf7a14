"""benchmarks/profile_batched.py's per-thread CPU reading (``--util``), without a model: each
thread's CPU from /proc against the thread's own clock (``time.thread_time``)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import profile_batched  # noqa: E402 - the benchmark is a script beside the tests

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")


def test_threads_cpu_matches_each_threads_own_clock():
    tick = 1 / os.sysconf("SC_CLK_TCK")
    seen: dict[str, float] = {}
    start = threading.Event()
    done = threading.Event()
    measured = threading.Event()
    release = threading.Event()

    def busy() -> None:
        seen["tid"] = threading.get_native_id()
        start.set()
        done.wait()
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.3:  # 0.3 s of this thread's CPU
            pass
        seen["cpu"] = time.thread_time()  # the thread's whole CPU so far
        measured.set()
        release.wait()  # alive (listed in /proc) until the reading below is taken

    worker = threading.Thread(target=busy)
    worker.start()
    start.wait()
    before = profile_batched._threads_cpu()
    done.set()
    # the busy thread may be listed only once it exists: it does (start.wait above)
    assert seen["tid"] in before and threading.get_native_id() in before
    measured.wait()
    after = profile_batched._threads_cpu()  # the busy thread still exists: it waits
    release.set()
    worker.join()
    got = after[seen["tid"]] - before[seen["tid"]]
    assert got >= 0.3 - 3 * tick - 0.05  # the 0.3 s spent after ``before``, within ticks
    assert got <= seen["cpu"] + 3 * tick  # never more than the thread's own clock
    # the calling thread was mostly waiting: far less than the busy one
    me = threading.get_native_id()
    assert after[me] - before[me] < got / 2
