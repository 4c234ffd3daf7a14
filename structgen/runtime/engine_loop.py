"""EngineLoop: the one loop that drives ``Engine.step()``, and its snapshot publisher.

Every driver of an engine uses it: offline ``Engine.generate`` and a DSL program's calls
(:meth:`EngineLoop.run_until_finished`, several threads batched together under its
lock), ``AsyncEngine``'s thread and a data-parallel replica's process
(:meth:`EngineLoop.serve`: a command inbox between steps). Tensor-parallel worker ranks
replay rank 0's forwards in their own loop (``distributed.worker``).

After each step the loop hands the requests the step updated to one
:class:`SnapshotPublisher`, which sends watched requests' ``RequestOutput`` snapshots to
their listeners. Step boundaries are observable and controllable: ``step_hook`` runs
after every step, and ``pause()`` / ``resume()`` stop and restart stepping while
commands are still served.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from structgen.runtime.outputs import RequestOutput
from structgen.runtime.request import Request

if TYPE_CHECKING:
    from structgen.runtime.engine import Engine

__all__ = ["EngineLoop", "SnapshotPublisher"]

_WAKE = ("wake",)  # an inbox item that only ends the loop's idle wait


@dataclass
class _Watch:
    req: Request
    listener: Callable[[RequestOutput], None]
    stream: bool
    emitted: int = 0  # characters of text already sent


class SnapshotPublisher:
    """Sends watched requests' output snapshots to their listeners.

    A streamed request gets a snapshot whenever it has new final text: cumulative
    ``text`` / ``token_ids`` plus the ``delta_text`` since the previous snapshot (never
    half a character or a partial stop string); every watched request gets its final
    output (``finish_reason`` set; streamed: ``delta_text`` is the rest of the text),
    after which it is forgotten. Thread-safe for one publishing thread and any number
    of watching ones.
    """

    def __init__(self) -> None:
        self._watched: dict[str, _Watch] = {}

    def watch(
        self, req: Request, listener: Callable[[RequestOutput], None], *, stream: bool = True
    ) -> None:
        """Send ``req``'s snapshots (``stream``) or only its final output to ``listener``."""
        self._watched[req.request_id] = _Watch(req, listener, stream)

    def find(self, request_id: str) -> Request | None:
        """The watched request with this id, or None."""
        watch = self._watched.get(request_id)
        return watch.req if watch is not None else None

    def requests(self) -> list[Request]:
        """Every watched request."""
        return [w.req for w in list(self._watched.values())]

    def clear(self) -> list[Callable[[RequestOutput], None]]:
        """Forget every watched request; returns their listeners."""
        watched, self._watched = self._watched, {}
        return [w.listener for w in watched.values()]

    def publish(self, req: Request) -> None:
        """Send ``req``'s new snapshot, if it is watched and has one. Raises: what the
        listener raises.
        """
        watch = self._watched.get(req.request_id)
        if watch is None or watch.req is not req:
            return
        if req.status.is_finished:
            out = req.to_output()
            if watch.stream:
                out.delta_text = out.text[watch.emitted :]
            self._watched.pop(req.request_id, None)
        elif watch.stream:
            out = req.to_output()
            out.delta_text = req.detokenizer.pop_delta()
            if not out.delta_text:
                return
            watch.emitted += len(out.delta_text)
        else:
            return
        watch.listener(out)


class EngineLoop:
    """Drives one engine's steps and publishes what they change.

    Args:
        engine: the engine (``step()``, ``scheduler.has_unfinished``, ``add_request``,
            ``abort_request``).
        step_hook: called after every step (once its snapshots are published) with the
            number of steps run so far and the requests the step updated; it may call
            :meth:`pause`, which takes effect before the next step.
        inbox: the command queue :meth:`serve` reads (``get(timeout=)`` /
            ``get_nowait()``); None = a new thread-safe queue.

    Attributes:
        publisher: the snapshot publisher of this loop's steps.
        num_steps: engine steps run so far.
        lock: held around every step and request hand-over by
            :meth:`run_until_finished` (concurrent callers share the engine).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        step_hook: Callable[[int, list[Request]], None] | None = None,
        inbox: Any = None,
    ) -> None:
        self.engine = engine
        self.publisher = SnapshotPublisher()
        self.num_steps = 0
        self.lock = threading.RLock()
        self._step_hook = step_hook
        self._inbox = inbox if inbox is not None else queue.SimpleQueue()
        self._paused = False

    # ------------------------------------------------------------------- steps
    def step(self) -> list[Request]:
        """One engine step; publishes the updated requests, then runs ``step_hook``.

        Returns:
            The requests the step updated.
        """
        updated = self.engine.step()
        self.num_steps += 1
        for req in updated:
            self.publisher.publish(req)
        if self._step_hook is not None:
            self._step_hook(self.num_steps, updated)
        return updated

    def add(self, req: Request) -> None:
        """Queue a prepared request; publishes it at once when it fails on admission."""
        self.engine.add_request(req)
        if req.status.is_finished:
            self.publisher.publish(req)

    def abort(self, req: Request) -> None:
        """Abort a request (pages freed) and publish its final output. Raises: never."""
        self.engine.abort_request(req)
        self.publisher.publish(req)

    def run_until_finished(
        self,
        reqs: Sequence[Request],
        listener: Callable[[int, RequestOutput], None] | None = None,
    ) -> list[RequestOutput]:
        """Add ``reqs`` and step (under :attr:`lock`) until every one of them finished.

        Steps advance every request of the engine, so callers in several threads are
        continuously batched together; the lock is released between steps.

        Args:
            reqs: prepared requests (``Engine.make_request``).
            listener: called on this thread with ``(index in reqs, snapshot)`` for each
                streamed snapshot and each final output; None = no streaming.

        Returns:
            One final RequestOutput per request, in order.

        Raises:
            whatever a step or the listener raises; this call's requests are aborted first.
        """
        events: queue.SimpleQueue = queue.SimpleQueue()  # filled by whichever thread steps
        try:
            with self.lock:
                for i, req in enumerate(reqs):
                    if listener is not None:
                        self.publisher.watch(req, lambda out, i=i: events.put((i, out)))
                    self.add(req)
            while True:
                _drain(events, listener)
                with self.lock:
                    if all(r.status.is_finished for r in reqs):
                        break
                    self.step()
            _drain(events, listener)
        except BaseException:
            with self.lock:  # never leave our requests running in a shared engine
                for r in reqs:
                    self.abort(r)
            raise
        return [r.to_output() for r in reqs]

    # ----------------------------------------------------------------- serving
    def send(self, command: Any) -> None:
        """Put a command on the inbox :meth:`serve` handles (thread-safe)."""
        self._inbox.put(command)

    def pause(self) -> None:
        """Take no further step until :meth:`resume` (thread-safe, returns at once).

        A step already running completes; from the next step boundary on, :meth:`serve`
        only handles commands. Raises: never.
        """
        self._paused = True

    def resume(self) -> None:
        """Let :meth:`serve` step again after :meth:`pause` (thread-safe). Raises: never."""
        self._paused = False
        self._inbox.put(_WAKE)

    @property
    def is_paused(self) -> bool:
        """True between :meth:`pause` and :meth:`resume`."""
        return self._paused

    def serve(self, handle: Callable[[Any], bool], poll_s: float) -> None:
        """Handle inbox commands and step, until ``handle`` returns False.

        Each round handles every queued command, then takes one step when a request
        waits or runs and the loop is not paused; an idle loop blocks on the inbox (at
        most ``poll_s`` seconds at a time).

        Args:
            handle: called with each command on this thread; False stops the loop.
            poll_s: longest idle wait, seconds.

        Raises:
            whatever ``handle``, a step or the step hook raises.
        """
        while True:
            idle = self._paused or not self.engine.scheduler.has_unfinished
            try:
                cmd = self._inbox.get(timeout=poll_s) if idle else self._inbox.get_nowait()
            except queue.Empty:
                cmd = None
            while cmd is not None:
                if cmd != _WAKE and not handle(cmd):
                    return
                try:
                    cmd = self._inbox.get_nowait()
                except queue.Empty:
                    cmd = None
            if not self._paused and self.engine.scheduler.has_unfinished:
                self.step()


def _drain(events: queue.SimpleQueue, listener) -> None:
    while True:
        try:
            i, out = events.get_nowait()
        except queue.Empty:
            return
        listener(i, out)
