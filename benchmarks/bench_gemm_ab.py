"""A/B of two builds of the Q4 x Q8 prefill matmul: a saved ``_qkernel`` .so vs the current one.

For a kernel change under the batch-invariance rule: each shape is first checked bit for bit
(``torch.equal``) between the two builds for M = 1..17 and the full M, then both are timed
interleaved 7 times on one thread (``time.thread_time``, medians). Random data, seeded;
``int4_mm`` with fp16 scales and mins, group 32, int8 activations (the default engine's prefill).

    cp structgen/runtime/cpu/_qkernel*.so /tmp/old.so   # before the change
    python setup.py -q build_ext --inplace              # after it
    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_gemm_ab.py /tmp/old.so
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time

import torch

import structgen.runtime.cpu._qkernel as new

SHAPES = [(256, 3072, 576), (256, 576, 1536), (256, 960, 576), (256, 576, 576)]


def load(path: str):
    """The extension module built at ``path`` (a second copy of ``_qkernel``)."""
    spec = importlib.util.spec_from_file_location("structgen.runtime.cpu._qkernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def call(lib, x, q, s, mn) -> torch.Tensor:
    """``[M, N]`` float32 int4_mm of x ``[M, K]`` fp32 with q ``[N, K/2]`` uint8, one thread."""
    m, k = x.shape
    n = q.shape[0]
    y = torch.empty(m, n)
    args = (x, q, s, mn, y)
    lib.int4_mm(*(t.data_ptr() for t in args), m, n, k, 32, 1, 1, 1)
    return y


def main() -> None:
    old = load(sys.argv[1])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print("| M x N x K | old ms | new ms | new / old | bit-equal M=1..17, M |")
    print("|---|---|---|---|---|")
    for m, n, k in SHAPES:
        x = torch.randn(m, k)
        q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8)
        s = (torch.rand(n, k // 32) * 0.01).half()
        mn = (-torch.rand(n, k // 32) * 0.01).half()
        rows = [*range(1, 18), m]
        eq = all(torch.equal(call(old, x[:r], q, s, mn), call(new, x[:r], q, s, mn)) for r in rows)
        a, b = [], []
        for _ in range(7):
            t = time.thread_time()
            call(old, x, q, s, mn)
            a.append(time.thread_time() - t)
            t = time.thread_time()
            call(new, x, q, s, mn)
            b.append(time.thread_time() - t)
        ta, tb = statistics.median(a), statistics.median(b)
        print(f"| {m}x{n}x{k} | {ta * 1e3:.1f} | {tb * 1e3:.1f} | {tb / ta:.2f} | {eq} |")


if __name__ == "__main__":
    main()
