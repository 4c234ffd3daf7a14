"""A tensor-parallel rank that dies or hangs takes the engine down with a clear error, in
bounded time; close() and the context manager stop the workers."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import DistributedError

pytestmark = pytest.mark.timeout(60)

SETTINGS = {"dtype": "float32", "max_kv_tokens": 1024, "page_size": 4}
LONG = SamplingParams(max_tokens=400, temperature=0.0, ignore_eos=True)


def _kill_later(pid: int, sig: int, delay_s: float) -> threading.Thread:
    t = threading.Timer(delay_s, os.kill, (pid, sig))
    t.start()
    return t


def test_killed_rank_is_reported_mid_run(tiny_model_dirs):
    engine = Engine(tiny_model_dirs["llama_gqa"], tensor_parallel_size=2, dist_timeout_s=30, **SETTINGS)
    worker = engine.runner.workers.processes[0]
    assert engine.generate(["warm up"], SamplingParams(max_tokens=4, temperature=0.0))[0].token_ids
    before = engine.runner.num_forward_passes
    _kill_later(worker.pid, signal.SIGKILL, 0.5)
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match=r"rank 1 exited with code -9"):
        engine.generate(["The quick brown fox"] * 3, LONG)  # ~400 steps: killed mid-run
    elapsed = time.monotonic() - t0
    assert engine.runner.num_forward_passes > before  # it did run before the kill
    assert elapsed < 10, f"reported after {elapsed:.1f} s"  # well inside dist_timeout_s=30
    with pytest.raises(DistributedError):  # the engine stays down, at once
        engine.generate(["again"], SamplingParams(max_tokens=2))
    engine.close()


def test_hung_rank_times_out(tiny_model_dirs):
    engine = Engine(tiny_model_dirs["llama_gqa"], tensor_parallel_size=2, dist_timeout_s=3, **SETTINGS)
    worker = engine.runner.workers.processes[0]
    try:
        assert engine.generate(["warm up"], SamplingParams(max_tokens=4, temperature=0.0))[0].token_ids
        os.kill(worker.pid, signal.SIGSTOP)  # alive but silent: only the timeout can tell
        t0 = time.monotonic()
        with pytest.raises(DistributedError, match="failed"):
            engine.generate(["The quick brown fox"], SamplingParams(max_tokens=20))
        assert time.monotonic() - t0 < 3 + 8
    finally:
        if worker.is_alive():
            os.kill(worker.pid, signal.SIGKILL)
        engine.close()
    assert not worker.is_alive()


def test_close_and_context_manager_stop_workers(tiny_model_dirs):
    with Engine(tiny_model_dirs["llama_kv1_tied"], tensor_parallel_size=2, **SETTINGS) as engine:
        worker = engine.runner.workers.processes[0]
        assert worker.is_alive()
    assert not worker.is_alive() and worker.exitcode == 0  # told to stop, exited cleanly
    engine.close()  # idempotent
