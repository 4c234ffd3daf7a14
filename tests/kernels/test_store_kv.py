"""store_kv: Triton (interpreted) vs the torch reference, exact."""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.store_kv import store_kv, store_kv_ref
from tests.kernels.helpers import DTYPES


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("num_tokens", "kv_heads", "d"), [(1, 1, 8), (7, 3, 24)])
def test_store_kv_matches_reference(dtype, num_tokens, kv_heads, d):
    num_slots = 5 * 4  # 5 pages of 4
    k = torch.randn(num_tokens, kv_heads, d).to(dtype)
    v = torch.randn(num_tokens, kv_heads, d).to(dtype)
    slots = torch.randperm(num_slots - 4)[:num_tokens] + 4  # crosses pages, skips scratch page 0
    caches = [torch.zeros(num_slots, kv_heads, d, dtype=dtype) for _ in range(4)]
    store_kv(k, v, caches[0], caches[1], slots, backend="triton")
    store_kv_ref(k, v, caches[2], caches[3], slots)
    assert torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])


def test_store_kv_casts_and_views_pool_pages():
    cache = torch.zeros(3, 4, 2, 8, dtype=torch.bfloat16)  # [pages, page_size, kv_heads, d]
    vcache = torch.zeros_like(cache)
    k = torch.randn(2, 2, 8)  # float32 into a bf16 cache
    v = torch.randn(2, 2, 8)
    slots = torch.tensor([5, 11])
    store_kv(k, v, cache.view(-1, 2, 8), vcache.view(-1, 2, 8), slots, backend="triton")
    # the interpreter truncates to bf16 (the GPU rounds to nearest): within one ulp
    torch.testing.assert_close(cache[1, 1], k[0].bfloat16(), atol=0, rtol=2**-7)
    torch.testing.assert_close(vcache[2, 3], v[1].bfloat16(), atol=0, rtol=2**-7)
    assert (cache[0] == 0).all()
    with pytest.raises(ValueError):
        store_kv(k, v, cache.view(-1, 2, 8), vcache.view(-1, 2, 8), slots[:1], backend="triton")
