"""``structgen.lru.LRUCache`` against a reference: a plain list of (key, value) pairs in use
order, evicted from the front by brute force; bounds by entries and bytes, second chances,
and concurrent use from several threads.
"""

from __future__ import annotations

import random
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from structgen.errors import ConfigError
from structgen.lru import LRUCache


class _Reference:
    """The slow obvious LRU: a list in use order (least recent first)."""

    def __init__(self, max_entries, max_bytes, sizeof):
        self.items: list[tuple] = []
        self.max_entries, self.max_bytes, self.sizeof = max_entries, max_bytes, sizeof

    def get(self, key):
        for i, (k, v) in enumerate(self.items):
            if k == key:
                self.items.append(self.items.pop(i))
                return v
        return None

    def put(self, key, value):
        self.items = [(k, v) for k, v in self.items if k != key] + [(key, value)]
        while len(self.items) > 1 and self._over():
            self.items.pop(0)
        if self._over():  # the entry just stored, alone past the bound
            self.items.pop(0)

    def _over(self):
        n = len(self.items)
        size = sum(self.sizeof(v) for _, v in self.items)
        return (self.max_entries is not None and n > self.max_entries) or (
            self.max_bytes is not None and size > self.max_bytes
        )


@pytest.mark.parametrize(
    "max_entries, max_bytes", [(8, None), (None, 40), (5, 25), (0, None), (None, 0), (1, 3)]
)
@pytest.mark.parametrize("lock", [True, False])
def test_matches_the_reference(max_entries, max_bytes, lock) -> None:
    rng = random.Random(1000 * (max_entries or 0) + (max_bytes or 0))
    sizeof = len
    cache = LRUCache(max_entries, max_bytes=max_bytes, sizeof=sizeof, lock=lock)
    ref = _Reference(max_entries, max_bytes, sizeof)
    for _ in range(3000):
        key = rng.randrange(20)
        if rng.random() < 0.5:
            assert cache.get(key) == ref.get(key)
        else:
            value = "x" * rng.randrange(1, 12)
            cache.put(key, value)
            ref.put(key, value)
        assert list(cache) == [k for k, _ in ref.items]
        assert len(cache) == len(ref.items)
        if max_bytes is not None:
            assert cache.num_bytes == sum(len(v) for _, v in ref.items)


def test_default_sizeof_is_nbytes_and_bounds_can_change() -> None:
    evicted = []
    cache = LRUCache(max_bytes=3 * 80, on_evict=lambda k, v: evicted.append(k))
    for k in range(5):
        cache.put(k, np.zeros(10, np.int64))  # 80 bytes each
    assert list(cache) == [2, 3, 4] and cache.num_bytes == 240 and evicted == [0, 1]
    assert cache.get(2) is not None  # 2 is now the most recent
    cache.max_bytes = 160
    assert list(cache) == [4, 2] and evicted == [0, 1, 3]
    cache.max_entries = 1
    assert list(cache) == [2] and cache.num_bytes == 80
    assert cache.pop(2).nbytes == 80 and cache.num_bytes == 0 and not cache
    assert evicted == [0, 1, 3, 4]  # pop does not count as an eviction


def test_get_peek_pop_and_absent_values() -> None:
    cache = LRUCache(2)
    marker = object()
    cache.put("a", None)  # None is a value like any other
    cache.put("b", 2)
    assert cache.get("a", marker) is None and list(cache) == ["b", "a"]
    assert cache.peek("b") == 2 and list(cache) == ["b", "a"]  # peek does not refresh
    assert cache.get("zz", marker) is marker and cache.pop("zz", marker) is marker
    assert "a" in cache and "zz" not in cache
    cache.put("b", 3)  # replacing refreshes
    assert list(cache) == ["a", "b"] and cache.get("b") == 3
    cache.clear()
    assert len(cache) == 0 and list(cache) == []


def test_second_chance_spares_once_and_never_the_entry_just_stored() -> None:
    used = {0: True, 1: False, 2: True}
    dropped = []

    def spare(key, value):
        if used.get(key):
            used[key] = False
            return True
        return False

    cache = LRUCache(3, spare=spare, on_evict=lambda k, v: dropped.append(k))
    for k in range(3):
        cache.put(k, k)
    cache.put(3, 3)  # 0 spared (moved back), 1 dropped
    assert list(cache) == [2, 3, 0] and dropped == [1]
    cache.put(4, 4)  # 2 spared, 3 dropped
    assert list(cache) == [0, 4, 2] and dropped == [1, 3]
    used.update({0: True, 4: True, 2: True})
    cache.put(5, 5)  # every old one spared once, then the least recent of them dropped
    assert list(cache) == [4, 2, 5] and dropped == [1, 3, 0]
    assert not any(used.values())

    always = LRUCache(2, spare=lambda k, v: True)  # a spare that never clears: bounded
    for k in range(10):
        always.put(k, k)
    assert len(always) == 2 and 9 in always


@pytest.mark.parametrize("lock", [True, False])
def test_peek_then_touch_is_get(lock) -> None:
    cache, twin = LRUCache(3, lock=lock), LRUCache(3, lock=lock)
    for k in "abc":
        cache.put(k, k)
        twin.put(k, k)
    assert cache.peek("a") == twin.get("a") == "a"
    cache.touch("a")
    assert list(cache) == list(twin) == ["b", "c", "a"]
    cache.put("d", "d")
    twin.put("d", "d")
    assert list(cache) == list(twin) == ["c", "a", "d"]
    with pytest.raises(KeyError):
        cache.touch("b")  # evicted


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_bounds_raise(bad) -> None:
    with pytest.raises(ConfigError):
        LRUCache(bad)
    with pytest.raises(ConfigError):
        LRUCache(max_bytes=bad)
    cache = LRUCache(4)
    with pytest.raises(ConfigError):
        cache.max_entries = bad


def test_concurrent_get_and_put_keep_the_bounds_and_the_values() -> None:
    """Several threads hammering one locked cache, switching often: no exception, bounds
    hold, every value read is the one stored for its key, and the byte count matches the
    entries held (without the lock this fails: a KeyError or a wrong byte count).
    """
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        _hammer(LRUCache(64, max_bytes=64 * 40, sizeof=len))
    finally:
        sys.setswitchinterval(interval)


def _hammer(cache: LRUCache) -> None:
    start = threading.Barrier(6)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        for _ in range(60000):
            key = rng.randrange(200)
            if rng.random() < 0.6:
                value = cache.get(key)
                assert value is None or value == str(key) * (key % 7 + 1)
            elif rng.random() < 0.9:
                cache.put(key, str(key) * (key % 7 + 1))
            else:
                cache.pop(key)
            assert len(cache) <= 64

    with ThreadPoolExecutor(6) as pool:
        for done in [pool.submit(work, seed) for seed in range(6)]:
            done.result()  # a worker's exception is raised here
    assert len(cache) <= 64
    assert cache.num_bytes == sum(len(cache.peek(k)) for k in cache) <= 64 * 40


@pytest.mark.parametrize("lock", [True, False])
def test_a_dropped_cache_frees_its_values_without_the_collector(lock) -> None:
    """No reference cycle through the cache: its values die with its last reference."""
    import gc
    import weakref

    cache = LRUCache(4, lock=lock, spare=lambda k, v: False, on_evict=lambda k, v: None)
    value = np.zeros(8)
    cache.put("a", value)
    assert cache.get("a") is value and isinstance(cache, LRUCache)
    dead = weakref.ref(value)
    was = gc.isenabled()
    gc.disable()
    try:
        del cache, value
        assert dead() is None
    finally:
        if was:
            gc.enable()
