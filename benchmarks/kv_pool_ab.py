"""In-process A/B of ``KVPool`` between a base checkout's ``kv_pool.py`` (A, loaded from
``BASE_ROOT``) and this checkout's (B): a fresh growable pool of the default engine's shape
(SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64, float16, page 16, 8,192 pages) handing out
2,000 tokens' pages in 8-page allocs with each page's first slot written (as a store would),
then the fused decode step's per-step read of the storage addresses (``CpuDecoder.forward``'s
check). Rounds alternate A B / B A; medians.

    PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/kv_pool_ab.py BASE_ROOT [ROUNDS]
"""

import importlib.util
import statistics
import sys
import time

import torch

from structgen.runtime import kv_pool as new_mod

spec = importlib.util.spec_from_file_location(
    "kv_pool_base", f"{sys.argv[1]}/structgen/runtime/kv_pool.py"
)
main_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(main_mod)

L, H, D, PS, PAGES = 30, 3, 64, 16, 8193


def build_and_fill(mod):
    dtype = torch.float16
    t0 = time.perf_counter()
    pool = mod.KVPool(L, PAGES, PS, H, D, dtype=dtype, growth_pages=64)
    for _ in range(2000 // PS // 8):
        pages = pool.alloc(8)
        if hasattr(pool, "k_arrays"):
            for a in pool.k_arrays + pool.v_arrays:
                a[pages, 0] = 1.0
        else:
            for t in pool.k + pool.v:
                t[pages, 0] = 1.0
    return time.perf_counter() - t0, pool


def ptrs(mod, pool, n=2000):
    t0 = time.perf_counter()
    if hasattr(pool, "data_ptrs"):
        for _ in range(n):
            pool.data_ptrs()
    else:
        for _ in range(n):
            [t.data_ptr() for t in pool.k] + [t.data_ptr() for t in pool.v]
    return (time.perf_counter() - t0) / n


res = {("fill", m): [] for m in "AB"} | {("ptrs", m): [] for m in "AB"}
for r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 7):
    for m in "AB" if r % 2 == 0 else "BA":
        mod = main_mod if m == "A" else new_mod
        dt, pool = build_and_fill(mod)
        res["fill", m].append(dt)
        res["ptrs", m].append(ptrs(mod, pool))
        del pool
print("| measure | A: base | B: this checkout | B / A |\n|---|---|---|---|")
for k, unit, scale in (("fill", "ms", 1e3), ("ptrs", "us", 1e6)):
    a, b = statistics.median(res[k, "A"]), statistics.median(res[k, "B"])
    print(f"| {k} ({unit}) | {a * scale:.3f} | {b * scale:.3f} | {b / a:.3f} |")
