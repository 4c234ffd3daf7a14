"""The C paged attention of a decode step, this build against another, interleaved in one process.

SmolLM2-135M's attention shape (9 query heads on 3 KV heads, head_dim 64, 30 layers, pages of
16): R decode rows, each at position C, through ``_cpuops.paged_attention`` of this tree and of
``--base`` (another build of ``structgen.runtime.cpu._cpuops``, e.g. main's ``.so``). Each timed
sample runs all 30 layers (30 separate caches, so the K/V stream from memory as in a real step,
not from the cache of the previous call). ``--shared P``: the rows share their first P positions'
pages (a common prompt prefix through the radix cache), the rest their own; ``--spread S``: row r
at position C + (37 r mod S) instead (own suffixes of different lengths). Outputs of the two
builds are checked equal bit for bit. One thread's CPU time per sample, medians of ``--rounds``
alternating rounds; the ratio base / this is the speed-up. ``--prefill 128,512``: instead, one
prompt of T tokens prefilled in one call (token t at position t, keys 0 .. t: the triangle).

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_paged_attention_ab.py \\
        --base /work/wt-a3-base/structgen/runtime/cpu/_cpuops.cpython-311-x86_64-linux-gnu.so \\
        [--rows 1,8,64] [--contexts 100,450] [--shared 0] [--spread 1] [--dtype fp32|bf16]
        [--rounds 9]
        [--prefill 128,512]
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.support import interleaved_rounds, load_extension, medians

H, KVH, D, LAYERS, PS = 9, 3, 64, 30, 16
_DT = {torch.float32: 0, torch.bfloat16: 1}


def _layers(rows: int, num_pages: int, dtype: torch.dtype, g: torch.Generator):
    """Per layer, ``[rows, H * D]`` queries and ``[num_pages * PS, KVH, D]`` K and V caches,
    drawn from ``g`` in the order q, k, v of each layer."""
    qs, ks, vs = [], [], []
    for _ in range(LAYERS):
        qs.append(torch.randn(rows, H * D, generator=g).to(dtype))
        ks.append(torch.randn(num_pages * PS, KVH, D, generator=g).to(dtype))
        vs.append(torch.randn(num_pages * PS, KVH, D, generator=g).to(dtype))
    return qs, ks, vs


def _case(rows: int, ctx: int, shared: int, dtype: torch.dtype, spread: int = 1):
    """(q per layer, k per layer, v per layer, page table, seq ids, positions) of one step: row r
    at position ``ctx + 37 r % spread``."""
    g = torch.Generator().manual_seed(rows * 1000 + ctx)
    per_row = (ctx + spread - 1 + PS) // PS  # pages of positions 0 .. the longest row's
    shared_pages = min(shared // PS, per_row)
    own = per_row - shared_pages
    num_pages = shared_pages + rows * own + 1
    perm = torch.randperm(num_pages, generator=g)  # pages scattered as the pool hands them out
    table = torch.zeros(rows, per_row, dtype=torch.int64)
    for r in range(rows):
        table[r, :shared_pages] = perm[:shared_pages]
        table[r, shared_pages:] = perm[shared_pages + r * own : shared_pages + (r + 1) * own]
    qs, ks, vs = _layers(rows, num_pages, dtype, g)
    seq = torch.arange(rows, dtype=torch.int64)
    pos = ctx + torch.arange(rows, dtype=torch.int64) * 37 % spread
    return qs, ks, vs, table, seq, pos


def _prefill_case(tokens: int, dtype: torch.dtype):
    """(q, k, v per layer, page table, seq ids, positions) of one prompt of ``tokens`` prefilled
    in one call: token t at position t."""
    g = torch.Generator().manual_seed(tokens)
    num_pages = (tokens + PS - 1) // PS + 1
    table = torch.randperm(num_pages, generator=g)[None, :].contiguous()
    qs, ks, vs = _layers(tokens, num_pages, dtype, g)
    seq = torch.zeros(tokens, dtype=torch.int64)
    return qs, ks, vs, table, seq, torch.arange(tokens, dtype=torch.int64)


def _step(ext, case, outs) -> float:
    """Thread time (ms) of the 30 layers' attention of one step through ``ext``."""
    qs, ks, vs, table, seq, pos = case
    rows = seq.shape[0]
    t0 = time.thread_time()
    for q, k, v, o in zip(qs, ks, vs, outs):
        ext.paged_attention(
            q.data_ptr(), q.stride(0), k.data_ptr(), v.data_ptr(), table.data_ptr(),
            table.stride(0), seq.data_ptr(), pos.data_ptr(), PS, rows, H, KVH, D,
            D**-0.5, 0, o.data_ptr(), _DT[q.dtype] | _DT[k.dtype] << 8, 1,
        )  # fmt: skip
    return (time.thread_time() - t0) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the other build's _cpuops .so")
    ap.add_argument("--rows", default="1,8,64")
    ap.add_argument("--contexts", default="100,450")
    ap.add_argument("--shared", type=int, default=0, help="positions of a shared prefix")
    ap.add_argument("--spread", type=int, default=1, help="row r at context + 37 r mod spread")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--prefill", default="", help="prompt lengths T: prefill cases instead")
    args = ap.parse_args()
    from structgen.runtime.cpu import _cpuops as new

    base = load_extension(args.base, "structgen.runtime.cpu._cpuops")
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    if args.prefill:
        print(f"| prefill tokens | {args.dtype} base ms | this ms | speed-up |")
        print("|---|---|---|---|")
        cases = [(f"{t}", _prefill_case(t, dtype)) for t in map(int, args.prefill.split(","))]
    else:
        print(f"| rows | context (spread) | shared | {args.dtype} base ms | this ms | speed-up |")
        print("|---|---|---|---|---|---|")
        cases = [
            (
                f"{rows} | {ctx} ({args.spread}) | {args.shared}",
                _case(rows, ctx, min(args.shared, ctx), dtype, args.spread),
            )
            for rows in map(int, args.rows.split(","))
            for ctx in map(int, args.contexts.split(","))
        ]
    exts = {"b": base, "n": new}
    for label, case in cases:
        rows = case[4].shape[0]
        outs = {e: [torch.empty(rows, H, D, dtype=dtype) for _ in range(LAYERS)] for e in "bn"}
        times = interleaved_rounds(
            "bn",
            args.rounds,
            lambda key, case=case, outs=outs: _step(exts[key], case, outs[key]),
            warm_up=True,
        )
        if not all(torch.equal(a, b) for a, b in zip(outs["b"], outs["n"])):
            raise SystemExit(f"{label}: outputs differ between the builds")
        mb, mn = medians(times).values()
        print(f"| {label} | {mb:.2f} | {mn:.2f} | {mb / mn:.2f}x |")


if __name__ == "__main__":
    main()
