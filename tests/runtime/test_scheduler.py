"""Scheduler on a 1-head KV pool with exact page accounting (no model)."""

from __future__ import annotations

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
