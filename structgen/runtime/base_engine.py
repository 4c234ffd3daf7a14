"""BaseEngine: the interface of every engine, in one process or over data-parallel replicas.

``Engine`` (one process, possibly rank 0 of a tensor-parallel group) and
``DataParallelEngine`` (replicas behind a router; what ``Engine(...,
data_parallel_size=N)`` returns) both implement it, so the DSL's ``EngineBackend``,
extraction and the HTTP server run on either. Requests are prepared where the engine's
caller is (prompt encoded, grammar compiled: errors raised before anything runs) and
run with :meth:`BaseEngine.run_requests` or :meth:`BaseEngine.generate`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

from structgen.errors import RequestError
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.request import Request
from structgen.runtime.request_factory import RequestFactory
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["BaseEngine"]


class BaseEngine(RequestFactory, abc.ABC):
    """What every engine offers.

    Attributes (set by each implementation):
        config: the ``EngineConfig``.
        tokenizer: the model's tokenizer (chat template included).
        vocab: the fsm ``Vocabulary`` grammars are compiled for.
        vocab_size: width of the model's logits (valid prompt token ids are below it).
        eos_token_ids: the model's EOS token ids (frozenset).
        device: where the engine's logits and request generators live, as a device name
            (``"cpu"``, ``"cuda"``, ``"cuda:N"``; ``torch.device(engine.device)`` for torch's).
    """

    # --------------------------------------------------------------- requests
    def make_request(
        self,
        prompt: Any,
        params: SamplingParams | None = None,
        constraint: Any = None,
        request_id: str | None = None,
    ) -> Request:
        """Validate and prepare one request (prompt encoded, grammar compiled).

        Raises:
            RequestError, SchemaError, RegexError: bad prompt, params or constraint.
            ConfigError: the request needs text (a text or chat prompt, a constraint, stop
                strings) and the model was loaded without a tokenizer.
        """
        req = self._make_request(prompt, params or SamplingParams(), constraint)
        if request_id is not None:
            req.request_id = str(request_id)
        return req

    @abc.abstractmethod
    def run_requests(
        self,
        reqs: Sequence[Request],
        listener: Callable[[int, RequestOutput], None] | None = None,
    ) -> list[RequestOutput]:
        """Run prepared requests (:meth:`make_request`) until each one finished.

        Thread-safe: calls from several threads run together.

        Args:
            reqs: the requests (ids unique among running requests).
            listener: called on this thread with ``(index in reqs, snapshot)``: streamed
                ``RequestOutput`` snapshots (cumulative text, ``delta_text`` since the
                previous one), then each final output; None = no streaming.

        Returns:
            One final RequestOutput per request, in order.

        Raises:
            RequestError, SchemaError, RegexError: a request was refused.
            DistributedError: the engine is down.
        """

    @abc.abstractmethod
    def generate(
        self,
        prompts: Sequence[Any] | str,
        params: SamplingParams | list[SamplingParams] | None = None,
        constraint: Any = None,
        *,
        use_tqdm: bool = False,
    ) -> list[RequestOutput]:
        """Generate for every prompt (see :meth:`structgen.runtime.engine.Engine.generate`)."""

    @abc.abstractmethod
    def max_request_tokens(self) -> int:
        """Most tokens (prompt + output) one request can hold."""

    @staticmethod
    def _prompt_list(prompts: Sequence[Any] | str) -> list[Any]:
        """``prompts`` as a list of prompts (a string or one chat is a single prompt).

        Raises:
            RequestError: ``prompts`` is neither a string nor a sequence of prompts.
        """
        if isinstance(prompts, dict) or not hasattr(prompts, "__iter__"):
            raise RequestError(
                "prompts must be a string, a chat (a list of {'role', 'content'} messages) or "
                f"a list of prompts; got {type(prompts).__name__}"
            )
        if isinstance(prompts, str) or (
            isinstance(prompts, list) and prompts and all(isinstance(m, dict) for m in prompts)
        ):
            return [prompts]
        return list(prompts)

    # ------------------------------------------------------------- extraction
    def extract(
        self,
        schema: Any,
        text: str | list[str],
        instructions: str | None = None,
        params: SamplingParams | None = None,
        errors: str = "raise",
        copy: bool | None = None,
        return_details: bool = False,
        score_span_ends: bool | None = None,
        score_options: bool | None = None,
        evidence: bool | None = None,
        score_numbers: bool | None = None,
        score_overlaps: bool | None = None,
        score_array_ends: bool | None = None,
        write_nulls: bool | None = None,
        on_result: Callable[[int, Any], None] | None = None,
    ) -> Any:
        """Extract a schema-valid object from each text (see
        :func:`structgen.extraction.extract`: ``copy`` (copy constraints),
        ``score_span_ends``, ``score_options``, ``score_numbers``, ``score_overlaps`` (on by
        default: overlapping copied string fields moved by score; False turns it off),
        ``score_array_ends`` (on by default: an array of copied values cut where the model
        scores closing it, the rest generated again), ``evidence``, ``write_nulls`` and
        ``on_result`` (called with each text's index and result as it finishes) as there).
        """
        from structgen.extraction import extract

        return extract(
            self,
            schema,
            text,
            instructions=instructions,
            params=params,
            errors=errors,
            copy=copy,
            score_span_ends=score_span_ends,
            score_options=score_options,
            score_numbers=score_numbers,
            score_overlaps=score_overlaps,
            score_array_ends=score_array_ends,
            evidence=evidence,
            write_nulls=write_nulls,
            on_result=on_result,
            return_details=return_details,
        )

    # --------------------------------------------------------------- counters
    @abc.abstractmethod
    def stats(self) -> dict:
        """Counters (KV pages, prefix cache, queues, forward passes, speculative)."""

    @abc.abstractmethod
    def memory_report(self) -> dict[str, int]:
        """Bytes held by the model weights (``weight_bytes``) and the KV cache: reserved
        (``kv_bytes``), used by requests and the prefix cache (``kv_used_bytes``) and at
        ``max_kv_tokens`` (``kv_max_bytes``).
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release processes and devices (idempotent)."""

    def __enter__(self) -> BaseEngine:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
