"""The int4 tile kernel's AMX path against its AVX2 / AVX-VNNI path, one process, same inputs.

Times ``cpu_quant.int4t_mm`` (int8 activations) with ``_qkernel.set_amx(True)`` and
``set_amx(False)`` interleaved, best of ``--repeats`` rounds of ``--iters`` calls each, at the
packaged model's matmul shapes (or ``--shapes NxK ...``) and several row counts M (prefill chunks
and wide decode steps), checks the two results equal bit for bit, and prints a table with GMAC/s
and the ratio. Needs a CPU with AMX-INT8 (Intel Sapphire Rapids or later) under Linux; exits with
a message otherwise.

    OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_int4_amx.py [--threads 2]

``--against PATH ...`` also times other builds of the kernel module (``_qkernel*.so`` files, e.g. of
another commit's csrc/, built with the same flags) on their AMX path in the same rounds, checks each
gives this build's floats, and adds a column "this / build i" (> 1: that build is slower).

``--ttft N`` instead times the default engine's prefill of an N-token prompt (``max_tokens=1``,
greedy, the time to the first token) with this build's AMX path and each ``--against`` build's in
turn, ``--repeats`` interleaved rounds (the KV cache flushed before each), and checks the first
token and its top-5 log-probabilities are the same for every build.

``--clock thread`` times with the calling thread's CPU time (``time.thread_time``) instead of wall
time: on a shared, loaded machine it leaves out the time other processes take the core, and with
``--threads 1`` the calling thread is the only one that runs the kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import torch

from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.quantization.formats import (
    int4_scale_tiles,
    pack_int4_rows,
    pack_int4_tiles,
    quantize_int4,
)

SHAPES = [(3072, 576), (576, 1536), (960, 576), (576, 576)]  # SmolLM2-135M: gate/up, down, qkv, o
ROWS = [16, 32, 64, 256, 512]


def _time(args: tuple, iters: int, clock=time.perf_counter) -> float:
    cpu_quant.int4t_mm(*args)
    t0 = clock()
    for _ in range(iters):
        cpu_quant.int4t_mm(*args)
    return (clock() - t0) / iters


def _ttft(n_tokens: int, builds: dict, repeats: int, clock) -> None:
    """Print the best TTFT of an ``n_tokens`` prompt per build (name -> _qkernel module)."""
    import random

    from structgen import Engine, SamplingParams

    engine = Engine(dtype="float32")
    rng = random.Random(0)
    text = " ".join(str(rng.random()) for _ in range(n_tokens))
    ids = engine.tokenizer.encode(text, add_special_tokens=False)[:n_tokens]
    sp = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, logprobs=5)
    best = {name: float("inf") for name in builds}
    first = {}
    lib = cpu_quant._lib
    try:
        for r in range(repeats + 1):  # round 0 warms up
            for name, mod in builds.items():
                cpu_quant._lib = mod
                engine.flush_cache()
                t0 = clock()
                out = engine.generate([ids], sp)[0]
                dt = clock() - t0
                first.setdefault(name, (out.token_ids, out.logprobs))
                if first[name] != (out.token_ids, out.logprobs):
                    sys.exit(
                        f"{name}: the first token or its log-probabilities changed between runs"
                    )
                if r:
                    best[name] = min(best[name], dt)
    finally:
        cpu_quant._lib = lib
    ref = first["this"]
    for name, got in first.items():
        if got != ref:
            sys.exit(f"{name}: a different first token or log-probabilities than this build")
    print(
        f"TTFT of {len(ids)} tokens, best of {repeats} (first token {ref[0]}, same for every build)"
    )
    for name, t in best.items():
        print(f"| {name} | {t:.3f} s | this / {name} {t / best['this']:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rows", type=int, nargs="+", default=ROWS)
    ap.add_argument(
        "--shapes",
        nargs="+",
        default=[f"{n}x{k}" for n, k in SHAPES],
        help="weight shapes NxK (default: the packaged model's layer matmuls)",
    )
    ap.add_argument("--against", nargs="*", default=[], help="other builds' _qkernel .so files")
    ap.add_argument(
        "--clock",
        choices=["wall", "thread"],
        default="wall",
        help="wall time, or the calling thread's CPU time (with --threads 1 on a loaded machine)",
    )
    ap.add_argument("--ttft", type=int, default=0, help="time the engine's prefill instead")
    args = ap.parse_args()
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    lib = cpu_quant._lib
    others = []
    for path in args.against:
        spec = importlib.util.spec_from_file_location("structgen.runtime.cpu._qkernel", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if mod.set_isa(True) != "avx2" or not mod.set_amx(True):
            sys.exit(f"{path}: no AMX path")
        mod.set_vnni(True)
        others.append(mod)
    if lib is None or lib.set_isa(True) != "avx2" or not lib.set_amx(True):
        sys.exit("no AMX-INT8 here (or AVX2 off, or the kernel refused the tile state)")
    lib.set_vnni(True)  # set_isa turns it off
    cpu_quant.set_threads(args.threads)
    if args.ttft:
        torch.set_num_threads(args.threads)
        builds = {"this": lib} | {f"build {i + 1}": m for i, m in enumerate(others)}
        _ttft(args.ttft, builds, args.repeats, clock)
        return
    print(f"threads {args.threads}, AVX-VNNI {lib.vnni()}, clock {args.clock}")
    extra = "".join(f" build {i + 1} AMX ms | this / build {i + 1} |" for i in range(len(others)))
    print("| N x K | M | AVX2/VNNI ms (GMAC/s) | AMX ms (GMAC/s) | speed-up |" + extra)
    print("|---|---|---|---|---|" + "---|---|" * len(others))
    try:
        shapes = [tuple(int(v) for v in t.split("x")) for t in args.shapes]
    except ValueError:
        ap.error(f"--shapes must be NxK, got {args.shapes}")
    if any(len(t) != 2 or t[0] < 1 or t[1] % 32 for t in shapes):
        ap.error(f"--shapes must be NxK with K a multiple of 32, got {args.shapes}")
    for n, k in shapes:
        q, s, mn = quantize_int4(
            torch.randn(n, k, generator=torch.Generator().manual_seed(n + k)), 32
        )
        tiles = pack_int4_tiles(pack_int4_rows(q))
        st, mt = s.t().contiguous(), mn.t().contiguous()
        tab = int4_scale_tiles(st, mt)
        for m in args.rows:
            x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
            runs = ["amx", "vnni"] + [f"build {i + 1}" for i in range(len(others))]
            best = {r: float("inf") for r in runs}
            outs = {}
            for _ in range(args.repeats):
                for r in runs:
                    if r in ("amx", "vnni"):
                        lib.set_amx(r == "amx")
                    else:  # another build, through the same Python wrapper
                        cpu_quant._lib = others[runs.index(r) - 2]
                    outs[r] = cpu_quant.int4t_mm(x, tiles, st, mt, 32, True, tab)
                    best[r] = min(
                        best[r], _time((x, tiles, st, mt, 32, True, tab), args.iters, clock)
                    )
                    cpu_quant._lib = lib
            lib.set_amx(True)
            if not all(torch.equal(outs["amx"], outs[r]) for r in runs):
                sys.exit(f"AMX, AVX2/VNNI or another build differ at {n}x{k}, M={m}")
            mac = m * n * k / 1e9
            a, v = best["amx"], best["vnni"]
            cells = [
                f"{n}x{k}",
                str(m),
                f"{v * 1e3:.3f} ({mac / v:.0f})",
                f"{a * 1e3:.3f} ({mac / a:.0f})",
            ]
            for i in range(len(others)):
                o = best[f"build {i + 1}"]
                cells += [f"{o * 1e3:.3f}", f"{o / a:.2f}x"]
            cells.insert(4, f"{v / a:.2f}x")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
