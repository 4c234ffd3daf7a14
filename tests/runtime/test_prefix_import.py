"""A prefix cached by another engine over the same model, imported instead of computed
(``RadixCache.import_prefix``, ``KVPool.copy_pages_from``; host pipelines import their
engine's cached prefixes): exact pages on hand-made pools, then the same KV and outputs as
computing it on two pipelines over a tiny engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from structgen import Engine, SamplingParams
from structgen.runtime.host_pipelines import HostPipelines
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.radix_cache import RadixCache

PS = 4


def _pool(num_pages: int = 16) -> tuple[KVPool, RadixCache]:
    pool = KVPool(2, num_pages, PS, 1, 2)
    return pool, RadixCache(pool)


def _fill(pool: KVPool, pages: list[int], seed: int) -> None:
    """Distinct values in every slot of ``pages`` (K and V of every layer)."""
    rng = np.random.default_rng(seed)
    for a in pool.k_arrays + pool.v_arrays:
        a[pages] = rng.standard_normal(a[pages].shape).astype(a.dtype)


def _same_kv(dst: KVPool, dst_pages: list[int], src: KVPool, src_pages: list[int]) -> bool:
    return all(
        np.array_equal(d[dst_pages], s[src_pages])
        for d, s in zip(dst.k_arrays + dst.v_arrays, src.k_arrays + src.v_arrays)
    )


def _no_leak(pool: KVPool, cache: RadixCache) -> None:
    owned, stack = list(pool._free), list(cache.root.children.values())
    while stack:
        node = stack.pop()
        owned += node.pages
        stack.extend(node.children.values())
    assert sorted(owned) == list(range(1, pool.num_pages)), "a page leaked or is owned twice"


def _cached(pool: KVPool, cache: RadixCache, tokens: list[int], seed: int) -> list[int]:
    pages = pool.alloc(len(tokens) // PS)
    _fill(pool, pages, seed)
    assert cache.insert(tokens, pages) == []
    return pages


def test_import_copies_the_whole_pages_and_the_continuing_page():
    src_pool, src = _pool()
    src_pages = _cached(src_pool, src, list(range(1, 13)), seed=1)  # 3 whole pages
    dst_pool, dst = _pool()
    request = [*range(1, 11), 99, 98]  # 2 whole pages, then 2 tokens of the third page
    assert dst.import_prefix(src, request) == 10
    pages, length, _, tail = dst.match_prefix_partial(request)
    assert length == 8 and tail is not None and tail[1] == 2
    assert _same_kv(dst_pool, [*pages, tail[0].pages[0]], src_pool, src_pages)
    assert dst.import_prefix(src, request) == 0  # already here: nothing copied again
    _no_leak(dst_pool, dst)
    _no_leak(src_pool, src)


def test_import_continues_the_own_match_and_takes_a_partial_leaf():
    src_pool, src = _pool()
    src_pages = _cached(src_pool, src, list(range(1, 9)), seed=2)
    leaf = src_pool.alloc(1)
    _fill(src_pool, leaf, seed=3)
    assert src.insert_partial([*range(1, 9), 9, 10, 11], leaf[0])
    dst_pool, dst = _pool()
    own = _cached(dst_pool, dst, list(range(1, 5)), seed=4)  # the first page is its own
    request = [*range(1, 11), 50]
    assert dst.import_prefix(src, request) == 4 + 2
    pages, length, _, tail = dst.match_prefix_partial(request)
    assert length == 8 and pages[0] == own[0] and tail[1] == 2
    assert not tail[0].children and len(tail[0].key) == 3  # a partial leaf, as in src
    assert _same_kv(dst_pool, [pages[1], tail[0].pages[0]], src_pool, [src_pages[1], leaf[0]])
    assert _same_kv(dst_pool, own, dst_pool, own)
    _no_leak(dst_pool, dst)


def test_import_evicts_other_pages_keeps_its_own_match_or_imports_nothing():
    src_pool, src = _pool()
    _cached(src_pool, src, list(range(1, 17)), seed=5)  # 4 whole pages
    dst_pool, dst = _pool(num_pages=5)  # 4 usable pages
    own = _cached(dst_pool, dst, list(range(1, 5)), seed=6)
    _cached(dst_pool, dst, list(range(70, 78)), seed=7)
    dst.match_prefix(list(range(1, 5)))  # own is the most recent: the other goes first
    assert dst_pool.num_free_pages == 1
    assert dst.import_prefix(src, list(range(1, 13))) == 8  # needs 2 pages: 1 evicted
    pages, length, _ = dst.match_prefix(list(range(1, 13)))
    assert length == 12 and pages[0] == own[0]
    assert dst.match_prefix(list(range(70, 78)))[1] == 4  # the other's first page stayed
    _no_leak(dst_pool, dst)
    dst.inc_ref(dst.match_prefix(list(range(1, 13)))[2])
    dst.inc_ref(dst.match_prefix(list(range(70, 74)))[2])
    assert dst_pool.num_free_pages == 0 and dst.num_evictable_pages == 0
    assert dst.import_prefix(src, list(range(1, 18))) == 0  # no page to be had: nothing
    assert dst.match_prefix(list(range(1, 18)))[1] == 12
    _no_leak(dst_pool, dst)


def test_copy_pages_from_refuses_another_layout():
    a, b = KVPool(2, 8, PS, 1, 2), KVPool(2, 8, PS, 2, 2)
    assert not a.same_layout(b) and a.same_layout(KVPool(2, 8, PS, 1, 2))
    with pytest.raises(AssertionError):
        a.copy_pages_from(b, [1], [1])


@pytest.fixture(scope="module")
def engine(tiny_llama_dir):
    return Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=PS)


HEAD = "a long shared instruction that every prompt of this test starts with, then: "


def _run(pipes: HostPipelines, prompts: list[str], params: SamplingParams) -> list:
    def job(k):
        return lambda e, post: [o.token_ids for o in e.generate(prompts[k::2], params)]

    outcomes = pipes.try_run([job(0), job(1)])
    assert [exc for _, exc in outcomes] == [None, None]
    out: list = [None] * len(prompts)
    out[0::2], out[1::2] = outcomes[0][0], outcomes[1][0]
    return out


def test_pipelines_import_the_engines_prefix_with_the_same_kv_and_outputs(engine):
    params = SamplingParams(max_tokens=5, temperature=0.0)
    prompts = [f"{HEAD}item {i} is" for i in range(6)]
    engine.flush_cache()
    ref = [o.token_ids for o in engine.generate(prompts[:1], params)]  # caches the head
    ref += [o.token_ids for o in engine.generate(prompts[1:], params)]
    computing = HostPipelines(engine, 2)
    for e in computing.engines:
        e.scheduler.prefix_source = None  # as before: each pipeline computes the head
    importing = HostPipelines(engine, 2)
    assert _run(computing, prompts, params) == ref
    assert _run(importing, prompts, params) == ref
    for c, i in zip(computing.engines, importing.engines):
        assert i.scheduler.num_prefix_hit_tokens > c.scheduler.num_prefix_hit_tokens
        # the imported pages hold the KV the other pipeline computed, bit for bit
        tokens = engine.make_request(prompts[0], params).prompt_token_ids
        cp, clen, _ = c.cache.match_prefix(tokens)
        ip, ilen, _ = i.cache.match_prefix(tokens)
        assert clen == ilen >= 4 * PS
        assert all(
            np.array_equal(a[cp], b[ip])
            for a, b in zip(c.pool.k_arrays + c.pool.v_arrays, i.pool.k_arrays + i.pool.v_arrays)
        )
    computing.close()
    importing.close()


def test_nothing_is_imported_while_the_engines_loop_is_held(engine):
    params = SamplingParams(max_tokens=3, temperature=0.0)
    prompts = [f"{HEAD}thing {i} is" for i in range(2)]
    engine.generate(prompts[:1], params)
    pipes = HostPipelines(engine, 2)
    with engine.loop.lock:  # another caller steps the engine: the pipelines compute
        assert _run(pipes, prompts, params) == [
            o.token_ids for o in engine.generate(prompts, params)
        ]
    assert all(e.scheduler.num_prefix_hit_tokens == 0 for e in pipes.engines)
    pipes.close()
