"""A/B of the two Q4 x Q8 matmuls in one process: the int4 "rows" kernel (``int4_mm(...,
q8=True)``, one weight row per vector lane group, a horizontal sum per output) against the int4
tile kernel (``int4t_mm``, 8 output columns per vector, csrc/qkernel_tiles.h).

One thread, ``time.thread_time`` (what load on shared cores distorts least), the two interleaved
7 times, medians, each sample ``reps`` calls (at least ~256 x 576 x 576 MACs) of the extension's
functions themselves (``_qkernel.int4_mm`` / ``int4t_mm`` on data pointers, so the Python
wrappers' argument checks are not timed; the Python results are checked equal). Random data,
seeded; fp16 scales and mins, group 32 (GGUF Q4_1, the packaged model's format). Shapes:
SmolLM2-135M's gate/up, down, qkv, o and k/v projections at M = 1, 4, 8, 16, 64, 256.

With ``--base SO`` the A side is instead the tile kernel of another build of the extension (a
``_qkernel`` shared object compiled from another tree, e.g. main's, loaded beside this tree's):
the same calls, old kernel against new in one process, results checked equal bit for bit.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_int4_tiles.py [--base SO] [M ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time

import torch

import structgen.runtime.cpu.quant as Q
from structgen.runtime.quantization.formats import int4_scale_tiles, pack_int4_tiles

SHAPES = [(3072, 576), (576, 1536), (960, 576), (576, 576), (192, 576)]  # N x K
ROWS = [1, 4, 8, 16, 64, 256]


def load_base(path: str):
    """The ``_qkernel`` extension module in the shared object ``path`` (another build)."""
    spec = importlib.util.spec_from_file_location("k2_base._qkernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(m: int, n: int, k: int, base=None) -> tuple[float, float, int]:
    """Median thread seconds per call of (rows kernel, or ``base``'s tile kernel; this tree's tile
    kernel) and the calls per sample."""
    x = torch.randn(m, k)
    q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8)
    qt = pack_int4_tiles(q)
    s = (torch.rand(n, k // 32) * 0.01).half()
    mn = (-torch.rand(n, k // 32) * 0.01).half()
    tiles = int4_scale_tiles(s, mn)  # made once per weight, as QuantLinear.scale_tiles
    ya, yb = torch.empty(m, n), torch.empty(m, n)
    ptr = [t.data_ptr() for t in (x, q, qt, tiles, ya, yb)]
    lib = Q._lib

    def rows_kernel():
        if base is not None:
            base.int4t_mm(ptr[0], ptr[2], ptr[3], ptr[4], m, n, k, 32, 1, 1, 1)
        else:
            lib.int4_mm(ptr[0], ptr[1], ptr[3], ptr[4], m, n, k, 32, 1, 1, 1)

    def tile_kernel():
        lib.int4t_mm(ptr[0], ptr[2], ptr[3], ptr[5], m, n, k, 32, 1, 1, 1)

    rows_kernel(), tile_kernel()
    assert torch.equal(yb, Q.int4t_mm(x, qt, s, mn, 32, True, tiles))
    if base is not None:
        assert torch.equal(ya, yb)  # the same arithmetic: old and new kernels agree bit for bit
    else:
        assert torch.equal(ya, Q.int4_mm(x, q, s, mn, 32, True, tiles))
    reps = max(1, (256 * 576 * 576) // (m * n * k))
    ta, tb = [], []
    for _ in range(7):
        for fn, out in ((rows_kernel, ta), (tile_kernel, tb)):
            t = time.thread_time()
            for _ in range(reps):
                fn()
            out.append((time.thread_time() - t) / reps)
    return statistics.median(ta), statistics.median(tb), reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="*", type=int, help=f"activation rows M (default {ROWS})")
    ap.add_argument("--base", help="a _qkernel shared object whose tile kernel is the A side")
    args = ap.parse_args()
    base = load_base(args.base) if args.base else None
    torch.manual_seed(0)
    torch.set_num_threads(1)
    Q.set_threads(1)
    a_name = "base tile kernel" if base is not None else "rows kernel"
    print(f"| M | N x K | {a_name} ms (GMAC/s) | tile kernel ms (GMAC/s) | speed-up |")
    print("|---|---|---|---|---|")
    for m in args.rows or ROWS:
        for n, k in SHAPES:
            a, b, _ = bench(m, n, k, base)
            g = m * n * k / 1e9
            print(
                f"| {m} | {n}x{k} | {a * 1e3:.3f} ({g / a:.1f}) | {b * 1e3:.3f} ({g / b:.1f}) "
                f"| {a / b:.2f}x |"
            )


if __name__ == "__main__":
    main()
