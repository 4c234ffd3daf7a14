"""A tensor-parallel rank that dies or hangs takes the engine down with a clear error, in
bounded time; close() and the context manager stop the workers."""

from __future__ import annotations

import os
import signal
import time

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import DistributedError

pytestmark = pytest.mark.timeout(60)

SETTINGS = {"dtype": "float32", "max_kv_tokens": 1024, "page_size": 4}
LONG = SamplingParams(max_tokens=400, temperature=0.0, ignore_eos=True)


def test_killed_rank_is_reported_mid_run(tiny_model_dirs):
    """Rank 1 is killed between two steps of a running batch (after 5 forward passes, not
    after a wall-clock delay): the next step reports it, long before dist_timeout_s."""
    engine = Engine(
        tiny_model_dirs["llama_gqa"], tensor_parallel_size=2, dist_timeout_s=30, **SETTINGS
    )
    worker = engine.runner.workers.processes[0]
    assert engine.generate(["warm up"], SamplingParams(max_tokens=4, temperature=0.0))[0].token_ids
    reqs = [engine.make_request("The quick brown fox", LONG) for _ in range(3)]
    for req in reqs:
        engine.add_request(req)
    before = engine.runner.num_forward_passes
    for _ in range(5):
        engine.step()
    assert engine.runner.num_forward_passes == before + 5  # it did run before the kill
    assert not any(r.status.is_finished for r in reqs)  # mid-run: 400 tokens each
    os.kill(worker.pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match=r"rank 1 exited with code -9"):
        engine.step()
    elapsed = time.monotonic() - t0
    assert elapsed < 10, f"reported after {elapsed:.1f} s"  # well inside dist_timeout_s=30
    with pytest.raises(DistributedError):  # the engine stays down, at once
        engine.generate(["again"], SamplingParams(max_tokens=2))
    engine.close()


def test_hung_rank_times_out(tiny_model_dirs):
    engine = Engine(
        tiny_model_dirs["llama_gqa"], tensor_parallel_size=2, dist_timeout_s=3, **SETTINGS
    )
    worker = engine.runner.workers.processes[0]
    try:
        assert engine.generate(["warm up"], SamplingParams(max_tokens=4, temperature=0.0))[
            0
        ].token_ids
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
