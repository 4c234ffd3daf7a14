"""The asynchronous, streaming front of a :class:`DataParallelEngine`, for the HTTP server.

It has the interface of :class:`~structgen.runtime.async_engine.AsyncEngine` that the
server uses (``generate`` streaming snapshots, ``abort``, ``stats``, ``shutdown``, and
``.engine`` for tokenizer, vocabulary, chat template and limits); ``.engine`` is the
:class:`DataParallelEngine` itself (a ``BaseEngine``; the front process holds no
weights). ``structgen serve --dp N`` uses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from structgen.runtime.distributed.data_parallel import DataParallelEngine
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["AsyncDataParallelEngine"]


class AsyncDataParallelEngine:
    """``AsyncEngine``'s interface over data-parallel replicas.

    Args:
        model: as for ``Engine``.
        **kwargs: ``EngineConfig`` fields (``data_parallel_size`` > 1).

    Raises:
        ConfigError, DistributedError: as :class:`DataParallelEngine`.
    """

    def __init__(self, model: str | None = None, **kwargs: Any) -> None:
        self.engine = DataParallelEngine(model, **kwargs)

    async def generate(
        self,
        prompt: Any,
        params: SamplingParams | None = None,
        constraint: Any = None,
        request_id: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        """Stream snapshots of one request, as ``AsyncEngine.generate``.

        Raises:
            RequestError, SchemaError, RegexError: the request was refused.
            DistributedError: a replica died.
        """
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()

        def listener(kind: str, payload: Any) -> None:
            loop.call_soon_threadsafe(events.put_nowait, (kind, payload))

        rid = self.engine.submit(prompt, params, constraint, request_id, listener)
        finished = False
        try:
            while True:
                kind, payload = await events.get()
                if kind in ("error", "dead"):
                    finished = True
                    raise payload
                yield payload
                if kind == "done":
                    finished = True
                    return
        finally:
            if not finished:
                self.engine.abort(rid)

    async def abort(self, request_id: str) -> None:
        """Abort a request (its stream ends with ``"abort"``)."""
        self.engine.abort(str(request_id))

    def stats(self) -> dict:
        """``DataParallelEngine.stats()`` (every ``Engine.stats()`` key, over replicas).

        Raises:
            DistributedError: a replica died.
        """
        return self.engine.stats()

    def shutdown(self) -> None:
        """Stop every replica."""
        self.engine.close()
