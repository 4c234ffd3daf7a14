"""A bounded least-recently-used cache (``LRUCache``), the one structgen's caches are built on.

An entry is "used" when ``get`` finds it or ``put`` stores it; past a bound the least
recently used entries are dropped first. Bounds: a number of entries, a number of bytes
(each value's size given by ``sizeof``), or both. Thread safety: every method holds the
cache's own lock unless the cache is made with ``lock=False`` for an owner that already
serialises every access (its own lock, or one thread only); there is no lock around a
caller's build of a missing value (two threads missing the same key both build it, the
second ``put`` replaces the first).

A cache holds no reference to itself (the unlocked form is a subclass, not bound methods
stored on the instance): a dropped cache and its values are freed by reference counting,
without waiting for the cyclic garbage collector.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

from .errors import ConfigError

__all__ = ["LRUCache"]

_MISSING = object()

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """A mapping bounded by entries and/or bytes, dropping the least recently used first.

    Args:
        max_entries: most entries kept (None: no bound by count).
        max_bytes: most bytes kept, summed over ``sizeof(value)`` (None: no bound by bytes;
            then ``sizeof`` is not called). An entry larger than the bound alone is dropped
            as soon as it is stored (the entry just stored is dropped only when no other
            is left).
        sizeof: bytes of a value (default ``value.nbytes``, a numpy array's); read once,
            when the value is stored.
        spare: called as ``spare(key, value)`` on the least recently used entry before it
            is dropped; True keeps it (as the most recently used) and the next one is
            considered. It should clear whatever made it True (a second chance): after one
            full round of spares in one eviction pass, entries are dropped unasked.
        on_evict: called as ``on_evict(key, value)`` for each entry a bound drops (not for
            ``pop`` or ``clear``), inside the cache's lock: it (and ``spare``) must not call
            the cache.
        lock: True: every method holds the cache's own lock. False: no lock (the owner
            serialises every access); the instance is then of a private subclass (still an
            ``LRUCache``) whose ``get``/``put`` are the lock-free bodies.

    Iteration yields the keys from least to most recently used (a snapshot when locked).

    Raises:
        ConfigError: a bound that is not None or an int >= 0.
    """

    def __new__(cls, *args: Any, lock: bool = True, **kwargs: Any) -> LRUCache[K, V]:
        """An ``LRUCache``; with ``lock=False``, of its unlocked subclass. Raises: never."""
        if not lock and cls is LRUCache:
            cls = _UnlockedLRUCache
        return super().__new__(cls)

    def __init__(
        self,
        max_entries: int | None = None,
        *,
        max_bytes: int | None = None,
        sizeof: Callable[[V], int] | None = None,
        spare: Callable[[K, V], bool] | None = None,
        on_evict: Callable[[K, V], None] | None = None,
        lock: bool = True,
    ) -> None:
        self._data: OrderedDict[K, V] = OrderedDict()
        self._sizes: dict[K, int] = {}
        self._max_entries = _bound("max_entries", max_entries)
        self._max_bytes = _bound("max_bytes", max_bytes)
        self._sizeof = sizeof if sizeof is not None else _nbytes
        self._spare = spare
        self._on_evict = on_evict
        self._bytes = 0
        self._lock = threading.Lock() if lock else None
        if not lock:  # C calls (the dict is never replaced): a hot caller's get is peek
            # then touch. Bound to the dict, not to the cache: no reference cycle
            self.peek = self._data.get
            self.touch = self._data.move_to_end

    # ---- lookups -------------------------------------------------------------------

    def get(self, key: K, default: Any = None) -> V | Any:
        """The value of ``key`` (now the most recently used), or ``default`` when absent.

        Raises: never (``key`` must be hashable).
        """
        with self._lock:
            return self._get(key, default)

    def _get(self, key: K, default: Any = None) -> V | Any:
        data = self._data
        value = data.get(key, _MISSING)
        if value is _MISSING:
            return default
        data.move_to_end(key)
        return value

    def peek(self, key: K, default: Any = None) -> V | Any:
        """The value of ``key`` without marking it used, or ``default``. Raises: never."""
        with self._locked():
            return self._data.get(key, default)

    def touch(self, key: K) -> None:
        """Mark ``key`` as the most recently used: ``peek`` then ``touch`` is ``get`` with
        no Python frame in between on an unlocked cache (both are then C calls; a hot
        caller's hit path).

        Raises:
            KeyError: ``key`` is not held.
        """
        with self._locked():
            self._data.move_to_end(key)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is held (not marking it used)."""
        return key in self._data

    def __len__(self) -> int:
        """The number of entries held (read under the lock: a concurrent ``put`` stores
        before it evicts, so an unlocked read could see one entry past the bound).
        """
        with self._locked():
            return len(self._data)

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        with self._locked():
            return iter(list(self._data))

    @property
    def num_bytes(self) -> int:
        """Bytes held (sum of ``sizeof`` of the values; 0 without a byte bound; read under
        the lock, as ``len``).
        """
        with self._locked():
            return self._bytes

    # ---- updates -------------------------------------------------------------------

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key`` (replacing any, now the most recently used), then
        drop least recently used entries past the bounds. Raises: what ``sizeof``,
        ``spare`` or ``on_evict`` raise.
        """
        with self._lock:
            self._put(key, value)

    def _put(self, key: K, value: V) -> None:
        data = self._data
        if self._max_bytes is not None:
            size = int(self._sizeof(value))
            self._bytes += size - self._sizes.get(key, 0)
            self._sizes[key] = size
        data[key] = value
        data.move_to_end(key)
        if (self._max_entries is not None and len(data) > self._max_entries) or (
            self._max_bytes is not None and self._bytes > self._max_bytes
        ):
            self._evict(key)

    def pop(self, key: K, default: Any = None) -> V | Any:
        """Remove ``key`` and return its value, or ``default`` when absent. Raises: never."""
        with self._locked():
            value = self._data.pop(key, _MISSING)
            if value is _MISSING:
                return default
            self._bytes -= self._sizes.pop(key, 0)
            return value

    def clear(self) -> None:
        """Drop every entry. Raises: never."""
        with self._locked():
            self._data.clear()
            self._sizes.clear()
            self._bytes = 0

    @property
    def max_entries(self) -> int | None:
        """The bound on entries (None: none). Setting it drops entries down to it.

        Raises (on set): ConfigError as the constructor.
        """
        return self._max_entries

    @max_entries.setter
    def max_entries(self, bound: int | None) -> None:
        self._rebound("max_entries", bound)

    @property
    def max_bytes(self) -> int | None:
        """The bound on bytes (None: none). Setting it drops entries down to it; a byte
        bound set on a cache made without one counts only the values stored after.

        Raises (on set): ConfigError as the constructor.
        """
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, bound: int | None) -> None:
        self._rebound("max_bytes", bound)

    # ---- internals -----------------------------------------------------------------

    def _rebound(self, name: str, bound: int | None) -> None:
        with self._locked():
            setattr(self, f"_{name}", _bound(name, bound))
            self._evict()

    def _locked(self):
        return self._lock if self._lock is not None else _NO_LOCK

    def _over(self) -> bool:
        return (self._max_entries is not None and len(self._data) > self._max_entries) or (
            self._max_bytes is not None and self._bytes > self._max_bytes and bool(self._data)
        )

    def _evict(self, stored: Any = _MISSING) -> None:
        """Drop least recently used entries while past a bound; the entry just ``stored``
        goes only when it is the last one left.
        """
        data, spare, on_evict = self._data, self._spare, self._on_evict
        spares = len(data) if spare is not None else 0
        while self._over():
            key, value = data.popitem(last=False)
            if data and key == stored:
                data[key] = value
                continue
            if spares > 0 and spare(key, value):
                spares -= 1
                data[key] = value
                continue
            self._bytes -= self._sizes.pop(key, 0)
            if on_evict is not None:
                on_evict(key, value)


class _UnlockedLRUCache(LRUCache[K, V]):
    """``LRUCache(..., lock=False)``: ``get`` and ``put`` without the lock (class attributes,
    so the instance holds no bound method of itself).
    """

    get = LRUCache._get
    put = LRUCache._put


class _NoLock:
    """A context manager that does nothing (an unlocked cache's ``_locked``)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()


def _nbytes(value: Any) -> int:
    return value.nbytes


def _bound(name: str, bound: object) -> int | None:
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        raise ConfigError(f"LRUCache {name} must be None or an int >= 0, got {bound!r}")
    return bound
