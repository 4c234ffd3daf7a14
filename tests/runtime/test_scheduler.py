"""Scheduler on a 1-head KV pool with exact page accounting (no model)."""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.detokenizer import IncrementalDetokenizer
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.request import Request, RequestStatus
from structgen.runtime.sampling_params import SamplingParams
from structgen.runtime.scheduler import Scheduler


def _pool(num_pages: int, page_size: int = 4) -> KVPool:
    return KVPool(1, num_pages, page_size, 1, 2)


def _req(rid: str, n_prompt: int) -> Request:
    return Request(
        request_id=rid,
        prompt_token_ids=list(range(1, n_prompt + 1)),
        params=SamplingParams(max_tokens=8),
        detokenizer=IncrementalDetokenizer([b""] * 16, None),
    )


def _pages_accounted(pool: KVPool, reqs: list[Request]) -> None:
    owned = [p for r in reqs for p in r.page_table]
    assert len(owned) == len(set(owned)), "a page is owned twice"
    assert 0 not in owned, "scratch page handed out"
    assert len(owned) + pool.num_free_pages == pool.num_usable_pages, "page leak"


def _apply(plan):
    for req, n in plan:
        req.num_computed_tokens += n


def test_chunked_prefill_under_token_budget():
    pool = _pool(20)
    s = Scheduler(pool, None, 6, 64, 8, 64)
    a, b = _req("a", 10), _req("b", 3)
    s.add(a)
    s.add(b)
    plan = s.schedule()
    assert [(r.request_id, n) for r, n in plan] == [("a", 6)]
    assert len(a.page_table) == 2  # 6 tokens, page size 4
    _apply(plan)
    plan = s.schedule()
    assert [(r.request_id, n) for r, n in plan] == [("a", 4), ("b", 2)]
    _apply(plan)
    _pages_accounted(pool, [a, b])
    plan = s.schedule()
    assert [(r.request_id, n) for r, n in plan] == [("b", 1)]


def test_decode_and_prefill_share_a_step():
    pool = _pool(20)
    s = Scheduler(pool, None, 16, 64, 8, 64)
    a = _req("a", 5)
    s.add(a)
    _apply(s.schedule())
    a.output_token_ids.append(7)  # a sampled a token: one to compute
    b = _req("b", 8)
    s.add(b)
    plan = s.schedule()
    assert [(r.request_id, n) for r, n in plan] == [("a", 1), ("b", 8)]


def test_preemption_frees_pages_and_requeues_first():
    pool = _pool(5)  # 4 usable pages = 16 tokens
    s = Scheduler(pool, None, 64, 64, 8, 64)
    a, b = _req("a", 8), _req("b", 8)
    s.add(a)
    s.add(b)
    _apply(s.schedule())
    assert pool.num_free_pages == 0
    a.output_token_ids.append(3)  # a needs a 3rd page: b (most recent) is preempted
    plan = s.schedule()
    assert [(r.request_id, n) for r, n in plan] == [("a", 1)]
    assert b.status == RequestStatus.WAITING and b.num_computed_tokens == 0
    assert s.waiting[0] is b
    _pages_accounted(pool, [a, b])


def test_prompt_too_long_fails_alone():
    pool = _pool(5)
    s = Scheduler(pool, None, 64, 64, 8, 64)
    big, ok = _req("big", 40), _req("ok", 4)
    s.add(big)
    s.add(ok)
    assert big.status == RequestStatus.FAILED and "prompt has 40 tokens" in big.error
    assert [(r.request_id, n) for r, n in s.schedule()] == [("ok", 4)]


def test_release_returns_every_page():
    pool = _pool(9)
    s = Scheduler(pool, None, 64, 64, 8, 64)
    reqs = [_req(str(i), 5) for i in range(3)]
    for r in reqs:
        s.add(r)
    _apply(s.schedule())
    for r in reqs:
        s.release(r)
    assert pool.num_free_pages == pool.num_usable_pages and not s.has_unfinished


def _cached_scheduler(page_size: int = 4, partial_pages: bool = True):
    from structgen.runtime.radix_cache import RadixCache

    pool = KVPool(1, 20, page_size, 1, 2)
    cache = RadixCache(pool)
    return pool, cache, Scheduler(pool, cache, 64, 64, 8, 64, partial_pages=partial_pages)


def _finish(s: Scheduler, req: Request) -> None:
    req.status = RequestStatus.FINISHED
    s.release(req)


def test_partial_page_copy_starts_a_request_inside_a_cached_page():
    pool, cache, s = _cached_scheduler()
    a = _req("a", 10)  # tokens 1..10: pages [1..4], [5..8] cached at finish
    s.add(a)
    _apply(s.schedule())
    for t in pool.k + pool.v:  # stand-in KV: slot value = its page * 100 + offset
        t.copy_(torch.arange(t.shape[0] * 4).view(-1, 4, 1, 1).expand_as(t).float())
    cache_pages = list(a.page_table[:2])
    _finish(s, a)
    b = _req("b", 9)
    b.prompt_token_ids = [1, 2, 3, 4, 5, 6, 7, 99, 98]  # parts from a's at token 8
    s.add(b)
    plan = s.schedule()
    # pages [1..4] shared; 5, 6, 7 copied from a's second page into b's own; 2 computed
    assert [(r.request_id, n) for r, n in plan] == [("b", 2)]
    assert b.num_computed_tokens == 7 and b.num_tree_pages == 1
    assert b.page_table[0] == cache_pages[0] and b.page_table[1] not in cache_pages
    own = b.page_table[1]
    for t in pool.k + pool.v:
        assert t[own, :3, 0, 0].tolist() == [cache_pages[1] * 4 + i for i in range(3)]
    assert s.num_prefix_hit_tokens == 7 and s.num_partial_hit_tokens == 3
    _pages_accounted(pool, [_Held(cache), _Held(None, b.page_table[b.num_tree_pages :])])
    _apply(plan)
    _finish(s, b)
    assert cache.num_evictable_pages == cache.num_cached_pages  # no lock left behind
    _pages_accounted(pool, [_Held(cache)])


class _Held:
    """The tree's pages (or a request's own pages), as an owner for ``_pages_accounted``."""

    def __init__(self, cache, pages: list[int] | None = None) -> None:
        from tests.runtime.test_radix_cache import _tree_pages

        self.page_table = _tree_pages(cache) if cache is not None else pages


def test_without_partial_pages_a_request_starts_at_the_page_boundary():
    pool, cache, s = _cached_scheduler(partial_pages=False)
    a = _req("a", 10)
    s.add(a)
    _apply(s.schedule())
    _finish(s, a)
    b = _req("b", 9)
    b.prompt_token_ids = [1, 2, 3, 4, 5, 6, 7, 99, 98]
    s.add(b)
    assert [(r.request_id, n) for r, n in s.schedule()] == [("b", 5)]
    assert s.num_partial_hit_tokens == 0


@pytest.mark.parametrize("partial_pages", [True, False])
def test_released_requests_partial_last_page_serves_its_continuation(partial_pages):
    """A finished request's partial last page goes into the tree (partial_pages): a request
    continuing its tokens copies those slots and computes only its own token; without
    partial_pages the page is freed and the continuation recomputes it."""
    pool, cache, s = _cached_scheduler(partial_pages=partial_pages)
    a = _req("a", 10)  # tokens 1..10: pages [1..4], [5..8] whole, [9, 10] partial
    s.add(a)
    _apply(s.schedule())
    for t in pool.k + pool.v:  # stand-in KV: slot value = its page * 4 + offset
        t.copy_(torch.arange(t.shape[0] * 4).view(-1, 4, 1, 1).expand_as(t).float())
    last = a.page_table[2]
    _finish(s, a)
    assert cache.num_cached_pages == (3 if partial_pages else 2)
    _pages_accounted(pool, [_Held(cache)])
    b = _req("b", 11)  # a's tokens and one more
    s.add(b)
    plan = s.schedule()
    assert [(r.request_id, n) for r, n in plan] == [("b", 1 if partial_pages else 3)]
    assert s.num_partial_hit_tokens == (2 if partial_pages else 0)
    if partial_pages:
        own = b.page_table[2]
        assert own != last  # a copy: the tree's page is only read
        for t in pool.k + pool.v:
            assert t[own, :2, 0, 0].tolist() == [last * 4, last * 4 + 1]
    _apply(plan)
    _finish(s, b)
    assert cache.num_evictable_pages == cache.num_cached_pages  # no lock left behind
    _pages_accounted(pool, [_Held(cache)])


def test_request_does_not_wait_for_a_busy_page_it_may_not_reuse():
    """Prompt log-probs wanted inside the page another request is computing: the cache
    could never serve that page to it, so it runs in the same step (it used to wait one
    step per such request: a batch of scoring requests ran one per step)."""
    pool, cache, s = _cached_scheduler(partial_pages=False)
    a, b, c = _req("a", 9), _req("b", 9), _req("c", 9)
    c.max_cached_prefix = 3  # log-probs from position 4 on: no page of it is ever served
    for r in (a, b, c):
        s.add(r)
    plan = s.schedule()
    # b waits for a's pages (it may reuse them); c does not
    assert [(r.request_id, n) for r, n in plan] == [("a", 9), ("c", 9)]
    _apply(plan)
    for r, _ in plan:
        s._on_computed(r)  # finished prefill pages go into the tree
    plan = s.schedule()
    assert [(r.request_id, n) for r, n in plan] == [("b", 1)]  # 8 tokens served from a's


def test_requests_compare_by_identity():
    a, twin = _req("a", 5), _req("a", 5)
    twin.arrival_time = a.arrival_time  # every field equal
    assert a != twin and a == a and len({a, twin}) == 2
    pool = _pool(20)
    s = Scheduler(pool, None, 64, 64, 8, 64)
    s.add(a)
    s.add(twin)
    s.release(twin)  # the queued object itself leaves, not the first equal one
    assert list(s.waiting) == [a] and s.waiting[0] is a


def test_full_running_set_skips_admission_work(monkeypatch):
    pool, cache, _ = _cached_scheduler()
    s = Scheduler(pool, cache, 64, 64, 2, 64, partial_pages=True)
    reqs = [_req(str(i), 6) for i in range(4)]
    for i, r in enumerate(reqs):  # no shared pages: nobody waits for another's page
        r.prompt_token_ids = [10 * (i + 1) + t for t in range(6)]
        s.add(r)
    first = s.schedule()
    assert [r.request_id for r, _ in first] == ["0", "1"]  # max_running_requests = 2
    _apply(first)
    matched = []
    for name in ("match_prefix", "match_prefix_partial"):
        fn = getattr(cache, name)
        monkeypatch.setattr(cache, name, lambda t, fn=fn: matched.append(t) or fn(t))
    for r, _ in first:
        r.output_token_ids.append(7)
    plan = s.schedule()  # running is full: the waiting requests are not even matched
    assert [(r.request_id, n) for r, n in plan] == [("0", 1), ("1", 1)]
    assert matched == [] and [r.request_id for r in s.waiting] == ["2", "3"]
    _apply(plan)
    _finish(s, reqs[0])
    plan = s.schedule()  # a place is free: "2" is matched and admitted
    assert [r.request_id for r, _ in plan] == ["2"] and matched
