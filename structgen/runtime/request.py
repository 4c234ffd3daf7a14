"""Request: the one object that carries a request through scheduler, runner and sampler."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structgen.runtime.detokenizer import IncrementalDetokenizer
from structgen.runtime.outputs import RequestMetrics, RequestOutput
from structgen.runtime.sampling_params import SamplingParams

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = ["Request", "RequestStatus"]


class RequestStatus(enum.Enum):
    """Where a request is in its life."""

    WAITING = "waiting"
    WAITING_FOR_GRAMMAR = "waiting_for_grammar"
    RUNNING = "running"
    FINISHED = "finished"
    ABORTED = "aborted"
    FAILED = "failed"

    @property
    def is_finished(self) -> bool:
        """True for the three terminal states."""
        return self in (RequestStatus.FINISHED, RequestStatus.ABORTED, RequestStatus.FAILED)


@dataclass(eq=False)
class Request:
    """A request's whole state, counters not phases (see shared/STYLE.md).

    Requests compare (and hash) by identity: each is one mutable piece of state (the
    scheduler's queues find and remove them with ``==``).

    ``all_token_ids = prompt_token_ids + output_token_ids``; the first
    ``num_computed_tokens`` of them have K/V in the pages of ``page_table``. Whatever
    remains (a prompt, a prefill chunk's rest, a sampled token, jump-forward text) is
    simply "tokens to compute".

    Attributes:
        request_id: unique id.
        prompt_token_ids: prompt tokens.
        params: sampling settings.
        matcher: grammar cursor (a ``structgen.fsm.BaseMatcher``) or None when unconstrained.
        constraint: what ``matcher`` was compiled from (a constraint spec, or a compiled
            grammar), None when unconstrained; a data-parallel front ships its spec to a
            replica.
        detokenizer: incremental text of the output.
        generator: the seeded generator when ``params.seed`` is set
            (``sampler.make_generator``: a ``numpy.random.Generator`` for host logits, a
            ``torch.Generator`` on the device otherwise), else None.
        output_token_ids: generated tokens (sampled + jump-forward), EOS/stop ids excluded.
        page_table: KV page ids, in order.
        num_computed_tokens: leading tokens whose K/V are in the pages.
        status: life-cycle state.
        finish_reason: ``"stop"``, ``"length"``, ``"abort"`` or ``"error"`` when finished.
        error: message of a failed request.
        arrival_time / first_token_time / finish_time: ``time.perf_counter()`` seconds.
        num_forward_passes: forwards this request took part in.
        num_cached_tokens: prompt tokens served from the prefix cache.
        cache_node: the radix-tree node this request holds locked (None without cache).
        num_tree_pages: leading entries of ``page_table`` owned by the radix tree.
        was_admitted: admitted at least once (prefix-hit counters count the first time).
        uses_prefix_cache: False for requests whose prompt must be computed in full.
        max_cached_prefix: most leading tokens the prefix cache may serve (None: no
            limit); ``prompt_logprobs`` requests need the rows before their first
            wanted token computed (``params.prompt_logprobs_start - 1``).
        logprobs: per output token ``{token_id: logprob}`` when ``params.logprobs`` is set.
        prompt_logprobs: per prompt token (None for the first) when requested.
        draft_token_ids: speculative tokens proposed for this step (grammar-checked, not
            verified). They follow ``all_token_ids`` as extra "tokens to compute"; the
            engine verifies and clears them in the same step.
        draft_probs: ``[len(draft_token_ids), V]`` float32 proposal distribution ``q`` of a
            sampling draft model, or None (greedy, or a point-mass proposer).
        spec_num_tokens: tokens to propose next (adaptive k), None = the engine's k.
        spec_proposed_tokens / spec_accepted_tokens: speculative counters.
        prompt_only: a scoring request: only its prompt is computed, up to the row that
            predicts the last prompt token (the rows ``params.prompt_logprobs`` reads), and
            nothing is sampled: the last prompt token's own row, which only predicts the
            first output token, is never computed. It finishes with ``"length"`` and no
            output token once those rows are computed (``Scheduler.update_from_output``),
            or at ``Scheduler.add`` when its prompt has fewer than 2 tokens.
    """

    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams
    detokenizer: IncrementalDetokenizer
    matcher: Any = None
    constraint: Any = None
    generator: np.random.Generator | torch.Generator | None = None
    output_token_ids: list[int] = field(default_factory=list)
    page_table: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    status: RequestStatus = RequestStatus.WAITING
    finish_reason: str | None = None
    error: str | None = None
    arrival_time: float = field(default_factory=time.perf_counter)
    first_token_time: float | None = None
    finish_time: float | None = None
    num_forward_passes: int = 0
    num_cached_tokens: int = 0
    cache_node: Any = None
    num_tree_pages: int = 0
    was_admitted: bool = False
    uses_prefix_cache: bool = True
    max_cached_prefix: int | None = None
    logprobs: list[dict[int, float]] | None = None
    prompt_logprobs: list[dict[int, float] | None] | None = None
    draft_token_ids: list[int] = field(default_factory=list)
    draft_probs: torch.Tensor | None = None
    spec_num_tokens: int | None = None
    spec_proposed_tokens: int = 0
    spec_accepted_tokens: int = 0
    prompt_only: bool = False

    @property
    def num_tokens(self) -> int:
        """Prompt plus output tokens known so far."""
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_tokens_to_compute(self) -> int:
        """Known tokens (and draft tokens) whose K/V are not computed yet; for a
        ``prompt_only`` request, its prompt tokens but the last.
        """
        if self.prompt_only:
            return max(0, self.num_tokens - 1 - self.num_computed_tokens)
        return self.num_tokens + len(self.draft_token_ids) - self.num_computed_tokens

    def clear_drafts(self) -> None:
        """Forget this step's proposal. Raises: never."""
        self.draft_token_ids = []
        self.draft_probs = None

    def token_slice(self, start: int, end: int) -> list[int]:
        """Tokens ``[start, end)`` of ``prompt + output + drafts`` without building the
        whole list.
        """
        n_known = self.num_tokens
        if end > n_known and self.draft_token_ids:
            tail = self.draft_token_ids[max(0, start - n_known) : end - n_known]
            return (self.token_slice(start, n_known) if start < n_known else []) + tail
        n_prompt = len(self.prompt_token_ids)
        if end <= n_prompt:
            return self.prompt_token_ids[start:end]
        if start >= n_prompt:
            return self.output_token_ids[start - n_prompt : end - n_prompt]
        return self.prompt_token_ids[start:] + self.output_token_ids[: end - n_prompt]

    def finish(self, reason: str, error: str | None = None) -> None:
        """Mark finished with ``reason`` (``"error"`` also sets status FAILED)."""
        self.finish_reason = reason
        self.error = error
        self.finish_time = time.perf_counter()
        if reason == "error":
            self.status = RequestStatus.FAILED
        elif reason == "abort":
            self.status = RequestStatus.ABORTED
        else:
            self.status = RequestStatus.FINISHED

    def to_output(self) -> RequestOutput:
        """Snapshot as a RequestOutput (final once the request is finished)."""
        n_out = len(self.output_token_ids)
        ttft = tpot = 0.0
        if self.first_token_time is not None:
            ttft = self.first_token_time - self.arrival_time
            end = self.finish_time or self.first_token_time
            if n_out > 1:
                tpot = (end - self.first_token_time) / (n_out - 1)
        text = self.detokenizer.finish() if self.status.is_finished else self.detokenizer.text
        return RequestOutput(
            text=text,
            token_ids=list(self.output_token_ids),
            finish_reason=self.finish_reason,
            error=self.error,
            metrics=RequestMetrics(
                ttft_s=ttft,
                tpot_s=tpot,
                num_prompt_tokens=len(self.prompt_token_ids),
                num_generated_tokens=n_out,
                num_forward_passes=self.num_forward_passes,
                cached_tokens=self.num_cached_tokens,
                spec_proposed_tokens=self.spec_proposed_tokens,
                spec_accepted_tokens=self.spec_accepted_tokens,
            ),
            request_id=self.request_id,
            logprobs=list(self.logprobs) if self.logprobs is not None else None,
            prompt_logprobs=self.prompt_logprobs,
        )
