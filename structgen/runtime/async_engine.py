"""AsyncEngine: an :class:`~structgen.runtime.engine_loop.EngineLoop` in one background
thread, streamed to asyncio callers.

Every touch of the Engine (scheduler, pages, matchers, model) happens on the loop thread;
callers talk to it through the loop's command inbox, and it answers through per-request
asyncio queues (the loop's snapshot publisher, ``loop.call_soon_threadsafe``). A crash of
the loop thread is re-raised in every waiting caller, never turned into a warning.

Step boundaries are observable and controllable: ``pause()`` stops the loop from taking
another step (commands are still handled: requests queue, aborts finish and free pages),
``resume()`` lets it go on, and ``step_hook`` is called on the loop thread after every step.
Together they let a caller (a test, a weight update) act at an exact step, whatever the
speed of the machine.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from structgen.errors import EngineDeadError, RequestError
from structgen.runtime.engine_loop import EngineLoop
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.request import Request
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["AsyncEngine"]


_IDLE_POLL_S = 0.5


@dataclass
class _Stream:
    """One caller's asyncio queue of snapshots (or the loop's crash)."""

    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue = field(default_factory=asyncio.Queue)

    def put(self, item: RequestOutput | BaseException) -> None:
        self.loop.call_soon_threadsafe(self.out.put_nowait, item)


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

    def __init__(
        self,
        model: str | None = None,
        *,
        step_hook: Callable[[int, list[Request]], None] | None = None,
        **kwargs: Any,
    ) -> None:
        from structgen.runtime.engine import Engine

        self.engine = Engine(model, **kwargs)
        self.loop = EngineLoop(self.engine, step_hook=step_hook)
        self._dead: BaseException | None = None
        self._closed = False
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
        if self.loop.publisher.find(req.request_id) is not None:
            raise RequestError(f"request id {req.request_id!r} is already running")
        stream = _Stream(asyncio.get_running_loop())
        self.loop.publisher.watch(req, stream.put)
        self.loop.send(("add", req))
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
                self.loop.send(("abort", req.request_id))

    @property
    def num_steps(self) -> int:
        """Engine steps the loop has run."""
        return self.loop.num_steps

    async def abort(self, request_id: str) -> None:
        """Abort a request: its pages are freed and its stream ends with ``"abort"``."""
        self.loop.send(("abort", str(request_id)))

    def pause(self) -> None:
        """Take no further engine step until ``resume()`` (thread-safe, returns at once).

        A step already running completes; from the next step boundary on, the loop only
        handles commands: new requests wait in the queue, aborts finish their request
        and free its pages. Raises: never.
        """
        self.loop.pause()

    def resume(self) -> None:
        """Let the loop step again after ``pause()`` (thread-safe). Raises: never."""
        self.loop.resume()

    @property
    def is_paused(self) -> bool:
        """True between ``pause()`` and ``resume()``."""
        return self.loop.is_paused

    def stats(self) -> dict:
        """Counters of the engine (read without locking: a consistent-enough snapshot)."""
        return self.engine.stats()

    def shutdown(self) -> None:
        """Stop the loop thread (pending requests are aborted), then the engine's
        tensor-parallel workers, if any.
        """
        self._closed = True
        self.loop.send(("close", None))
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self.engine.close()

    # ------------------------------------------------------------ loop thread
    def _check_alive(self) -> None:
        if self._dead is not None:
            raise EngineDeadError("the engine loop crashed") from self._dead
        if self._closed:
            raise RequestError("the engine is shut down")

    def _handle(self, cmd: tuple) -> bool:
        """One command on the loop thread; False once the engine is shut down."""
        if self._closed:
            return False
        kind, arg = cmd
        if kind == "add":
            self.loop.add(arg)
        elif kind == "abort":
            req = self.loop.publisher.find(arg)
            if req is not None and not req.status.is_finished:
                self.loop.abort(req)
        return True

    def _loop(self) -> None:
        try:
            self.loop.serve(self._handle, _IDLE_POLL_S)
            for req in self.loop.publisher.requests():
                self.loop.abort(req)
        except BaseException as exc:  # re-raised in every waiting caller
            self._dead = exc
            for put in self.loop.publisher.clear():
                put(exc)
