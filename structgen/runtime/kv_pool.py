"""KVPool: a preallocated pool of KV cache pages for every layer.

Layout (per layer): ``k[layer]`` and ``v[layer]`` are tensors of shape
``[num_pages, page_size, num_kv_heads, head_dim]`` in the compute dtype. A token's
*slot* is ``page_id * page_size + offset``; viewing a layer's cache as
``[num_pages * page_size, num_kv_heads, head_dim]`` makes slots direct row indices.
Page 0 is reserved as a scratch page: padded page-table entries point at it, so
gathers never index out of range, and it is never handed out.
"""

from __future__ import annotations

import torch

__all__ = ["KVPool"]


class KVPool:
    """Fixed pool of KV pages with a free list.

    Args:
        num_layers: transformer layers.
        num_pages: pages to allocate, including the reserved scratch page 0.
        page_size: tokens per page.
        num_kv_heads: KV heads per layer.
        head_dim: dimension of one head.
        dtype: storage dtype (the compute dtype).
        device: torch device.

    Memory: ``2 * num_layers * num_pages * page_size * num_kv_heads * head_dim * itemsize`` bytes.
    """

    def __init__(
        self,
        num_layers: int,
        num_pages: int,
        page_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        assert num_pages >= 2, "need the scratch page and at least one usable page"
        self.num_layers = num_layers
        self.num_pages = num_pages
        self.page_size = page_size
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.device = torch.device(device)
        shape = (num_pages, page_size, num_kv_heads, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]
        # LIFO free list: recently freed (cache-warm) pages are reused first.
        self._free: list[int] = list(range(num_pages - 1, 0, -1))

    @property
    def num_usable_pages(self) -> int:
        """Pages that can be allocated (all but the scratch page)."""
        return self.num_pages - 1

    @property
    def num_free_pages(self) -> int:
        """Pages currently on the free list."""
        return len(self._free)

    def alloc(self, n: int) -> list[int] | None:
        """Take ``n`` pages off the free list; None (nothing taken) if fewer are free."""
        if n > len(self._free):
            return None
        if n == 0:
            return []
        pages = self._free[-n:]
        del self._free[-n:]
        pages.reverse()
        return pages

    def free(self, pages: list[int]) -> None:
        """Return pages to the free list (the caller must own them)."""
        self._free.extend(reversed(pages))

    def k_slots(self, layer: int) -> torch.Tensor:
        """Layer's K cache as ``[num_pages * page_size, num_kv_heads, head_dim]`` (a view)."""
        return self._slots(self.k, layer)

    def v_slots(self, layer: int) -> torch.Tensor:
        """Layer's V cache as ``[num_pages * page_size, num_kv_heads, head_dim]`` (a view)."""
        return self._slots(self.v, layer)

    def _slots(self, tensors: list[torch.Tensor], layer: int) -> torch.Tensor:
        """The slot view of ``tensors[layer]``, made once per tensor (all layers ask each step)."""
        cache = self.__dict__.setdefault("_slot_views", {})
        key = (id(tensors), layer)
        hit = cache.get(key)
        t = tensors[layer]
        if hit is None or hit[0] is not t:
            hit = cache[key] = (t, t.view(-1, self.num_kv_heads, self.head_dim))
        return hit[1]

    def nbytes(self) -> int:
        """Bytes held by the K and V tensors of all layers."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)
