"""KVPool: the paged KV cache of every layer, preallocated or grown on demand.

Layout (per layer): ``k[layer]`` and ``v[layer]`` are tensors of shape
``[num_reserved_pages, page_size, num_kv_heads, head_dim]`` in the KV cache dtype
(``EngineConfig.kv_cache_dtype``: float16 for the default CPU engine, else the compute dtype
by default; see ``EngineConfig``). A token's
*slot* is ``page_id * page_size + offset``; viewing a layer's cache as
``[num_reserved_pages * page_size, num_kv_heads, head_dim]`` makes slots direct row indices
(the layout every attention kernel and the fused CPU decode step index). Page 0 is reserved
as a scratch page: padded page-table entries point at it, so gathers never index out of
range, and it is never handed out.

Storage: on the host (``device="cpu"``) the storage is numpy arrays (:attr:`KVPool.k_arrays`,
:attr:`KVPool.v_arrays`; what the fused CPU decode step reads, by address), and ``k`` / ``v`` /
``k_slots`` / ``v_slots`` are torch views of the same memory (``torch.from_numpy``, no copy),
made on first use by a torch model or kernel: a pool used only by the numpy decoder never
imports torch. A dtype numpy lacks (``bfloat16``) is stored as unsigned integers of its width
and viewed as that dtype by torch. On CUDA the storage is torch tensors, and ``k`` / ``v``
are the storage itself.

Capacity and storage: the pool may hand out page ids ``1 .. num_pages - 1``. A preallocated
pool (``growth_pages=None``, what CUDA uses: CUDA graphs capture the tensors' pointers)
holds storage for all of them from the start. A growable pool starts with ``growth_pages``
pages reserved and, when :meth:`alloc` needs pages past them, reserves more (by at least
``growth_pages`` and at least doubled, never past ``num_pages``). Its arrays are views of
the first reserved pages of storage for all ``num_pages``, allocated at start (an anonymous
memory mapping on the host: the operating system maps a page on first write, so only pages
written are resident): growing takes longer views, and nothing is copied and no address
changes. Where that storage cannot be allocated (no address space for it), each growth
reallocates the arrays larger and copies the used pages to the same rows
(``k_slots``/``v_slots`` give the current views; the fused decode step re-plans when the
pointers change; doubling keeps the pages copied over all growths below the pages finally
reserved). Either way page ids and slots never change, and ``nbytes`` counts the reserved
pages. Page ids are handed out in the same order by both kinds of pool, so the same
alloc/free sequence gives the same ids.

Zeroed pages: masked attention multiplies the slots past a sequence's end (a page's tail,
the scratch page) by a zero probability, which an uninitialised NaN bit pattern would
poison. A preallocated pool is zero-filled at creation. A growable pool's storage is not
written at creation (reserved-but-unused pages cost no resident memory) and a page is zeroed
the first time it is handed out (:meth:`alloc`) or named by :meth:`reserve`; the scratch page
is zeroed at creation. Never-handed-out pages are handed out lowest id first, so the zeroed
pages are always a prefix ``0 .. n - 1`` of the page ids. A page handed out again after
:meth:`free` keeps what its last owner wrote (finite values).

Accounting: ``num_free_pages`` counts the free list plus the pages not reserved yet (what the
scheduler and the radix cache may still take), so the invariant "free pages + pages in the
tree + pages owned by requests == all usable pages" holds for both kinds.
"""

from __future__ import annotations

import math
import mmap
from typing import TYPE_CHECKING, Any

import numpy as np

from structgen.errors import ConfigError
from structgen.runtime.device_boundary import device_type

if TYPE_CHECKING:
    import torch

__all__ = ["KVPool", "KV_GROWTH_TOKENS", "available_host_memory", "default_kv_tokens"]

KV_GROWTH_TOKENS = 1024  # tokens of storage a growable (CPU) engine pool reserves at a time


# numpy's storage dtype per KV cache dtype name: the dtype itself, or unsigned integers of its
# width where numpy has no such float (torch views them as the named dtype)
_HOST_DTYPES = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "float64": np.dtype(np.float64),
    "bfloat16": np.dtype(np.uint16),
}


def kv_dtype_name(dtype: Any) -> str:
    """The name of a KV cache dtype given as a name (``"float16"``), a numpy dtype or a
    ``torch.dtype`` (``torch.float16`` -> ``"float16"``).

    Raises:
        ConfigError: ``dtype`` names no dtype (whether a host pool can hold it is
            :class:`KVPool`'s check).
    """
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
    elif isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        name = np.dtype(dtype).name
    else:
        name = str(dtype).removeprefix("torch.")  # a torch.dtype prints as "torch.float16"
    if not name or not name.replace("_", "").isalnum():
        raise ConfigError(f"KVPool: not a dtype: {dtype!r}")
    return name


def _host_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array over a fresh private anonymous memory mapping (what ``malloc`` gives
    a large block, without its header): read as zero, and mapped by
    the operating system page by page on first write (not advised onto huge pages, as numpy's
    own allocator does above 4 MiB: a first write commits 4 KiB, not 2 MiB).

    Raises:
        MemoryError: the mapping could not be made (no address space for it).
    """
    nbytes = math.prod(shape) * dtype.itemsize
    try:
        buf = mmap.mmap(-1, max(1, nbytes), flags=mmap.MAP_PRIVATE)  # anonymous, private
    except OSError as e:
        raise MemoryError(f"KVPool: cannot map {nbytes} bytes of KV storage: {e}") from e
    return np.frombuffer(buf, dtype, count=math.prod(shape)).reshape(shape)


class KVPool:
    """A pool of KV pages with a free list, preallocated or grown in chunks of pages.

    Args:
        num_layers: transformer layers.
        num_pages: the most pages the pool may hold, including the reserved scratch page 0.
        page_size: tokens per page.
        num_kv_heads: KV heads per layer.
        head_dim: dimension of one head.
        dtype: storage dtype (``EngineConfig.kv_cache_dtype``: the compute dtype or a
            narrower one; K/V are rounded to it on store and widened on load): a name
            (``"float16"``), a numpy dtype or a ``torch.dtype``. On the host: float32,
            float16, float64 or bfloat16.
        device: ``"cpu"`` (numpy storage: module docstring), ``"cuda[:N]"`` or a
            ``torch.device`` (torch storage).
        growth_pages: None preallocates all ``num_pages`` (zero-filled); an int >= 1 makes
            the pool growable: storage for ``growth_pages`` pages (scratch page included) at
            first, grown on demand by :meth:`alloc` in chunks of at least ``growth_pages``,
            each page zeroed when first handed out (module docstring).

    Raises:
        ConfigError: a host pool in a dtype numpy cannot hold (not in ``_HOST_DTYPES``).

    Memory: ``page_nbytes`` per reserved page (``nbytes()`` in all;
    ``2 * num_layers * page_size * num_kv_heads * head_dim * itemsize`` bytes a page).
    """

    v_views_k = False  # True when ``_storage``'s V arrays are views of its K arrays

    def __init__(
        self,
        num_layers: int,
        num_pages: int,
        page_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: Any = "float32",
        device: Any = "cpu",
        growth_pages: int | None = None,
    ) -> None:
        assert num_pages >= 2, "need the scratch page and at least one usable page"
        assert growth_pages is None or growth_pages >= 1
        self.num_layers = num_layers
        self.num_pages = num_pages
        self.page_size = page_size
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.dtype_name = kv_dtype_name(dtype)
        self._device = device
        self.device_type = device_type(device)  # "cpu", "cuda", ...
        self.on_host = self.device_type == "cpu"
        if self.on_host and self.dtype_name not in _HOST_DTYPES:
            raise ConfigError(
                f"KVPool: a host KV cache is stored in one of {sorted(_HOST_DTYPES)}, "
                f"got {self.dtype_name!r}"
            )
        self.growth_pages = growth_pages
        reserved = num_pages if growth_pages is None else min(num_pages, max(2, growth_pages))
        # a growable pool's storage for all num_pages, not written (not resident until
        # written): growing takes longer views of it; None where it could not be had
        self._whole: tuple[list, list] | None = None
        if growth_pages is not None and reserved < num_pages:
            try:
                self._whole = self._storage(num_pages)
            except (RuntimeError, MemoryError):  # no address space for it: copy on growth
                self._whole = None
        if self._whole is not None:
            self._k, self._v = self._views(reserved)
        else:
            self._k, self._v = self._storage(reserved)
        self._reserved = reserved
        self._zeroed = 0  # pages 0 .. _zeroed - 1 are zeroed or were handed out since
        self._zero_pages(reserved if growth_pages is None else 1)  # 1: the scratch page
        self.num_grows = 0  # growths since start
        # LIFO free list: recently freed (cache-warm) pages are reused first; pages never
        # handed out sit at the bottom in descending order (the lowest id on top).
        self._free: list[int] = list(range(reserved - 1, 0, -1))

    # ------------------------------------------------------------------ storage
    @property
    def dtype(self) -> torch.dtype:
        """The storage dtype as a ``torch.dtype`` (imports torch; :attr:`dtype_name` does not)."""
        import torch

        return getattr(torch, self.dtype_name)

    @property
    def device(self) -> torch.device:
        """The storage device as a ``torch.device`` (imports torch; :attr:`device_type` and
        :attr:`on_host` do not).
        """
        import torch

        return torch.device(self._device)

    def _new_array(self, shape: tuple[int, ...]) -> Any:
        """Storage of ``shape`` in the pool's dtype, not written: a numpy array on the host
        (:func:`_host_empty`), else a torch tensor on the device.
        """
        if self.on_host:
            return _host_empty(shape, _HOST_DTYPES[self.dtype_name])
        import torch

        return torch.empty(shape, dtype=self.dtype, device=self.device)

    def _storage(self, num_pages: int) -> tuple[list, list]:
        """K and V storage for ``num_pages`` pages, per layer, not written (a subclass with
        another layout overrides this).
        """
        shape = (num_pages, self.page_size, self.num_kv_heads, self.head_dim)
        k = [self._new_array(shape) for _ in range(self.num_layers)]
        v = [self._new_array(shape) for _ in range(self.num_layers)]
        return k, v

    def _views(self, num_pages: int) -> tuple[list, list]:
        """Pages ``0 .. num_pages - 1`` of the whole storage, as views per layer."""
        whole_k, whole_v = self._whole
        return [t[:num_pages] for t in whole_k], [t[:num_pages] for t in whole_v]

    @property
    def k_arrays(self) -> list[np.ndarray]:
        """Per layer, the K storage ``[num_reserved_pages, page_size, num_kv_heads, head_dim]``
        of a host pool as numpy arrays (bfloat16 as uint16 bits); they change when the pool
        grows.

        Raises:
            ConfigError: the pool is on a device (its storage is torch tensors: :attr:`k`).
        """
        self._need_host()
        return self._k

    @property
    def v_arrays(self) -> list[np.ndarray]:
        """Per layer, the V storage of a host pool as numpy arrays (as :attr:`k_arrays`)."""
        self._need_host()
        return self._v

    def _need_host(self) -> None:
        if not self.on_host:
            raise ConfigError(f"KVPool: the storage is on {self.device_type}, not numpy arrays")

    def data_ptrs(self) -> list[int]:
        """The addresses of every layer's K storage, then every layer's V storage (what the
        fused decode step's table holds; they change only when a growth had to copy).
        """
        hit = self.__dict__.get("_ptrs")  # every step asks: made once per storage
        if hit is None or hit[0] is not self._k:
            if self.on_host:
                ptrs = [a.ctypes.data for a in self._k] + [a.ctypes.data for a in self._v]
            else:
                ptrs = [t.data_ptr() for t in self._k] + [t.data_ptr() for t in self._v]
            hit = self._ptrs = (self._k, ptrs)
        return list(hit[1])

    @property
    def k(self) -> list[torch.Tensor]:
        """Per layer, the K cache ``[num_reserved_pages, page_size, num_kv_heads, head_dim]``
        as torch tensors (on the host: views of :attr:`k_arrays`, made on first use; a growable
        pool's tensors change when it grows).
        """
        return self._tensors()[0]

    @property
    def v(self) -> list[torch.Tensor]:
        """Per layer, the V cache as torch tensors (as :attr:`k`)."""
        return self._tensors()[1]

    def _tensors(self) -> tuple[list, list]:
        """The storage as torch tensors: itself on a device, views made once per storage on the
        host (``torch.from_numpy``, viewed as the pool's dtype where numpy stores its bits).
        """
        if not self.on_host:
            return self._k, self._v
        hit = self.__dict__.get("_torch_views")
        if hit is None or hit[0] is not self._k:
            import torch

            dtype = self.dtype

            def view(a: np.ndarray) -> torch.Tensor:
                t = torch.from_numpy(a)
                return t if t.dtype == dtype else t.view(dtype)

            hit = (self._k, [view(a) for a in self._k], [view(a) for a in self._v])
            self._torch_views = hit
        return hit[1], hit[2]

    def _zero_pages(self, end: int) -> None:
        """Zero pages ``_zeroed .. end - 1`` (each page once; see the module docstring)."""
        if end <= self._zeroed:
            return
        arrays = self._k if self.v_views_k else self._k + self._v
        for t in arrays:
            t[self._zeroed : end] = 0
        self._zeroed = end

    def _reserve(self, num_pages: int) -> None:
        """Grow the storage to ``num_pages`` pages, keeping every page at its row (the new
        pages stay unwritten until they are handed out): longer views of the whole
        storage, or, where that could not be allocated, new arrays with the used pages
        copied over.
        """
        old = self._reserved
        if self._whole is not None:  # longer views of the same storage: nothing moves
            k, v = self._views(num_pages)
        else:
            k, v = self._storage(num_pages)
            pairs = list(zip(k, self._k)) + ([] if self.v_views_k else list(zip(v, self._v)))
            for new_t, old_t in pairs:
                new_t[: self._zeroed] = old_t[: self._zeroed]  # the rest was never used
        self._k, self._v = k, v
        self.__dict__.pop("_slot_views", None)  # they hold the old tensors
        self._reserved = num_pages
        self.num_grows += 1
        # the never-handed-out pages go below the free list's bottom, lowest id nearest the
        # top: the order a preallocated pool would hand them out in
        self._free[:0] = range(num_pages - 1, old - 1, -1)

    def reserve(self, num_pages: int) -> None:
        """Make sure pages ``0 .. num_pages - 1`` have storage and were zeroed (a growable
        pool grows by at least ``growth_pages`` and doubles, never past ``num_pages``; a
        pool that mirrors another's page ids, such as a tensor-parallel worker's, calls it
        before a step).

        Raises: never (a preallocated pool already holds every page).
        """
        self._grow_to(num_pages)
        self._zero_pages(min(num_pages, self._reserved))

    def _grow_to(self, num_pages: int) -> None:
        """Storage for pages ``0 .. num_pages - 1`` (at least a chunk more when it grows)."""
        if num_pages <= self._reserved:
            return
        step = max(self.growth_pages or 1, self._reserved, num_pages - self._reserved)
        self._reserve(min(self.num_pages, self._reserved + step))

    @property
    def is_growable(self) -> bool:
        """True when storage is reserved on demand (``growth_pages`` set)."""
        return self.growth_pages is not None

    @property
    def num_reserved_pages(self) -> int:
        """Pages with storage now, the scratch page included (``num_pages`` when
        preallocated).
        """
        return self._reserved

    @property
    def page_nbytes(self) -> int:
        """Bytes one page takes across all layers (K and V)."""
        return self.nbytes() // self._reserved

    # -------------------------------------------------------------------- pages
    @property
    def num_usable_pages(self) -> int:
        """Pages that can be allocated (all but the scratch page), reserved or not."""
        return self.num_pages - 1

    @property
    def num_free_pages(self) -> int:
        """Pages :meth:`alloc` can still hand out: the free list and the unreserved pages."""
        return len(self._free) + self.num_pages - self._reserved

    @property
    def num_used_pages(self) -> int:
        """Pages handed out and not freed (owned by requests or the radix cache)."""
        return self.num_usable_pages - self.num_free_pages

    def alloc(self, n: int) -> list[int] | None:
        """Take ``n`` pages; None (nothing taken) if fewer are free.

        A growable pool reserves storage first when the free list is short; the returned
        pages always have storage, and a page handed out for the first time is zero.
        Raises: never.
        """
        if n > self.num_free_pages:
            return None
        if n == 0:
            return []
        if n > len(self._free):
            self._grow_to(self._reserved + n - len(self._free))
        pages = self._free[-n:]
        del self._free[-n:]
        pages.reverse()
        self._zero_pages(max(pages) + 1)
        return pages

    def free(self, pages: list[int]) -> None:
        """Return pages to the free list (the caller must own them)."""
        self._free.extend(reversed(pages))

    def copy_page_prefix(self, src: int, dst: int, num_tokens: int) -> None:
        """Copy the K and V of the first ``num_tokens`` slots of page ``src`` into page
        ``dst`` (every layer): a request starts from a copy of a cached page's leading
        tokens (``RadixCache.match_prefix_partial``) instead of recomputing them.

        Args:
            src: a page with storage (the tree's, read only).
            dst: another page with storage, owned by the caller.
            num_tokens: slots to copy, ``0 <= num_tokens <= page_size``.

        Raises:
            AssertionError: an internal caller passed a page without storage, the same
                page twice or a bad count (runtime invariants).
        """
        assert 0 < src < self._reserved and 0 < dst < self._reserved and src != dst
        assert 0 <= num_tokens <= self.page_size
        arrays = self._k if self.v_views_k else self._k + self._v
        for t in arrays:  # [pages, page_size, heads, head_dim]
            t[dst, :num_tokens] = t[src, :num_tokens]

    def same_layout(self, other: KVPool) -> bool:
        """Whether ``other``'s pages can be copied into this pool's (:meth:`copy_pages_from`):
        the same class, layers, page size, heads, head size, dtype and device type.
        Raises: never.
        """
        return type(other) is type(self) and (
            other.num_layers, other.page_size, other.num_kv_heads, other.head_dim,
            other.dtype_name, other.device_type,
        ) == (
            self.num_layers, self.page_size, self.num_kv_heads, self.head_dim,
            self.dtype_name, self.device_type,
        )  # fmt: skip

    def copy_pages_from(self, src: KVPool, src_pages: list[int], dst_pages: list[int]) -> None:
        """Copy the K and V of whole pages of another pool into pages of this one (every
        layer): ``src_pages[i]`` of ``src`` into ``dst_pages[i]``, e.g. a prefix another
        engine over the same model cached (``RadixCache.import_prefix``).

        Args:
            src: a pool of the same layout (:meth:`same_layout`), not this one; its pages
                are only read (the caller keeps them from being written meanwhile).
            src_pages: pages of ``src`` with storage.
            dst_pages: as many pages of this pool with storage, owned by the caller.

        Raises:
            AssertionError: an internal caller passed another layout, unequal page lists or
                a page without storage (runtime invariants).
        """
        assert src is not self and self.same_layout(src) and len(src_pages) == len(dst_pages)
        if not dst_pages:
            return
        assert 0 < min(src_pages) and max(src_pages) < src._reserved
        assert 0 < min(dst_pages) and max(dst_pages) < self._reserved
        mine = self._k if self.v_views_k else self._k + self._v
        theirs = src._k if src.v_views_k else src._k + src._v
        for d, s in zip(mine, theirs):  # [pages, page_size, heads, head_dim]
            d[dst_pages] = s[src_pages]

    # -------------------------------------------------------------------- views
    def k_slots(self, layer: int) -> torch.Tensor:
        """Layer's K cache as ``[num_reserved_pages * page_size, num_kv_heads, head_dim]``
        (a view; a growable pool's tensors change when it grows).
        """
        return self._slots(self.k, layer)

    def v_slots(self, layer: int) -> torch.Tensor:
        """Layer's V cache as ``[num_reserved_pages * page_size, num_kv_heads, head_dim]``
        (a view; a growable pool's tensors change when it grows).
        """
        return self._slots(self.v, layer)

    def _slots(self, tensors: list[torch.Tensor], layer: int) -> torch.Tensor:
        """The slot view of ``tensors[layer]`` (the list :attr:`k` or :attr:`v` gives), made
        once per tensor (all layers ask each step).
        """
        cache = self.__dict__.setdefault("_slot_views", {})
        key = (id(tensors), layer)
        hit = cache.get(key)
        t = tensors[layer]
        if hit is None or hit[0] is not t:
            hit = cache[key] = (t, t.view(-1, self.num_kv_heads, self.head_dim))
        return hit[1]

    def nbytes(self) -> int:
        """Bytes reserved by the K and V storage of all layers now."""
        return sum(t.nbytes for t in self._k + self._v)

    def max_nbytes(self) -> int:
        """Bytes the pool holds when all ``num_pages`` are reserved."""
        return self.page_nbytes * self.num_pages


def available_host_memory() -> int | None:
    """Bytes of host memory available to this process now, or None if unknown.

    ``MemAvailable`` of ``/proc/meminfo`` (else ``os.sysconf``'s available physical pages),
    capped by a cgroup v2 memory limit (``memory.max - memory.current``) where one is set.
    Raises: never.
    """
    import os

    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                available = min(available, max(0, int(limit) - int(f.read().strip())))
    except (OSError, ValueError):
        pass
    return available


def default_kv_tokens(
    max_model_len: int,
    max_running_requests: int,
    bytes_per_token: int,
    memory_fraction: float,
    available_bytes: int | None,
    page_size: int,
) -> int:
    """The KV capacity in tokens when none is configured (CPU):
    ``min(max_model_len * max_running_requests, memory_fraction * available_bytes //
    bytes_per_token)``, at least one page.

    Args:
        max_model_len: the engine's context limit, tokens.
        max_running_requests: most requests running at once.
        bytes_per_token: KV bytes of one token across all layers (``page_nbytes / page_size``).
        memory_fraction: share of the available memory the pool may take
            (``EngineConfig.kv_memory_fraction``).
        available_bytes: memory available now (:func:`available_host_memory`); None = no
            memory cap.
        page_size: tokens per page (the lower bound).

    Returns:
        Tokens (the pool rounds it up to whole pages). Raises: never.
    """
    tokens = max_model_len * max_running_requests
    if available_bytes is not None:
        tokens = min(tokens, int(available_bytes * memory_fraction) // max(1, bytes_per_token))
    return max(page_size, tokens)
