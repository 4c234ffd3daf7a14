"""The asynchronous, streaming front of a :class:`DataParallelEngine`, for the HTTP server.

It has the interface of :class:`~structgen.runtime.async_engine.AsyncEngine` that the
server uses (``generate`` streaming snapshots, ``abort``, ``stats``, ``shutdown``, and
``.engine`` for tokenizer, vocabulary, chat template and limits); ``.engine`` is a
:class:`FrontView` built from what replica 0 reports, so the front process holds no
weights. ``structgen serve --dp N`` uses it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from structgen.runtime.distributed.data_parallel import DataParallelEngine
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["AsyncDataParallelEngine", "FrontView"]


class FrontView:
    """The parts of an ``Engine`` the server reads, without a model: ``config``,
    ``tokenizer``, ``vocab``, ``eos_token_ids``, ``loaded.config``,
    ``scheduler.max_request_tokens()``, ``apply_chat_template``, ``encode_prompt``."""

    def __init__(self, config, info: dict) -> None:
        from structgen.fsm import Vocabulary

        self.config = config
        self.tokenizer = info["tokenizer"]
        self.eos_token_ids = frozenset(info["eos_token_ids"])
        self.vocab = Vocabulary.from_tokenizer(self.tokenizer, eos_token_ids=info["eos_token_ids"])
        self.encode_text = functools.partial(self.tokenizer.encode, add_special_tokens=False)
        self.loaded = SimpleNamespace(config=info["hf_config"])
        limit = info["max_request_tokens"]
        self.scheduler = SimpleNamespace(max_request_tokens=lambda: limit)

    def apply_chat_template(self, messages: list[dict]) -> list[int]:
        """As ``Engine.apply_chat_template``."""
        from structgen.runtime.engine import Engine

        return Engine.apply_chat_template(self, messages)

    def encode_prompt(self, prompt: Any) -> list[int]:
        """As ``Engine.encode_prompt``."""
        from structgen.runtime.engine import Engine

        return Engine.encode_prompt(self, prompt)


class AsyncDataParallelEngine:
    """``AsyncEngine``'s interface over data-parallel replicas.

    Args:
        model: as for ``Engine``.
        **kwargs: ``EngineConfig`` fields (``data_parallel_size`` > 1).

    Raises:
        ConfigError, DistributedError: as :class:`DataParallelEngine`.
    """

    def __init__(self, model: str | None = None, **kwargs: Any) -> None:
        self.dp = DataParallelEngine(model, **kwargs)
        self.engine = FrontView(self.dp.config, self.dp.info)

    async def generate(self, prompt: Any, params: SamplingParams | None = None,
                       constraint: Any = None, request_id: str | None = None,
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

        rid = self.dp.submit(prompt, params, constraint, request_id, listener)
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
                self.dp.abort(rid)

    async def abort(self, request_id: str) -> None:
        """Abort a request (its stream ends with ``"abort"``)."""
        self.dp.abort(str(request_id))

    def stats(self) -> dict:
        """``DataParallelEngine.stats()`` (every ``Engine.stats()`` key, over replicas).

        Raises:
            DistributedError: a replica died.
        """
        return self.dp.stats()

    def shutdown(self) -> None:
        """Stop every replica."""
        self.dp.close()


