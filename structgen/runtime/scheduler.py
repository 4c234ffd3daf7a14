"""Scheduler: decides, each step, which requests compute how many tokens.

It knows no prefill or decode phases, only "tokens to compute" per request (a prompt,
a prefill chunk, one sampled token, jump-forward text). Each step:

1. running requests go first (decode steps and the next prefill chunk), each chunk
   capped by ``chunked_prefill_tokens`` and all together by ``max_batch_tokens``;
2. waiting requests are admitted while the token budget, ``max_running_requests`` and
   KV pages allow, in ``"lpm"`` order (longest cached prefix first, as SGLang does) or
   ``"fcfs"``. An admitted request starts from its longest prefix in the
   :class:`RadixCache` (those pages are shared and locked, not recomputed); with
   ``partial_pages`` it also starts from a copy of the leading slots of the cached page
   that continues that prefix inside one page (``RadixCache.match_prefix_partial``,
   ``KVPool.copy_page_prefix``), so only its own tokens are computed; a released
   request's partial last page goes into the tree for that (``insert_partial``). A request
   whose next uncached page is being computed right now by another request waits one
   step, so requests sharing a prefix (``n`` branches, a common system prompt) compute
   it once; one that may not be served that page from the cache (``max_cached_prefix``
   ends before it: prompt log-probs wanted there) does not wait for it;
3. when pages run out, unlocked cached pages are evicted (LRU), then the most recently
   admitted running request is preempted (its computed prefix goes into the cache, so
   its recompute is mostly cache hits).

Speculative draft tokens (``req.draft_token_ids``) are tokens to compute like any
other; when pages run short they are dropped before anything is evicted or preempted.
They never reach the tree: only verified tokens are ever counted as computed.

One step is ``schedule()`` -> ``ModelRunner.execute`` -> token sampling ->
:meth:`Scheduler.update_from_output`, the one writer of ``num_computed_tokens``, output
tokens and page tables after a forward (the shape of vLLM v1's scheduler): the forward's
chunks count as computed, the sampled tokens are applied (``step.process_tokens``: grammar,
stop checks, jump-forward), verified speculative drafts count as computed, rejected ones
give their pages back, and finished requests are released.

Page ownership: ``req.page_table[:req.num_tree_pages]`` belong to the radix tree
(locked through ``req.cache_node``), the rest to the request. After each prefill chunk
and at finish the computed tokens are inserted into the tree. Invariant:
free pages + pages in the tree + pages owned by requests == all usable pages.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from structgen.errors import prompt_too_long
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.radix_cache import RadixCache
from structgen.runtime.request import Request, RequestStatus
from structgen.runtime.step import process_tokens

if TYPE_CHECKING:
    from structgen.runtime.model_runner import ModelOutput
    from structgen.runtime.step import SampledTokens, StepContext

__all__ = ["Scheduler", "SchedulerOutput", "StepUpdate", "SCHEDULE_POLICIES"]

SCHEDULE_POLICIES = ("lpm", "fcfs")


@dataclass
class SchedulerOutput:
    """What runs in one step; iterating yields the ``(request, num_tokens)`` chunks.

    Attributes:
        scheduled: ``(request, num_tokens)`` in batch order, tokens counted from
            ``request.num_computed_tokens`` (pages for them are allocated).
        failed: requests failed while scheduling (cannot fit even alone), already
            released from the queues.
    """

    scheduled: list[tuple[Request, int]] = field(default_factory=list)
    failed: list[Request] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[Request, int]]:
        return iter(self.scheduled)

    def __len__(self) -> int:
        return len(self.scheduled)


@dataclass
class StepUpdate:
    """What :meth:`Scheduler.update_from_output` did.

    Attributes:
        updated: requests that changed visibly (got tokens, or finished), in step order.
        finished: requests finished this step, their pages already released.
        discarded: ``(request, num_tokens)``: verified speculative tokens not applied
            (the request finished before them, or the grammar forced text there).
    """

    updated: list[Request] = field(default_factory=list)
    finished: list[Request] = field(default_factory=list)
    discarded: list[tuple[Request, int]] = field(default_factory=list)


class Scheduler:
    """Waiting and running queues over one KVPool and an optional RadixCache.

    Args:
        pool: the KV page pool (pages are allocated per step, as tokens are computed).
        cache: the prefix cache, or None to disable prefix caching.
        max_batch_tokens: most tokens per forward.
        chunked_prefill_tokens: most tokens of one request per forward.
        max_running_requests: most running requests.
        max_model_len: context limit of the model, tokens.
        policy: ``"lpm"`` (longest prefix match first) or ``"fcfs"``.
        partial_pages: start admitted requests from a copy of a cached partial last page
            (module docstring); only where ``pool`` is the one KV store of the model
            (not a tensor-parallel group, whose other ranks hold their own).
    """

    def __init__(
        self,
        pool: KVPool,
        cache: RadixCache | None,
        max_batch_tokens: int,
        chunked_prefill_tokens: int,
        max_running_requests: int,
        max_model_len: int,
        policy: str = "lpm",
        partial_pages: bool = False,
    ) -> None:
        self.pool = pool
        self.partial_pages = partial_pages
        self.cache = cache
        self.max_batch_tokens = max_batch_tokens
        self.chunked_prefill_tokens = chunked_prefill_tokens
        self.max_running_requests = max_running_requests
        self.max_model_len = max_model_len
        self.policy = policy
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self._failed: list[Request] = []
        self.num_prompt_tokens = 0  # all prompt tokens admitted since start
        self.num_prefix_hit_tokens = 0  # of which served from the cache
        self.num_partial_hit_tokens = 0  # of which copied from a cached partial page
        self.num_preemptions = 0
        # called with a request's cacheable tokens before its first admission; it may put
        # pages into ``cache`` (a host pipeline imports what its engine's cache holds:
        # ``Engine.host_pipeline``, ``RadixCache.import_prefix``); None: nothing
        self.prefix_source: Callable[[list[int]], object] | None = None
        # called with a request about to be admitted for the first time, before its pages
        # are found (again if that admission is put off: it must be idempotent); a host
        # pipeline's extraction attaches the request's grammar there; None: nothing
        self.on_admit: Callable[[Request], None] | None = None

    # ------------------------------------------------------------------ queues
    @property
    def has_unfinished(self) -> bool:
        """True while any request waits or runs."""
        return bool(self.waiting or self.running)

    def max_request_tokens(self) -> int:
        """Most tokens (prompt + output) one request can ever hold: context and pool limit."""
        return min(self.max_model_len, self.pool.num_usable_pages * self.pool.page_size)

    def add(self, req: Request) -> None:
        """Queue a request, or fail it alone when its prompt can never fit.

        A prompt that fits but leaves no room for ``max_tokens`` is accepted: it finishes
        with ``"length"`` at the limit. A ``prompt_only`` request whose prompt has fewer
        than 2 tokens has no row to compute: it finishes with ``"length"`` here.
        """
        limit = self.max_request_tokens()
        if len(req.prompt_token_ids) >= limit:
            req.finish("error", str(prompt_too_long(len(req.prompt_token_ids), limit)))
            return
        if req.prompt_only and req.num_tokens < 2:
            req.finish("length")
            return
        req.status = RequestStatus.WAITING
        self.waiting.append(req)

    # ------------------------------------------------------------------- pages
    def _grow(self, req: Request, num_tokens: int) -> bool:
        """Give ``req`` pages for ``num_tokens`` tokens, evicting cached pages if needed."""
        need = max(0, -(-num_tokens // self.pool.page_size) - len(req.page_table))
        short = need - self.pool.num_free_pages
        if short > 0 and self.cache is not None:
            self.cache.evict(short)
        pages = self.pool.alloc(need)
        if pages is None:
            return False
        req.page_table.extend(pages)
        return True

    def trim_pages(self, req: Request) -> None:
        """Free the request's own pages past its known tokens (KV rollback of rejected
        speculative drafts: their positions are recomputed from the verified length).
        Raises: never.
        """
        keep = max(req.num_tree_pages, -(-req.num_tokens // self.pool.page_size))
        if len(req.page_table) > keep:
            self.pool.free(req.page_table[keep:])
            del req.page_table[keep:]

    def _cache_computed(self, req: Request) -> None:
        """Insert the request's computed whole pages into the tree and take the tree's
        pages (and lock) in their place.
        """
        tokens = req.token_slice(0, req.num_computed_tokens)
        dups = self.cache.insert(tokens, req.page_table)
        self.pool.free(dups)
        pages, length, node = self.cache.match_prefix(tokens)
        self.cache.inc_ref(node)
        if req.cache_node is not None:
            self.cache.dec_ref(req.cache_node)
        req.cache_node = node
        req.page_table[: len(pages)] = pages
        req.num_tree_pages = len(pages)

    def _drop_pages(self, req: Request, cache_it: bool) -> None:
        """Give back every page of ``req``: cached ones unlocked, own ones freed.

        With ``cache_it``, its computed whole pages go into the tree and, with
        ``partial_pages``, its partial last page too (``RadixCache.insert_partial``: the
        request no longer writes it), so a request continuing its tokens copies it.

        A request whose pages were already given back (released once, then aborted by a
        caller that saw it finish) holds none: nothing to do.
        """
        if not req.page_table and req.cache_node is None:
            return
        own = req.num_tree_pages
        if self.cache is not None and cache_it and req.num_computed_tokens > 0:
            self._cache_computed(req)
            own = req.num_tree_pages
            if (
                self.partial_pages
                and req.num_computed_tokens % self.pool.page_size
                and len(req.page_table) > own
                and self.cache.insert_partial(
                    req.token_slice(0, req.num_computed_tokens), req.page_table[own]
                )
            ):
                own += 1  # the partial last page is the tree's now
        self.pool.free(req.page_table[own:])
        if self.cache is not None and req.cache_node is not None:
            self.cache.dec_ref(req.cache_node)
        req.cache_node = None
        req.page_table = []
        req.num_tree_pages = 0

    def release(self, req: Request) -> None:
        """Drop a finished, aborted or failed request from the queues and free its pages.

        Computed KV of requests that did not fail is kept in the prefix cache.
        """
        self._drop_pages(req, cache_it=req.status != RequestStatus.FAILED)
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)

    def _on_computed(self, req: Request) -> None:
        """After a forward computed a chunk of ``req``: cache finished prefill pages."""
        if (
            self.cache is not None
            and req.uses_prefix_cache
            and req.num_computed_tokens <= len(req.prompt_token_ids)
            and req.num_computed_tokens // self.pool.page_size > req.num_tree_pages
        ):
            self._cache_computed(req)

    def _preempt(self, victim: Request) -> None:
        self._drop_pages(victim, cache_it=victim.uses_prefix_cache)
        victim.num_computed_tokens = 0
        victim.status = RequestStatus.WAITING
        self.running.remove(victim)
        self.waiting.appendleft(victim)
        self.num_preemptions += 1

    # ---------------------------------------------------------------- schedule
    def _chunk(self, req: Request, budget: int) -> int:
        return min(req.num_tokens_to_compute, budget, self.chunked_prefill_tokens)

    def _schedule_running(self, plan: list[tuple[Request, int]], budget: int) -> int:
        for req in list(self.running):
            if req not in self.running:  # preempted earlier in this loop
                continue
            n = self._chunk(req, budget)
            if n <= 0:
                continue
            while not self._grow(req, req.num_computed_tokens + n):
                if req.draft_token_ids:  # drafts never cost another request its place
                    req.clear_drafts()
                    n = self._chunk(req, budget)
                    continue
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
        return budget

    def _cache_limit(self, req: Request) -> int:
        """Most leading tokens of ``req`` the cache may serve (>= 1 is left to compute;
        a ``prompt_only`` request computes no row for its last token).
        """
        end = req.num_tokens - (2 if req.prompt_only else 1)
        if req.max_cached_prefix is not None:
            end = min(end, req.max_cached_prefix)
        return end

    def _match(self, req: Request) -> tuple[list[int], int, object]:
        """Longest cached prefix of the request's known tokens, keeping >= 1 to compute."""
        if self.cache is None or not req.uses_prefix_cache:
            return [], 0, None
        return self.cache.match_prefix(req.token_slice(0, self._cache_limit(req)))

    def _match_partial(self, req: Request) -> tuple[list[int], int, object, tuple | None]:
        """``_match`` plus the cached partial page continuing it (None: no such page)."""
        if not self.partial_pages or self.cache is None or not req.uses_prefix_cache:
            return (*self._match(req), None)
        return self.cache.match_prefix_partial(req.token_slice(0, self._cache_limit(req)))

    def _busy_pages(self) -> set[tuple[int, ...]]:
        """First uncached page of every running request still computing its prompt."""
        size = self.pool.page_size
        keys = set()
        for r in self.running:
            start = r.num_tree_pages * size
            if r.num_computed_tokens < len(r.prompt_token_ids) and start + size <= r.num_tokens:
                keys.add(tuple(r.token_slice(start, start + size)))
        return keys

    def _admit(self, plan: list[tuple[Request, int]], budget: int) -> None:
        order = list(self.waiting)
        matches = {id(r): self._match(r) for r in order} if self.cache is not None else {}
        if self.policy == "lpm" and self.cache is not None:
            order.sort(key=lambda r: -matches[id(r)][1])  # stable: FCFS among equals
        busy = self._busy_pages() if self.cache is not None else set()
        size = self.pool.page_size
        for req in order:
            if budget <= 0 or len(self.running) >= self.max_running_requests:
                break
            if self.prefix_source is not None and not req.was_admitted and req.uses_prefix_cache:
                self.prefix_source(req.token_slice(0, self._cache_limit(req)))
            # match again: pages matched for ordering may have been evicted since
            pages, length, node, tail = self._match_partial(req)
            key = tuple(req.token_slice(length, length + size)) if self.cache is not None else ()
            if len(key) == size and length + size <= self._cache_limit(req) and key in busy:
                continue  # another request computes this page right now: reuse it next step
            if self.on_admit is not None and not req.was_admitted:
                self.on_admit(req)
            if node is not None:
                self.cache.inc_ref(node)
                req.cache_node = node
            req.page_table = list(pages)
            req.num_tree_pages = len(pages)
            copied = 0
            if tail is not None:  # lock the tail page while pages are found and copied
                self.cache.inc_ref(tail[0])
                copied = tail[1]
            req.num_computed_tokens = length + copied
            n = self._chunk(req, budget)
            grown = self._grow(req, length + copied + n)
            if grown and copied:
                self.pool.copy_page_prefix(tail[0].pages[0], req.page_table[len(pages)], copied)
            if tail is not None:
                self.cache.dec_ref(tail[0])
            if not grown:
                self._drop_pages(req, cache_it=False)
                req.num_computed_tokens = 0
                break
            length += copied
            if not req.was_admitted:
                req.was_admitted = True
                req.num_cached_tokens = min(length, len(req.prompt_token_ids))
                self.num_prompt_tokens += len(req.prompt_token_ids)
                self.num_prefix_hit_tokens += req.num_cached_tokens
                self.num_partial_hit_tokens += min(copied, req.num_cached_tokens)
            self.waiting.remove(req)
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            plan.append((req, n))
            budget -= n
            if len(key) == size:
                busy.add(key)

    def schedule(self) -> SchedulerOutput:
        """Plan one step: ``(request, num_tokens)`` chunks, tokens counted from
        ``request.num_computed_tokens``. Pages for them are allocated here.

        Requests that cannot fit even alone are failed here (``finish_reason="error"``)
        and listed in ``SchedulerOutput.failed``.
        """
        plan: list[tuple[Request, int]] = []
        budget = self._schedule_running(plan, self.max_batch_tokens)
        if self.waiting and budget > 0 and len(self.running) < self.max_running_requests:
            self._admit(plan, budget)
        failed, self._failed = self._failed, []
        return SchedulerOutput(plan, failed)

    # ------------------------------------------------------------ after a forward
    def update_from_output(
        self,
        scheduler_output: SchedulerOutput,
        model_output: ModelOutput | None,
        sampled: list[SampledTokens],
        context: StepContext,
    ) -> StepUpdate:
        """Apply one step's results: the only writer of ``num_computed_tokens``, output
        tokens and page tables after a forward.

        Args:
            scheduler_output: what :meth:`schedule` planned for the step.
            model_output: the forward's output (``error`` set: every scheduled request
                fails); None when nothing was scheduled.
            sampled: the tokens each sampling request got (``step.sample_tokens``).
            context: the engine's step settings (for ``step.process_tokens``).

        Returns:
            The updated, finished (released) requests and discarded speculative tokens.

        Raises: never for a single request's trouble (it is failed alone).
        """
        update = StepUpdate(list(scheduler_output.failed), list(scheduler_output.failed))
        if model_output is not None and model_output.error is not None:
            for req, _ in scheduler_output:
                req.finish("error", model_output.error)
                self.release(req)
                update.updated.append(req)
                update.finished.append(req)
            return update
        for req, num in scheduler_output:
            # drafts count as computed only once verified (below)
            req.num_computed_tokens = min(req.num_computed_tokens + num, req.num_tokens)
            req.num_forward_passes += 1
            self._on_computed(req)
        for item in sampled:
            self._apply_sampled(item, context, update)
        for req, _ in scheduler_output:
            if req.prompt_only and req.num_tokens_to_compute == 0 and not req.status.is_finished:
                req.finish("length")  # its prompt's rows are computed: nothing is sampled
                self.release(req)
                update.updated.append(req)
                update.finished.append(req)
        return update

    def _apply_sampled(self, item: SampledTokens, context: StepContext, update: StepUpdate) -> None:
        req, tokens = item.request, item.token_ids
        if item.is_speculative:
            req.num_computed_tokens += len(tokens) - 1  # the accepted drafts' KV is valid
            verified = req.num_computed_tokens
            req.clear_drafts()
        result = process_tokens(context, req, tokens, item.logprobs)
        if result.rolled_back_to is not None:  # jump-forward replaced trailing tokens
            req.num_computed_tokens = min(req.num_computed_tokens, result.rolled_back_to)
        if item.is_speculative:
            dropped = len(tokens) - result.num_applied  # after a finish or a jump-forward point
            req.num_computed_tokens = min(
                req.num_computed_tokens, req.num_tokens, verified - dropped
            )
            update.discarded.append((req, dropped))
        update.updated.append(req)
        if req.status.is_finished:
            self.release(req)
            update.finished.append(req)
        elif item.is_speculative:  # rejected drafts' pages go back to the pool
            self.trim_pages(req)
