"""Shared builders for kernel tests: dtypes, tolerances, paged caches."""

from __future__ import annotations

import torch

# dtype -> (atol, rtol) against the float32-math torch references. bf16: the interpreter
# rounds bf16 by truncation (the GPU rounds to nearest), so allow ~2 ulps.
TOL = {
    torch.float32: (2e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (3e-2, 2e-2),
}

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    """``torch.testing.assert_close`` with the suite's per-dtype tolerance (see TOL)."""
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol)


def paged_cache(num_pages: int, page_size: int, kv_heads: int, d: int, dtype, seed: int = 0):
    """Random K and V caches ``[num_pages, page_size, kv_heads, d]``."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(num_pages, page_size, kv_heads, d, generator=g).to(dtype)
    v = torch.randn(num_pages, page_size, kv_heads, d, generator=g).to(dtype)
    return k, v


def page_tables(lens: list[int], page_size: int, num_pages: int, seed: int = 0) -> torch.Tensor:
    """``[B, max_pages]`` int32 page tables of distinct shuffled pages (never page 0; pad 0)."""
    g = torch.Generator().manual_seed(seed)
    need = [-(-n // page_size) for n in lens]
    perm = (torch.randperm(num_pages - 1, generator=g) + 1).tolist()
    assert sum(need) <= len(perm)
    table = torch.zeros(len(lens), max(max(need), 1), dtype=torch.int32)
    i = 0
    for b, n in enumerate(need):
        table[b, :n] = torch.tensor(perm[i : i + n], dtype=torch.int32)
        i += n
    return table
