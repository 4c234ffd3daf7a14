"""A/B of two builds of the Q4 x Q8 matmul: a saved ``_qkernel`` .so vs the current one.

Each shape is first compared between the two builds for M = 1..17 and the full M (bit-equal, or
the largest difference relative to the largest output where a change moves bits on purpose),
then both are timed interleaved 7 times on one thread (``time.thread_time``, medians, each
sample ``reps`` calls). Random data, seeded; ``int4_mm`` with fp16 scales and mins, group 32, int8
activations (the default engine's matmuls): SmolLM2-135M's gate/up, down, qkv and o at M = 256
(prefill chunks), its gate/up and down at M = 1, 8 and 64 (decode batches).

Builds before and after the int4 tile table (#21) are both read: the old one takes ``scales,
mins`` pointers, the new one the tile table (``formats.int4_scale_tiles``).

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
from structgen.runtime.quantization.formats import int4_scale_tiles

SHAPES = [(256, 3072, 576), (256, 576, 1536), (256, 960, 576), (256, 576, 576)]
SHAPES += [(m, n, k) for m in (1, 8, 64) for n, k in ((3072, 576), (576, 1536))]


def load(path: str):
    """The extension module built at ``path`` (a second copy of ``_qkernel``)."""
    spec = importlib.util.spec_from_file_location("structgen.runtime.cpu._qkernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def call(lib, x, q, s, mn, tiles) -> torch.Tensor:
    """``[M, N]`` float32 int4_mm of x ``[M, K]`` fp32 with q ``[N, K/2]`` uint8, one thread."""
    m, k = x.shape
    n = q.shape[0]
    y = torch.empty(m, n)
    tables = (tiles,) if "tiles" in lib.int4_mm.__doc__ else (s, mn)
    args = (x, q, *tables, y)
    lib.int4_mm(*(t.data_ptr() for t in args), m, n, k, 32, 1, 1, 1)
    return y


def main() -> None:
    old = load(sys.argv[1])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print("| M x N x K | old ms | new ms | new / old | M=1..17, M: bit-equal or max rel. diff |")
    print("|---|---|---|---|---|")
    for m, n, k in SHAPES:
        x = torch.randn(m, k)
        q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8)
        s = (torch.rand(n, k // 32) * 0.01).half()
        mn = (-torch.rand(n, k // 32) * 0.01).half()
        tiles = int4_scale_tiles(s, mn)
        args = (q, s, mn, tiles)
        diff = 0.0
        for r in [*range(1, 18), m]:
            a, b = call(old, x[:r], *args), call(new, x[:r], *args)
            diff = max(diff, float((a - b).abs().max() / a.abs().max()))
        eq = "True" if diff == 0 else f"{diff:.1e}"
        reps = max(1, 256 // m)
        ta, tb = [], []
        for _ in range(7):
            for lib, out in ((old, ta), (new, tb)):
                t = time.thread_time()
                for _ in range(reps):
                    call(lib, x, *args)
                out.append((time.thread_time() - t) / reps)
        a, b = statistics.median(ta), statistics.median(tb)
        print(f"| {m}x{n}x{k} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.2f} | {eq} |")


if __name__ == "__main__":
    main()
