"""A step gate for tests that act at an exact step of an ``AsyncEngine``'s loop.

A test that must abort "mid-prefill" or disconnect "before the request is done" cannot
count on the CPU being slow: on a fast machine the request is done first. Pass a
``StepGate`` as the engine's ``step_hook``; ``pause_after(n)`` then stops the loop after
``n`` more steps, at a step boundary, until ``resume()``. While paused the loop still
handles commands (new requests queue, aborts finish and free pages), so what the test
sees does not depend on speed.
"""

from __future__ import annotations

import threading
import time

from structgen import AsyncEngine


class StepGate:
    """``step_hook`` of an ``AsyncEngine`` that pauses it at a chosen step.

    Attributes:
        engine: the gated engine (set by ``attach``).
        num_steps: steps the engine's loop has run.
        seen: ``(running, waiting)`` request counts after every step.
    """

    def __init__(self) -> None:
        self.engine: AsyncEngine | None = None
        self.num_steps = 0
        self.seen: list[tuple[int, int]] = []
        self._target: int | None = None
        self._paused = threading.Event()

    def attach(self, engine: AsyncEngine) -> AsyncEngine:
        """Gate ``engine`` (built with ``step_hook=self``); returns it."""
        self.engine = engine
        return engine

    def __call__(self, num_steps: int, updated: list) -> None:  # on the loop thread
        self.num_steps = num_steps
        sch = self.engine.engine.scheduler
        self.seen.append((len(sch.running), len(sch.waiting)))
        if self._target is not None and num_steps >= self._target:
            self._target = None
            self.engine.pause()
            self._paused.set()

    def pause_after(self, n: int) -> None:
        """Pause the loop once it has run ``n`` more steps (call while it is idle).

        Counts from the engine's own step count, which the loop raises before a step's
        outputs are published: a caller that has seen its last request finish reads it
        up to date, whereas this hook runs after publishing and may lag by that step.
        """
        self._paused.clear()
        self._target = self.engine.num_steps + n

    def settle(self, timeout_s: float = 60.0) -> None:
        """Block until this hook has seen every step the loop ran (it runs after a step's
        outputs are published, so it may lag the engine's count by one step)."""
        deadline = time.monotonic() + timeout_s
        while self.num_steps != self.engine.num_steps:
            assert time.monotonic() < deadline, "the step hook did not catch up"
            time.sleep(0.001)

    def wait_paused(self, timeout_s: float = 120.0) -> None:
        """Block until the pause of ``pause_after`` took effect (fails after ``timeout_s``)."""
        assert self._paused.wait(timeout_s), f"the engine did not reach step {self._target}"

    def resume(self) -> None:
        """Let the loop step again; a pending ``pause_after`` is dropped."""
        self._target = None
        self.engine.resume()
