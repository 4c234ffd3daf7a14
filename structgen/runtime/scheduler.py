"""Scheduler: decides, each step, which requests compute how many tokens.

It knows no prefill or decode phases, only "tokens to compute" per request (a prompt,
a prefill chunk, one sampled token, jump-forward text): running requests go first, then
waiting requests are admitted FCFS while the per-step token budget, the running cap and
the KV pages allow. Prefill is chunked to the budget. When pages run out, the most
recently admitted request is preempted (its pages freed; it recomputes later). The
runtime issue extends this with the radix cache and cache-aware ordering.
"""

from __future__ import annotations

from collections import deque

from structgen.errors import PromptTooLongError
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.request import Request, RequestStatus

__all__ = ["Scheduler"]


class Scheduler:
    """Waiting and running queues over one KVPool.

    Args:
        pool: the KV page pool (pages are allocated per step, as tokens are computed).
        max_batch_tokens: most tokens per forward.
        max_running_requests: most running requests.
        max_model_len: context limit of the model, tokens.
    """

    def __init__(
        self, pool: KVPool, max_batch_tokens: int, max_running_requests: int, max_model_len: int
    ) -> None:
        self.pool = pool
        self.max_batch_tokens = max_batch_tokens
        self.max_running_requests = max_running_requests
        self.max_model_len = max_model_len
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self._failed: list[Request] = []

    @property
    def has_unfinished(self) -> bool:
        """True while any request waits or runs."""
        return bool(self.waiting or self.running)

    def max_request_tokens(self) -> int:
        """Most tokens (prompt + output) one request can ever hold: context and pool limit."""
        return min(self.max_model_len, self.pool.num_usable_pages * self.pool.page_size)

    def add(self, req: Request) -> None:
        """Queue a request, or fail it alone when its prompt can never fit.

        A prompt that fits but leaves no room for ``max_tokens`` is still accepted: it
        finishes with ``"length"`` at the limit.
        """
        limit = self.max_request_tokens()
        if len(req.prompt_token_ids) >= limit:
            err = PromptTooLongError(
                f"prompt has {len(req.prompt_token_ids)} tokens; the limit is {limit - 1} "
                f"(max_model_len={self.max_model_len}, KV cache "
                f"{self.pool.num_usable_pages * self.pool.page_size} tokens)"
            )
            req.finish("error", str(err))
            return
        self.waiting.append(req)

    def failed_in_schedule(self) -> list[Request]:
        """Requests failed by the last :meth:`schedule` (taken: a second call returns [])."""
        failed, self._failed = self._failed, []
        return failed

    def _pages_needed(self, req: Request, num_tokens: int) -> int:
        size = self.pool.page_size
        return max(0, -(-num_tokens // size) - len(req.page_table))

    def _grow(self, req: Request, num_tokens: int) -> bool:
        need = self._pages_needed(req, num_tokens)
        pages = self.pool.alloc(need)
        if pages is None:
            return False
        req.page_table.extend(pages)
        return True

    def release(self, req: Request) -> None:
        """Free a request's pages and drop it from the queues (finish, abort, fail)."""
        self.pool.free(req.page_table)
        req.page_table = []
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)

    def _preempt(self, victim: Request) -> None:
        self.pool.free(victim.page_table)
        victim.page_table = []
        victim.num_computed_tokens = 0
        victim.status = RequestStatus.WAITING
        self.running.remove(victim)
        self.waiting.appendleft(victim)

    def schedule(self) -> list[tuple[Request, int]]:
        """Plan one step: ``(request, num_tokens)`` pairs, tokens counted from
        ``request.num_computed_tokens``. Pages for them are allocated here.

        Requests that cannot fit even alone are failed here (``finish_reason="error"``);
        the caller collects them via their status.
        """
        budget = self.max_batch_tokens
        plan: list[tuple[Request, int]] = []
        for req in list(self.running):
            if req not in self.running:  # preempted earlier in this loop
                continue
            n = min(req.num_tokens_to_compute, budget)
            if n <= 0:
                continue
            while not self._grow(req, req.num_computed_tokens + n):
                victim = self.running[-1]
                if victim is req and len(self.running) == 1:
                    req.finish("error", "KV cache too small for this request alone")
                    self.release(req)
                    self._failed.append(req)
                    break
                self._preempt(victim)
                if victim is req:
                    break
            else:
                plan.append((req, n))
                budget -= n
        while self.waiting and budget > 0 and len(self.running) < self.max_running_requests:
            req = self.waiting[0]
            n = min(req.num_tokens_to_compute, budget)
            if not self._grow(req, req.num_computed_tokens + n):
                break
            self.waiting.popleft()
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            plan.append((req, n))
            budget -= n
        return plan
