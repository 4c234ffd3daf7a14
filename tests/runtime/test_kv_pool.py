"""KVPool sized to the job: a growable (CPU) pool hands out the same page ids as a
preallocated one, keeps every page's contents and id when it grows, and the engine on it
generates exactly what the preallocated engine does (the reference)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from structgen import Engine, SamplingParams
from structgen.runtime import engine as engine_module
from structgen.runtime.kv_pool import KVPool, available_host_memory, default_kv_tokens
from structgen.runtime.models.mla import LatentKVPool

GREEDY = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)


def _fill(pool: KVPool, page: int, value: float) -> None:
    for t in pool.k + pool.v:
        t[page] = value


class _NoWholePool(KVPool):
    """A pool whose storage for all pages cannot be allocated (no address space)."""

    def _storage(self, num_pages):
        if not hasattr(self, "_refused"):  # the first: all pages at start
            self._refused = num_pages
            raise RuntimeError("not enough memory")
        return super()._storage(num_pages)


@pytest.mark.parametrize("kind", [KVPool, _NoWholePool])
def test_growable_pool_hands_out_the_same_ids_and_keeps_pages(kind):
    """A random alloc/free sequence: same ids as the preallocated pool, every held page keeps
    the value written into it across growths, storage never past num_pages; growing takes
    longer views of one storage (no address changes), or, where that storage could not be
    allocated, copies into larger tensors.
    """
    rng = random.Random(0)
    fixed = KVPool(2, 64, 4, 2, 8)
    grow = kind(2, 64, 4, 2, 8, growth_pages=3)
    ptrs = [t.data_ptr() for t in grow.k + grow.v]
    assert grow.num_reserved_pages == 3 and fixed.num_reserved_pages == 64
    assert grow.num_free_pages == fixed.num_free_pages == 63
    held: dict[int, float] = {}
    for step in range(400):
        if held and (rng.random() < 0.45 or len(held) > 55):
            pages = rng.sample(sorted(held), rng.randint(1, min(4, len(held))))
            fixed.free(pages)
            grow.free(pages)
            for p in pages:
                del held[p]
        else:
            n = rng.randint(0, 6)
            a, b = fixed.alloc(n), grow.alloc(n)
            assert a == b, f"step {step}: ids differ"
            for p in a or []:
                assert p not in held and 1 <= p < grow.num_reserved_pages
                held[p] = float(step + 1)
                _fill(grow, p, held[p])
        assert grow.num_free_pages == fixed.num_free_pages
        assert grow.num_used_pages == len(held)
        assert grow.num_reserved_pages <= grow.num_pages
        for p, value in held.items():
            assert all(bool((t[p] == value).all()) for t in grow.k + grow.v)
    assert grow.num_grows > 1
    assert grow.nbytes() == grow.num_reserved_pages * grow.page_nbytes
    assert grow.max_nbytes() == fixed.nbytes()
    moved = [t.data_ptr() for t in grow.k + grow.v] != ptrs
    assert moved == (kind is _NoWholePool)


def test_growth_is_in_chunks_zeroes_handed_out_pages_and_refreshes_slot_views():
    pool = KVPool(1, 100, 2, 1, 4, growth_pages=10)
    first = pool.alloc(9)
    assert first == list(range(1, 10)) and pool.num_reserved_pages == 10
    _fill(pool, 5, 7.0)
    old_slots = pool.k_slots(0)
    assert pool.alloc(1) == [10]
    assert pool.num_reserved_pages == 20  # one chunk (growth_pages), not one page
    assert pool.k_slots(0).shape[0] == 20 * 2 and pool.k_slots(0) is not old_slots
    assert bool((pool.k_slots(0)[10:12] == 7.0).all())  # page 5's slots, same rows
    assert bool((pool.k[0][10] == 0).all()) and bool((pool.v[0][10] == 0).all())  # handed out
    assert pool.alloc(80) is not None and pool.num_reserved_pages == 91
    assert pool.alloc(10) is None and pool.num_reserved_pages == 91  # nothing taken
    assert pool.alloc(9) is not None and pool.num_reserved_pages == 100
    assert pool.num_free_pages == 0 and pool.alloc(1) is None
    pool.reserve(100)  # already there: no effect
    assert pool.num_grows == 3


class _NaNStorage:
    """A pool whose fresh storage is all NaN (what uninitialised memory may hold)."""

    def _storage(self, num_pages):
        k, v = super()._storage(num_pages)
        for t in k + ([] if self.v_views_k else v):
            t[...] = float("nan")  # numpy arrays on the host, tensors on a device
        return k, v


class _NaNPool(_NaNStorage, KVPool):
    pass


class _NaNLatentPool(_NaNStorage, LatentKVPool):
    pass


@pytest.mark.parametrize("growth_pages", [None, 1, 3])
def test_every_page_is_zero_when_first_handed_out_over_nan_storage(growth_pages):
    """Storage is uninitialised (here: NaN): the scratch page and every page the first time
    alloc hands it out are zero in K and V, across growths; a freed page handed out again
    keeps its last contents; pages never handed out are not touched.
    """
    rng = random.Random(1)
    pools = [
        _NaNPool(2, 40, 4, 2, 8, growth_pages=growth_pages),
        _NaNLatentPool(2, 40, 4, latent_dim=6, rope_dim=2, growth_pages=growth_pages),
    ]
    for pool in pools:
        assert all(bool((t[0] == 0).all()) for t in pool.k + pool.v)  # scratch page
        seen: set[int] = set()
        held: list[int] = []
        for step in range(120):
            if held and rng.random() < 0.4:
                pool.free([held.pop(rng.randrange(len(held)))])
                continue
            for p in pool.alloc(rng.randint(1, 3)) or []:
                want = 0.0 if p not in seen else float(p)
                for t in pool.k + pool.v:
                    assert bool((t[p] == want).all()), (type(pool).__name__, step, p)
                for t in pool.k + pool.v:
                    t[p] = float(p)
                seen.add(p)
                held.append(p)
        assert pool.num_grows >= (0 if growth_pages is None else 2)
        untouched = [p for p in range(1, pool.num_reserved_pages) if p not in seen]
        if growth_pages is not None and untouched:
            assert bool(pool.k[0][untouched[-1]].isnan().all())  # no zeroing ahead of use


def test_reserve_zeroes_the_pages_a_mirror_pool_is_given():
    pool = _NaNPool(1, 50, 4, 1, 2, growth_pages=4)
    pool.reserve(30)
    assert bool((pool.k[0][:30] == 0).all()) and bool((pool.v[0][:30] == 0).all())
    assert pool.num_reserved_pages == 30


def test_reserve_grows_a_mirror_pool_to_the_ids_it_is_given():
    pool = KVPool(1, 100, 4, 1, 2, growth_pages=4)
    pool.reserve(30)
    assert pool.num_reserved_pages == 30 and pool.num_free_pages == 99
    pool.reserve(31)
    assert pool.num_reserved_pages == 60  # doubled
    pool.reserve(1000)
    assert pool.num_reserved_pages == 100


def test_latent_pool_grows_with_values_as_views():
    pool = LatentKVPool(2, 40, 4, latent_dim=6, rope_dim=2, growth_pages=2)
    (page,) = pool.alloc(1)
    pool.k[1][page] = 3.0
    pool.alloc(20)
    assert pool.num_reserved_pages > 2
    assert bool((pool.k[1][page] == 3.0).all())
    assert pool.v[1].data_ptr() == pool.k[1].data_ptr()  # still a view of the latent rows
    assert pool.v_slots(1).shape == (pool.num_reserved_pages * 4, 1, 6)
    assert pool.nbytes() == pool.num_reserved_pages * 4 * 8 * 2 * 4


def _engine(path, monkeypatch, growable: bool, **kwargs) -> Engine:
    if growable:
        monkeypatch.setattr(engine_module, "KV_GROWTH_TOKENS", 4)  # one page: grow often
    else:
        monkeypatch.setattr(Engine, "_kv_growth_pages", lambda self: None)
    eng = Engine(str(path), dtype="float32", page_size=4, **kwargs)
    monkeypatch.undo()
    return eng


def test_greedy_output_identical_with_growable_and_preallocated_pool(tiny_llama_dir, monkeypatch):
    prompts = [
        "Maria Lopez, 34, works",
        "The quick brown fox jumps over the lazy dog. 0123",
        "Maria Lopez, 34, works at",
        [5, 6, 7],
    ]
    kwargs = {"max_kv_tokens": 512, "chunked_prefill_tokens": 8}
    ref = _engine(tiny_llama_dir, monkeypatch, growable=False, **kwargs)
    eng = _engine(tiny_llama_dir, monkeypatch, growable=True, **kwargs)
    assert not ref.pool.is_growable and ref.pool.num_reserved_pages == ref.pool.num_pages
    assert eng.pool.is_growable and eng.pool.num_reserved_pages == 2
    want = [o.token_ids for o in ref.generate(prompts, GREEDY)]
    grown_in_decode = []  # steps that grew the pool while giving a decode chunk pages
    schedule = eng.scheduler.schedule

    def logged():
        before = eng.pool.num_grows
        out = schedule()
        decode = any(r.num_computed_tokens >= len(r.prompt_token_ids) for r, _ in out.scheduled)
        grown_in_decode.append(eng.pool.num_grows > before and decode)
        return out

    eng.scheduler.schedule = logged
    got = [o.token_ids for o in eng.generate(prompts, GREEDY)]
    del eng.scheduler.schedule
    assert got == want
    assert eng.pool.num_grows >= 3  # grew while requests ran
    assert any(grown_in_decode)  # decode steps included
    assert eng.pool.num_reserved_pages < eng.pool.num_pages
    again = [o.token_ids for o in eng.generate(prompts, GREEDY)]  # cached prefixes reused
    assert again == want


def test_request_that_fits_max_kv_tokens_is_admitted_and_pool_grows_to_it(
    tiny_llama_dir, monkeypatch
):
    eng = _engine(tiny_llama_dir, monkeypatch, growable=True, max_kv_tokens=128)
    assert eng.max_request_tokens() == 128  # the capacity, not the storage reserved now
    prompt = [(i * 7) % 300 + 3 for i in range(100)]
    (out,) = eng.generate([prompt], SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True))
    assert out.finish_reason == "length" and len(prompt) + len(out.token_ids) == 128
    assert eng.pool.num_reserved_pages == eng.pool.num_pages


def test_memory_report_and_stats_show_reserved_vs_used(tiny_llama_dir, monkeypatch):
    eng = _engine(tiny_llama_dir, monkeypatch, growable=True, max_kv_tokens=1024)
    pool = eng.pool
    before = eng.memory_report()
    assert before["kv_bytes"] == pool.nbytes() == 2 * pool.page_nbytes
    assert before["kv_used_bytes"] == 0
    assert before["kv_max_bytes"] == (1024 // 4 + 1) * pool.page_nbytes
    eng.generate(["The quick brown fox jumps over the lazy dog. 0123"], GREEDY)
    report, stats = eng.memory_report(), eng.stats()
    assert report["weight_bytes"] > 0
    assert stats["pages_used"] == stats["pages_cached"] > 0  # the finished request's prefix
    assert report["kv_used_bytes"] == stats["pages_used"] * pool.page_nbytes
    assert report["kv_used_bytes"] <= report["kv_bytes"] < report["kv_max_bytes"]
    assert stats["pages_reserved"] == pool.num_reserved_pages - 1 < stats["pages_total"]
    assert stats["pages_free"] + stats["pages_used"] == stats["pages_total"]


def test_default_kv_tokens_formula():
    assert default_kv_tokens(2048, 8, 1000, 0.5, 10**12, 16) == 2048 * 8  # the job's bound
    assert default_kv_tokens(2048, 8, 1000, 0.5, 4_000_000, 16) == 2000  # memory's bound
    assert default_kv_tokens(2048, 8, 1000, 0.5, 1000, 16) == 16  # at least one page
    assert default_kv_tokens(2048, 8, 1000, 0.5, None, 16) == 2048 * 8
    available = available_host_memory()
    assert available is None or available > 0


@pytest.mark.parametrize("available", [10**12, 300_000])  # the job, the memory
def test_engine_default_capacity_follows_the_formula(tiny_llama_dir, monkeypatch, available):
    monkeypatch.setattr(engine_module, "available_host_memory", lambda: available)
    eng = Engine(str(tiny_llama_dir), dtype="float32", page_size=4, max_running_requests=3)
    monkeypatch.undo()
    cfg = eng.loaded.config
    per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * 16 * 4  # fp32 K and V
    assert eng.pool.page_nbytes == 4 * per_token
    want = min(512 * 3, int(available * 0.85) // per_token)  # max_position_embeddings 512
    assert want == (1536 if available > 10**6 else 498)
    assert eng.pool.num_usable_pages == -(-want // 4)
    assert eng.pool.is_growable and eng.pool.num_reserved_pages <= eng.pool.num_pages
    assert torch.equal(eng.pool.k[0][0], torch.zeros_like(eng.pool.k[0][0]))  # scratch page


@pytest.mark.parametrize("latent", [False, True])
def test_copy_page_prefix_copies_only_the_leading_slots_of_every_layer(latent):
    gen = torch.Generator().manual_seed(0)
    pool = LatentKVPool(3, 8, 4, 6, 2) if latent else KVPool(3, 8, 4, 2, 5)
    src, dst = pool.alloc(2)
    for t in pool.k + ([] if pool.v_views_k else pool.v):
        t.copy_(torch.randn(t.shape, generator=gen))
    before = [t.clone() for t in pool.k + pool.v]
    pool.copy_page_prefix(src, dst, 3)
    for old, new in zip(before, pool.k + pool.v):
        ref = old.clone()
        ref[dst, :3] = old[src, :3]  # the reference: those slots, nothing else
        assert torch.equal(new, ref)
    with pytest.raises(AssertionError):
        pool.copy_page_prefix(src, src, 1)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_host_storage_is_numpy_and_the_tensors_share_it(dtype):
    """On the host the storage is numpy (bfloat16 as its uint16 bits) and ``k`` / ``v`` /
    ``k_slots`` are torch views of the same memory: a write through either reads back through
    the other, with the same addresses (``data_ptrs``, what the fused decode step reads)."""
    want = getattr(torch, dtype)
    pool = KVPool(2, 16, 4, 2, 8, dtype=torch.float16 if dtype == "float16" else dtype)
    assert pool.dtype == want and pool.dtype_name == dtype and pool.on_host
    (page,) = pool.alloc(1)
    for layer in range(2):
        k_arr, k_t = pool.k_arrays[layer], pool.k[layer]
        assert isinstance(k_arr, np.ndarray) and k_t.dtype == want
        assert k_arr.dtype == (np.uint16 if dtype == "bfloat16" else np.dtype(dtype))
        assert k_t.data_ptr() == k_arr.ctypes.data == pool.data_ptrs()[layer]
        assert pool.v[layer].data_ptr() == pool.data_ptrs()[2 + layer]
        values = torch.arange(4 * 2 * 8, dtype=torch.float32).view(4, 2, 8).to(want)
        pool.k_slots(layer)[page * 4 : page * 4 + 4] = values  # torch writes, numpy reads
        got = torch.from_numpy(k_arr[page].copy())
        assert torch.equal(got.view(want) if dtype == "bfloat16" else got, values)
        pool.v_arrays[layer][page] = k_arr[page]  # numpy writes, torch reads
        assert torch.equal(pool.v[layer][page], values)


def test_host_pool_in_a_dtype_numpy_cannot_hold_is_refused():
    from structgen.errors import ConfigError

    with pytest.raises(ConfigError, match="float8_e4m3fn"):
        KVPool(1, 4, 4, 1, 8, dtype=torch.float8_e4m3fn)
