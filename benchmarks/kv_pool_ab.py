"""In-process A/B of ``KVPool``'s host storage.

Default mode: a base checkout's ``kv_pool.py`` (A, loaded from ``BASE_ROOT``) against this
checkout's (B): a fresh growable pool of the default engine's shape (SmolLM2-135M: 30 layers,
3 KV heads, head_dim 64, float16, page 16, 8,192 pages) handing out 2,000 tokens' pages in
8-page allocs with each page's first slot written (as a store would), then the fused decode
step's per-step read of the storage addresses (``CpuDecoder.forward``'s check). Rounds
alternate A B / B A; medians.

``--decode-pairs N`` (this checkout only): the default engine's batch-1 decode step
(``ModelRunner.forward_logits`` into ``CpuDecoder``, a 300-token context, the step rewriting the
same slot) over a pool whose storage is ``torch.empty`` memory (A: glibc ``malloc``, what the
pool held before its storage was numpy) and over the pool as it is (B: anonymous mappings),
alternating A B / B A per step, N pairs: median wall and process CPU seconds a step, and
whether the logits are equal.

    PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/kv_pool_ab.py BASE_ROOT [--rounds 9]
    PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/kv_pool_ab.py --decode-pairs 60
"""

import argparse
import importlib.util
import random
import statistics
import time

import numpy as np
import torch

from benchmarks.support import alternating
from structgen.runtime import kv_pool as new_mod

L, H, D, PS, PAGES = 30, 3, 64, 16, 8193


def build_and_fill(mod):
    t0 = time.perf_counter()
    pool = mod.KVPool(L, PAGES, PS, H, D, dtype=torch.float16, growth_pages=64)
    for _ in range(2000 // PS // 8):
        pages = pool.alloc(8)
        if hasattr(pool, "k_arrays"):
            for a in pool.k_arrays + pool.v_arrays:
                a[pages, 0] = 1.0
        else:
            for t in pool.k + pool.v:
                t[pages, 0] = 1.0
    return time.perf_counter() - t0, pool


def ptrs(pool, n=2000):
    t0 = time.perf_counter()
    if hasattr(pool, "data_ptrs"):
        for _ in range(n):
            pool.data_ptrs()
    else:
        for _ in range(n):
            [t.data_ptr() for t in pool.k] + [t.data_ptr() for t in pool.v]
    return (time.perf_counter() - t0) / n


def pool_ab(base_root: str, rounds: int) -> None:
    spec = importlib.util.spec_from_file_location(
        "kv_pool_base", f"{base_root}/structgen/runtime/kv_pool.py"
    )
    base_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base_mod)
    res = {(k, m): [] for k in ("fill", "ptrs") for m in "AB"}
    for _, m in alternating("AB", rounds):
        dt, pool = build_and_fill(base_mod if m == "A" else new_mod)
        res["fill", m].append(dt)
        res["ptrs", m].append(ptrs(pool))
        del pool
    print("| measure | A: base | B: this checkout | B / A |\n|---|---|---|---|")
    for k, unit, scale in (("fill", "ms", 1e3), ("ptrs", "us", 1e6)):
        a, b = statistics.median(res[k, "A"]), statistics.median(res[k, "B"])
        print(f"| {k} ({unit}) | {a * scale:.3f} | {b * scale:.3f} | {b / a:.3f} |")


class MallocPool(new_mod.KVPool):
    """Host storage from ``torch.empty`` (glibc ``malloc``), seen as numpy arrays."""

    def _new_array(self, shape):
        bits = torch.int16 if self.dtype_name == "bfloat16" else self.dtype
        t = torch.empty(shape, dtype=self.dtype).view(bits)
        return t.numpy().view(new_mod._HOST_DTYPES[self.dtype_name])


def decode_ab(pairs: int) -> None:
    import structgen
    from structgen.runtime.model_runner import ModelRunner

    eng = structgen.Engine(dtype="float32", prefix_cache=False)
    model, ref = eng.loaded.model, eng.pool
    rng = random.Random(1)
    prompt = [rng.randrange(10, 49000) for _ in range(300)]
    runners = {}
    for name, cls in (("A", MallocPool), ("B", new_mod.KVPool)):
        shape = (ref.num_layers, ref.num_pages, ref.page_size, ref.num_kv_heads, ref.head_dim)
        pool = cls(*shape, ref.dtype_name, "cpu", ref.growth_pages)
        runner = ModelRunner(model, pool, "cpu")
        pages = pool.alloc(-(-(len(prompt) + 1) // pool.page_size))
        runner.forward_logits([prompt], [0], [pages], [len(prompt) - 1])
        runners[name] = (runner, pages)
    times: dict = {k: [] for k in ("A", "B", "cA", "cB")}
    outs = {}
    for rep, name in alternating("AB", pairs, warm_up=True):  # pair 0: warm-up
        runner, pages = runners[name]
        t0, c0 = time.perf_counter(), time.process_time()
        out = runner.forward_logits([[prompt[7]]], [len(prompt)], [pages], [0])
        if rep:
            times[name].append(time.perf_counter() - t0)
            times["c" + name].append(time.process_time() - c0)
        outs[name] = out.copy()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"decode step b1, 300-token context, {pairs} A/B pairs: wall A {med['A'] * 1e3:.2f} "
        f"B {med['B'] * 1e3:.2f} ms (B/A {med['B'] / med['A']:.3f}); process CPU "
        f"A {med['cA'] * 1e3:.2f} B {med['cB'] * 1e3:.2f} ms (B/A {med['cB'] / med['cA']:.3f}); "
        f"logits equal {np.array_equal(outs['A'], outs['B'])}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base_root", nargs="?")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--decode-pairs", type=int, default=0)
    args = ap.parse_args()
    if args.decode_pairs:
        decode_ab(args.decode_pairs)
    elif args.base_root:
        pool_ab(args.base_root, args.rounds)
    else:
        ap.error("need BASE_ROOT or --decode-pairs")


if __name__ == "__main__":
    main()
