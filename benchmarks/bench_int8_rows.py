"""A/B of the Q8_0 lm_head's kernels in one process: another build's int8 x Q8 row kernel
(``--base SO``, a ``_qkernel`` shared object compiled from another tree, e.g. main's, loaded beside
this tree's: ``int8_mm(..., q8=1)``, csrc/qkernel_rows.h, on its VNNI path where the CPU has
AVX-VNNI) against this tree's int8 tile kernel (``int8t_mm``, csrc/qkernel_i8tiles.h) with AMX
off (AVX-VNNI, or AVX2) and on (AMX from 5 rows, where the CPU has it). The tile kernel's two
paths are checked equal bit for bit; against the row kernel (another float summation order) the
largest difference relative to the output's scale is printed.

One thread, ``time.thread_time`` (what load on shared cores distorts least), the variants
interleaved 7 times (order reversed every other round; each variant its own copy of the weight,
so none reads another's bytes from the caches), medians, each sample ``reps`` calls (at least
~8 x 49152 x 576 MACs) of the extension's function itself on data pointers. Random data,
seeded; int8 weights with fp16 scales per 32 (GGUF Q8_0, the packaged model's lm_head:
SmolLM2's 49152 x 576 tied embedding) at M = 1, 2, 4, 8, 16, 64 activation rows (or those
given).

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


def bench(m: int, n: int, k: int, base) -> tuple[list[float], float, bool]:
    """Median thread seconds per call of (base rows, tiles without AMX, tiles with AMX), the
    largest |tiles - rows| over max |rows|, and whether AMX ran (the CPU has it and m >= 5:
    I8T_AMX_MIN_M)."""
    from structgen.runtime.quantization.formats import int8_scale_tiles, pack_int8_tiles

    lib = Q._lib
    x = torch.randn(m, k)
    q = torch.randint(-128, 128, (n, k), dtype=torch.int8)
    s = (torch.rand(n, k // 32) * 0.01).half()
    qt, st = pack_int8_tiles(q), int8_scale_tiles(s)
    # each variant its own copy of the weight: none reads what another left in the caches
    copies = [(qt, st), (qt.clone(), st.clone())]
    ys = [torch.empty(m, n) for _ in range(3)]

    def rows(y):
        base.int8_mm(x.data_ptr(), q.data_ptr(), s.data_ptr(), y.data_ptr(), m, n, k, 32, 1, 1, 1)

    def tiles(y, amx):
        lib.set_amx(amx)
        wq, ws = copies[int(amx)]
        lib.int8t_mm(x.data_ptr(), wq.data_ptr(), ws.data_ptr(), y.data_ptr(), m, n, k, 32, 1)

    fns = [lambda: rows(ys[0]), lambda: tiles(ys[1], False), lambda: tiles(ys[2], True)]
    for fn in fns:
        fn()
    amx = bool(lib.set_amx(True)) and m >= 5
    assert torch.equal(ys[1], ys[2])  # the tile kernel's paths agree bit for bit
    assert torch.equal(ys[2], Q.int8t_mm(x, qt, st, 32, n))
    diff = float((ys[2] - ys[0]).abs().max() / ys[0].abs().max())
    reps = max(1, (8 * 49152 * 576) // (m * n * k))
    times: list[list[float]] = [[] for _ in fns]
    for r in range(7):  # the order reversed every other round
        for fn, out in list(zip(fns, times))[:: 1 if r % 2 == 0 else -1]:
            t = time.thread_time()
            for _ in range(reps):
                fn()
            out.append((time.thread_time() - t) / reps)
    lib.set_amx(True)
    return [statistics.median(t) for t in times], diff, amx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="*", type=int, help=f"activation rows M (default {ROWS})")
    ap.add_argument("--base", required=True, help="a _qkernel shared object (the A side)")
    args = ap.parse_args()
    base = load_base(args.base)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    Q.set_threads(1)
    base.set_vnni(True)
    n, k = SHAPE
    print(
        "| M | N x K | base rows ms (GMAC/s) | tiles, no AMX ms (GMAC/s) | speed-up "
        "| tiles ms (GMAC/s) | speed-up | path | max diff / max |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for m in args.rows or ROWS:
        t, diff, amx = bench(m, n, k, base)
        g = m * n * k / 1e9
        row = f"| {m} | {n}x{k} | {t[0] * 1e3:.2f} ({g / t[0]:.1f}) "
        for b in t[1:]:
            row += f"| {b * 1e3:.2f} ({g / b:.1f}) | {t[0] / b:.2f}x "
        vnni = "VNNI" if Q._lib.vnni() else "AVX2"
        print(row + f"| {'AMX' if amx else vnni} | {diff:.1e} |")


if __name__ == "__main__":
    main()
