"""Host pipelines: the lock's hand-over, and jobs on two pipelines over one tiny engine's model
(outputs equal to the engine's own, a failed job alone, callbacks on the calling thread)."""

from __future__ import annotations

import threading
import time

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import ConfigError
from structgen.runtime.host_pipelines import HostLock, HostPipelines


def test_host_lock_is_reentrant_and_released_entirely():
    lock = HostLock()
    got = threading.Event()

    def other() -> None:
        with lock:
            got.set()

    with lock, lock:  # twice: released() lets go of both levels
        t = threading.Thread(target=other)
        t.start()
        assert not got.wait(0.2)  # held: the other thread waits
        with lock.released():
            assert got.wait(10)  # free: it got in
            t.join(10)
        assert lock._owner == threading.get_ident() and lock._depth == 2
    assert lock._owner is None
    with pytest.raises(RuntimeError):
        with lock.released():
            pass


@pytest.fixture(scope="module")
def engine(tiny_llama_dir):
    return Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=4)


@pytest.fixture(scope="module")
def pipes(engine):
    return HostPipelines(engine, 2)


def test_pipelines_share_the_model_and_generate_what_the_engine_does(engine, pipes):
    prompts = [f"item {i}: the colour is" for i in range(6)]
    params = SamplingParams(max_tokens=6, temperature=0.0)
    ref = [o.token_ids for o in engine.generate(prompts, params)]
    threads = {}

    def job(k):
        def run(e, post):
            threads[k] = threading.get_ident()
            return [o.token_ids for o in e.generate(prompts[k::2], params)]

        return run

    outcomes = pipes.try_run([job(0), job(1)])
    assert [exc for _, exc in outcomes] == [None, None]
    assert outcomes[0][0] == ref[0::2] and outcomes[1][0] == ref[1::2]
    assert len({threads[0], threads[1], threading.get_ident()}) == 3
    for e in pipes.engines:
        assert e.loaded.model is engine.loaded.model and e.vocab is engine.vocab
        assert e.pool is not engine.pool and e.scheduler is not engine.scheduler
    assert engine.host_lock is None  # the engine itself is left as it was


def test_a_failed_job_fails_alone_and_posts_run_on_the_calling_thread(pipes):
    params = SamplingParams(max_tokens=4, temperature=0.0)
    seen = []

    def fails(e, post):
        raise ValueError("boom")

    def works(e, post):
        out = e.generate(["hello there"], params)[0]
        post(lambda x: seen.append((x, threading.get_ident())), out.text)
        return out.text

    outcomes = pipes.try_run([fails, works])
    assert isinstance(outcomes[0][1], ValueError) and outcomes[0][0] is None
    assert outcomes[1][1] is None
    assert seen == [(outcomes[1][0], threading.get_ident())]


def test_a_failing_callback_stops_the_jobs_and_is_raised(pipes):
    posted_after = []

    def job(e, post):
        post(lambda: (_ for _ in ()).throw(KeyError("callback")))
        for _ in range(200):  # ends when a post raises (the callback failed)
            threading.Event().wait(0.01)
            post(posted_after.append, 1)
        return "not stopped"

    with pytest.raises(KeyError):
        pipes.try_run([job, job])
    assert posted_after == []  # nothing posted after the failure ran


def test_busy_pipelines_refuse_a_second_run(pipes):
    inner = []

    def job(e, post):
        inner.append(pipes.try_run([lambda e2, p2: 1]))

    pipes.try_run([job])
    assert inner == [None]


def test_bad_arguments_are_refused(engine, pipes):
    with pytest.raises(ConfigError):
        HostPipelines(engine, 1)
    with pytest.raises(ConfigError):
        pipes.try_run([lambda e, p: 1] * 3)


def test_a_job_left_alone_runs_its_forwards_on_the_callers_threads(engine, pipes):
    from structgen.runtime.cpu.threads import kernel_thread_limit, kernel_threads

    params = SamplingParams(max_tokens=4, temperature=0.0)
    prompt = "item 1: the colour is"
    ref = engine.generate([prompt], params)[0].token_ids
    seen: dict[int, list[int]] = {0: [], 1: []}
    saved = [e.runner.execute for e in pipes.engines]
    for k, e in enumerate(pipes.engines):

        def counted(scheduled, execute=saved[k], k=k):
            seen[k].append(kernel_threads())
            return execute(scheduled)

        e.runner.execute = counted

    def short(e, post):
        return e.generate(["hello"], params)[0].token_ids

    def long(e, post):
        with pipes.lock.released():  # until the short job has ended
            for _ in range(1000):
                if pipes.lock.forward_threads == 2:
                    break
                time.sleep(0.01)
        return e.generate([prompt], params)[0].token_ids

    try:
        with kernel_thread_limit(2):
            outcomes = pipes.try_run([short, long])
    finally:
        for e, execute in zip(pipes.engines, saved):
            e.runner.execute = execute
    assert [exc for _, exc in outcomes] == [None, None]
    assert seen[0] and set(seen[0]) == {1}  # beside the other job: one thread each
    assert seen[1] and set(seen[1]) == {2}  # left alone: the caller's two threads
    assert outcomes[1][0] == ref  # the same tokens (the kernels are thread-count invariant)
    assert pipes.lock.forward_threads is None  # reset after the run
