"""Per-thread speed of the Q4 x Q8 prefill matmul against float32 BLAS on the same shapes.

One thread, ``time.thread_time`` (what load on shared cores distorts least), the two
interleaved 7 times, medians: ``structgen.runtime.cpu.quant.int4_mm(..., q8=True)`` (the
default engine's prefill path: GGUF Q4_1-style int4 rows, int8 activations) vs
``F.linear`` in float32 (what transformers' float32 prefill runs), random data, seeded.
Shapes default to SmolLM2-135M's at a 256-token chunk.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_prefill_gemm.py [M N K ...]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
import torch.nn.functional as F

import structgen.runtime.cpu.quant as Q
from structgen.runtime.quantization.formats import int4_scale_tiles

SHAPES = [(256, 3072, 576), (256, 576, 1536), (256, 960, 576), (256, 576, 576)]


def bench(m: int, n: int, k: int, reps: int = 7) -> tuple[float, float]:
    """Median thread seconds of (int4 Q8 kernel, fp32 BLAS) for x [m, k] @ W[n, k].T."""
    x = torch.randn(m, k)
    q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8)
    s = (torch.rand(n, k // 32) * 0.01).half()
    mn = (-torch.rand(n, k // 32) * 0.01).half()
    tiles = int4_scale_tiles(s, mn)  # made once per weight, as QuantLinear.scale_tiles
    w = torch.randn(n, k)
    a, b = [], []
    for _ in range(reps):
        t = time.thread_time()
        Q.int4_mm(x, q, s, mn, 32, True, tiles)
        a.append(time.thread_time() - t)
        t = time.thread_time()
        F.linear(x, w)
        b.append(time.thread_time() - t)
    return statistics.median(a), statistics.median(b)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    Q.set_threads(1)
    args = [int(v) for v in sys.argv[1:]]
    shapes = [tuple(args[i : i + 3]) for i in range(0, len(args), 3)] or SHAPES
    print("| M x N x K | Q4xQ8 kernel ms (GMAC/s) | fp32 BLAS ms (GMAC/s) | kernel / BLAS time |")
    print("|---|---|---|---|")
    for m, n, k in shapes:
        a, b = bench(m, n, k)
        g = m * n * k / 1e9
        print(
            f"| {m}x{n}x{k} | {a * 1e3:.1f} ({g / a:.1f}) | "
            f"{b * 1e3:.1f} ({g / b:.1f}) | {a / b:.2f} |"
        )


if __name__ == "__main__":
    main()
