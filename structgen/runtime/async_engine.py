"""AsyncEngine: the engine loop in one background thread, streamed to asyncio callers.

Every touch of the Engine (scheduler, pages, matchers, model) happens on the loop thread;
callers talk to it through a command queue, and it answers through per-request asyncio
queues (``loop.call_soon_threadsafe``). A crash of the loop thread is re-raised in every
waiting caller, never turned into a warning.

Step boundaries are observable and controllable: ``pause()`` stops the loop from taking
another step (commands are still handled: requests queue, aborts finish and free pages),
``resume()`` lets it go on, and ``step_hook`` is called on the loop thread after every step.
Together they let a caller (a test, a weight update) act at an exact step, whatever the
speed of the machine.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from structgen.errors import EngineDeadError, RequestError
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.request import Request
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["AsyncEngine"]


@dataclass
class _Stream:
    req: Request
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue = field(default_factory=asyncio.Queue)
    emitted: int = 0  # characters of text already streamed


class AsyncEngine:
    """Asynchronous, streaming front of :class:`structgen.runtime.engine.Engine`.

    Args:
        model: as for ``Engine``.
        step_hook: called on the loop thread after each engine step (once its outputs
            are published) with the number of steps run so far and the requests the step
            updated; it may call ``pause()``, which then takes effect before the next
            step. An exception it raises kills the loop like any loop crash.
        **kwargs: ``EngineConfig`` fields.

    Example::

        engine = AsyncEngine()
        async for out in engine.generate("Hello", SamplingParams(max_tokens=8)):
            print(out.delta_text, end="")
    """

    def __new__(cls, model: str | None = None, **kwargs: Any):
        """``data_parallel_size > 1`` returns an ``AsyncDataParallelEngine`` (same interface)."""
        if cls is AsyncEngine and kwargs.get("data_parallel_size", 1) != 1:
            from structgen.runtime.distributed import AsyncDataParallelEngine

            return AsyncDataParallelEngine(model, **kwargs)
        return super().__new__(cls)

    def __init__(self, model: str | None = None, *,
                 step_hook: Callable[[int, list[Request]], None] | None = None,
                 **kwargs: Any) -> None:
        from structgen.runtime.engine import Engine

        self.engine = Engine(model, **kwargs)
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._streams: dict[str, _Stream] = {}
        self._wakeup = threading.Event()
        self._dead: BaseException | None = None
        self._closed = False
        self._paused = False
        self._step_hook = step_hook
        self.num_steps = 0  # engine steps the loop has run
        self._thread = threading.Thread(target=self._loop, name="structgen-engine", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- callers
    async def generate(
        self,
        prompt: Any,
        params: SamplingParams | None = None,
        constraint: Any = None,
        request_id: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        """Stream ``RequestOutput`` snapshots of one request.

        Each snapshot has cumulative ``text``/``token_ids`` and the ``delta_text`` since
        the previous one (never half a character or a partial stop string); the last one
        has ``finish_reason`` set. Breaking out of the loop aborts the request.

        Raises:
            RequestError, SchemaError, RegexError: invalid request (raised before any
                output); a request id already in use.
            EngineDeadError: the engine loop crashed.
        """
        self._check_alive()
        req = self.engine.make_request(prompt, params, constraint, request_id)
        if req.request_id in self._streams:
            raise RequestError(f"request id {req.request_id!r} is already running")
        stream = _Stream(req, asyncio.get_running_loop())
        self._streams[req.request_id] = stream
        self._send(("add", req))
        finished = False
        try:
            while True:
                item = await stream.out.get()
                if isinstance(item, BaseException):
                    raise EngineDeadError("the engine loop crashed") from item
                yield item
                if item.finish_reason is not None:
                    finished = True
                    return
        finally:
            if not finished:
                self._send(("abort", req.request_id))

    async def abort(self, request_id: str) -> None:
        """Abort a request: its pages are freed and its stream ends with ``"abort"``."""
        self._send(("abort", str(request_id)))

    def pause(self) -> None:
        """Take no further engine step until ``resume()`` (thread-safe, returns at once).

        A step already running completes; from the next step boundary on, the loop only
        handles commands: new requests wait in the queue, aborts finish their request
        and free its pages. Raises: never.
        """
        self._paused = True

    def resume(self) -> None:
        """Let the loop step again after ``pause()`` (thread-safe). Raises: never."""
        self._paused = False
        self._wakeup.set()

    @property
    def is_paused(self) -> bool:
        """True between ``pause()`` and ``resume()``."""
        return self._paused

    def stats(self) -> dict:
        """Counters of the engine (read without locking: a consistent-enough snapshot)."""
        return self.engine.stats()

    def shutdown(self) -> None:
        """Stop the loop thread (pending requests are aborted), then the engine's
        tensor-parallel workers, if any."""
        self._closed = True
        self._wakeup.set()
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self.engine.close()

    # ------------------------------------------------------------ loop thread
    def _send(self, cmd: tuple) -> None:
        self._commands.put(cmd)
        self._wakeup.set()

    def _check_alive(self) -> None:
        if self._dead is not None:
            raise EngineDeadError("the engine loop crashed") from self._dead
        if self._closed:
            raise RequestError("the engine is shut down")

    def _publish(self, req: Request) -> None:
        stream = self._streams.get(req.request_id)
        if stream is None or stream.req is not req:
            return
        out = req.to_output()
        if req.status.is_finished:
            out.delta_text = out.text[stream.emitted :]
            self._streams.pop(req.request_id, None)
        else:
            out.delta_text = req.detokenizer.pop_delta()
            if not out.delta_text:
                return
        stream.emitted += len(out.delta_text)
        stream.loop.call_soon_threadsafe(stream.out.put_nowait, out)

    def _handle_commands(self) -> None:
        while True:
            try:
                kind, arg = self._commands.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                self.engine.add_request(arg)
                if arg.status.is_finished:
                    self._publish(arg)
            elif kind == "abort":
                stream = self._streams.get(arg)
                if stream is not None and not stream.req.status.is_finished:
                    self.engine.abort_request(stream.req)
                    self._publish(stream.req)

    def _loop(self) -> None:
        try:
            while not self._closed:
                self._handle_commands()
                if self._paused or not self.engine.scheduler.has_unfinished:
                    self._wakeup.wait(timeout=0.5)
                    self._wakeup.clear()
                    continue
                updated = self.engine.step()
                self.num_steps += 1
                for req in updated:
                    self._publish(req)
                if self._step_hook is not None:
                    self._step_hook(self.num_steps, updated)
            for stream in list(self._streams.values()):
                self.engine.abort_request(stream.req)
                self._publish(stream.req)
        except BaseException as exc:  # re-raised in every waiting caller
            self._dead = exc
            for stream in list(self._streams.values()):
                stream.loop.call_soon_threadsafe(stream.out.put_nowait, exc)
            self._streams.clear()
