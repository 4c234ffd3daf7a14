"""A/B of the int8 x Q8 row kernel (``_qkernel.int8_mm(..., q8=1)``, csrc/qkernel_rows.h) in one
process: another build's kernel (``--base SO``, a ``_qkernel`` shared object compiled from another
tree, e.g. main's, loaded beside this tree's) against this tree's, on its AVX2 path and (where the
CPU has AVX-VNNI) its VNNI path, results checked equal bit for bit.

One thread, ``time.thread_time`` (what load on shared cores distorts least), the variants
interleaved 7 times, medians, each sample ``reps`` calls (at least ~8 x 49152 x 576 MACs) of the
extension's function itself on data pointers. Random data, seeded; int8 weights with fp16 scales
per 32 (GGUF Q8_0, the packaged model's lm_head: SmolLM2's 49152 x 576 tied embedding) at
M = 1, 2, 4, 8, 16, 64 activation rows.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_int8_rows.py --base SO [M ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time

import torch

import structgen.runtime.cpu.quant as Q

SHAPE = (49152, 576)  # N x K
ROWS = [1, 2, 4, 8, 16, 64]


def load_base(path: str):
    """The ``_qkernel`` extension module in the shared object ``path`` (another build)."""
    spec = importlib.util.spec_from_file_location("k4_base._qkernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(m: int, n: int, k: int, base, vnni: bool) -> tuple[list[float], int]:
    """Median thread seconds per call of (base, this AVX2[, this VNNI]) and calls per sample."""
    lib = Q._lib
    x = torch.randn(m, k)
    q = torch.randint(-128, 128, (n, k), dtype=torch.int8)
    s = (torch.rand(n, k // 32) * 0.01).half()
    ys = [torch.empty(m, n) for _ in range(3)]

    def call(mod, y, use_vnni=None):
        if use_vnni is not None:
            lib.set_vnni(use_vnni)
        mod.int8_mm(x.data_ptr(), q.data_ptr(), s.data_ptr(), y.data_ptr(), m, n, k, 32, 1, 1, 1)

    fns = [lambda: call(base, ys[0]), lambda: call(lib, ys[1], False)]
    if vnni:
        fns.append(lambda: call(lib, ys[2], True))
    for fn in fns:
        fn()
    for y in ys[1 : len(fns)]:
        assert torch.equal(y, ys[0])  # the same arithmetic: old and new kernels agree bit for bit
    assert torch.equal(ys[0], Q.int8_mm(x, q, s, q8=True))
    reps = max(1, (8 * 49152 * 576) // (m * n * k))
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(7):
        for fn, out in zip(fns, times):
            t = time.thread_time()
            for _ in range(reps):
                fn()
            out.append((time.thread_time() - t) / reps)
    lib.set_vnni(True)
    return [statistics.median(t) for t in times], reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="*", type=int, help=f"activation rows M (default {ROWS})")
    ap.add_argument("--base", required=True, help="a _qkernel shared object (the A side)")
    args = ap.parse_args()
    base = load_base(args.base)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    Q.set_threads(1)
    vnni = bool(Q._lib.set_vnni(True))
    n, k = SHAPE
    head = "| M | N x K | base ms (GMAC/s) | AVX2 ms (GMAC/s) | AVX2 speed-up |"
    print(head + (" VNNI ms (GMAC/s) | VNNI speed-up |" if vnni else ""))
    print("|---|---|---|---|---|" + ("---|---|" if vnni else ""))
    for m in args.rows or ROWS:
        t, _ = bench(m, n, k, base, vnni)
        g = m * n * k / 1e9
        row = f"| {m} | {n}x{k} | {t[0] * 1e3:.2f} ({g / t[0]:.1f}) "
        for b in t[1:]:
            row += f"| {b * 1e3:.2f} ({g / b:.1f}) | {t[0] / b:.2f}x "
        print(row + "|")


if __name__ == "__main__":
    main()
