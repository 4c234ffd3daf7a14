"""Two single-threaded pipelines over one CPU engine's model, in threads of one process.

Why: in a batched job on a CPU, about a quarter of the calling thread's time is host work
(grammar compiles and masks, sampling glue, jump-forward, scheduling, result parsing) during
which the kernels' second OpenMP thread idles, while inside a forward every thread is busy
(benchmarks/RESULTS.md, session 27 u9). Two pipelines, each with its C kernels on one thread,
let one pipeline's host work run while the other's forward does; as threads of one process
they share the weights, the tokenizer and the grammar vocabulary (two replica processes,
``data_parallel_size=2``, cost seconds of start-up and ~3x the memory).

How: :class:`HostPipelines` holds ``n`` engines built by ``Engine.host_pipeline`` over one
engine's loaded model, each with its own KV pool, prefix cache, scheduler and loop (the
engine it was made from is left as it is, so other callers of that engine are unaffected).
:meth:`HostPipelines.run` runs one job per pipeline, each on its own thread with
``kernel_thread_limit(1)``; every job holds the pipelines' :class:`HostLock` for all its
work except the forwards (``Engine.step`` releases it around ``runner.execute``, whose C
kernels release the GIL), so the pipelines' host work, grammar state included, never runs
concurrently (it would share compiled grammars' lazily built state), only beside the other
pipeline's forward. A job whose partner has ended runs its forwards on the caller's kernel
threads shared among the jobs still running (``HostLock.forward_threads``: a pipeline left
alone at the end of a job uses both cores of a 2-core host). Greedy outputs equal the single
pipeline's: the kernels are batch and thread-count invariant (a request's tokens do not
depend on its batch or its threads).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from structgen.errors import ConfigError
from structgen.runtime.cpu.threads import kernel_thread_limit, kernel_threads

if TYPE_CHECKING:
    from structgen.runtime.engine import Engine

__all__ = ["HostLock", "HostPipelines", "host_pipelines"]

# the jobs still running share an ended job's kernel threads (False: one thread each to the end)
SHARE_THREADS = True


class HostLock:
    """A re-entrant lock its holder can let go of entirely for a while (:meth:`released`).

    A pipeline's job holds it (``with lock:``) for all its work; ``Engine.step`` enters it
    again and leaves it for the forward alone. Raises: never (misuse of :meth:`released` by
    a thread that does not hold it raises ``RuntimeError``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        # the C kernels' threads within ``released`` (the forward); None: the thread's own
        self.forward_threads: int | None = None

    def __enter__(self) -> HostLock:
        me = threading.get_ident()
        if self._owner == me:
            self._depth += 1
            return self
        self._lock.acquire()
        self._owner, self._depth = me, 1
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Let go of the lock (every level this thread holds) within the block; taken back
        on exit, also on error. Within the block this thread's C kernels use
        :attr:`forward_threads` threads (read on entry; None: unchanged).

        Raises:
            RuntimeError: this thread does not hold the lock.
        """
        if self._owner != threading.get_ident():
            raise RuntimeError("HostLock.released: the calling thread does not hold the lock")
        threads = self.forward_threads
        depth, self._owner, self._depth = self._depth, None, 0
        self._lock.release()
        try:
            if threads is None:
                yield
            else:
                with kernel_thread_limit(threads):
                    yield
        finally:
            self._lock.acquire()
            self._owner, self._depth = threading.get_ident(), depth


class HostPipelines:
    """``n`` pipelines over ``engine``'s model (see the module docstring).

    Args:
        engine: a CPU ``Engine`` without tensor parallelism, speculative decoding or
            grammar threads.
        n: pipelines (>= 2).

    Attributes:
        engines: the pipelines' engines (not ``engine`` itself).

    Raises:
        ConfigError: ``n`` < 2, or an engine ``Engine.host_pipeline`` refuses.
    """

    def __init__(self, engine: Engine, n: int = 2) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ConfigError(f"HostPipelines: n must be an int >= 2, got {n!r}")
        self.lock = HostLock()
        self.engines = [engine.host_pipeline(self.lock) for _ in range(n)]
        self._busy = threading.Lock()  # one run at a time (see try_run)

    def try_run(
        self, jobs: Sequence[Callable[[Engine, Callable[..., None]], Any]]
    ) -> list[tuple[Any, BaseException | None]] | None:
        """Run ``jobs[k](engines[k], post)`` on pipeline ``k``'s thread, all at once, and wait
        for every one; None (nothing run) when another call is running them.

        ``post(fn, *args)`` (thread-safe) has ``fn(*args)`` called on this thread while the
        jobs run (in the order posted); when such a call raises (or the wait is interrupted,
        e.g. ``KeyboardInterrupt``), every later ``post`` of the jobs raises ``RuntimeError``
        (so a job that posts ends early), the jobs are waited for, and the exception is
        raised here.

        Args:
            jobs: at most ``len(engines)`` callables.

        Returns:
            Per job ``(its return value, None)`` or ``(None, the exception it raised)``: a
            failed job never stops the others.

        Raises:
            ConfigError: more jobs than pipelines.
            What a posted call raised.
        """
        if len(jobs) > len(self.engines):
            raise ConfigError(f"HostPipelines: {len(jobs)} jobs for {len(self.engines)} pipelines")
        if not self._busy.acquire(blocking=False):
            return None
        try:
            return self._run(jobs)
        finally:
            self._busy.release()

    def _run(self, jobs) -> list[tuple[Any, BaseException | None]]:
        outcomes: list[tuple[Any, BaseException | None]] = [(None, None)] * len(jobs)
        calls: queue.SimpleQueue = queue.SimpleQueue()  # (fn, args) or None when a job ended
        failed: list[BaseException] = []  # a posted call raised: the jobs stop posting
        total = kernel_threads()  # this thread's kernel threads, shared among running jobs
        alive = [len(jobs)]  # jobs not yet ended

        def share() -> None:  # under self.lock: read by a forward as it starts
            if SHARE_THREADS:
                self.lock.forward_threads = max(1, total // max(1, alive[0]))

        def post(fn: Callable[..., None], *args: Any) -> None:
            if failed:
                raise RuntimeError("HostPipelines: the caller's callback failed; job stopped")
            calls.put((fn, args))

        def work(k: int) -> None:
            try:
                with kernel_thread_limit(1), self.lock:
                    try:
                        outcomes[k] = (jobs[k](self.engines[k], post), None)
                    finally:  # the jobs still running share this one's kernel threads
                        alive[0] -= 1
                        share()
            except BaseException as exc:  # reported to the caller, never lost
                outcomes[k] = (None, exc)
            finally:
                calls.put(None)

        with self.lock:
            share()
        threads = [
            threading.Thread(target=work, args=(k,), name=f"structgen-pipeline-{k}", daemon=True)
            for k in range(len(jobs))
        ]
        for t in threads:
            t.start()
        running = len(threads)
        try:
            while running:
                item = calls.get()
                if item is None:
                    running -= 1
                elif not failed:
                    fn, args = item
                    try:
                        fn(*args)
                    except BaseException as exc:
                        failed.append(exc)
        except BaseException as exc:  # interrupted while waiting: the jobs stop posting
            failed.append(exc)
        finally:  # never leave a job running on the pipelines after this call
            for t in threads:
                t.join()
            self.lock.forward_threads = None
        if failed:
            raise failed[0]
        return outcomes

    def flush_cache(self) -> int:
        """Evict every unlocked page of each pipeline's prefix cache; returns pages freed."""
        with self.lock:
            return sum(e.flush_cache() for e in self.engines)

    def close(self) -> None:
        """Close the pipelines' engines (idempotent)."""
        for e in self.engines:
            e.close()


def host_pipelines(engine: Engine, n: int = 2) -> HostPipelines:
    """``engine``'s :class:`HostPipelines` of ``n`` pipelines, built on first use and kept on
    the engine (``engine.host_pipelines_``).

    Raises:
        ConfigError: as :class:`HostPipelines`.
    """
    with _made:
        pipes = engine.__dict__.get("host_pipelines_")
        if pipes is None or len(pipes.engines) != n:
            pipes = engine.__dict__["host_pipelines_"] = HostPipelines(engine, n)
        return pipes


_made = threading.Lock()  # host_pipelines builds one set per engine
