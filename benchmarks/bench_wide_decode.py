"""Decode steps over 8 rows: the fused CPU step in chunks of 8 rows (now) against the per-op path
(the previous rule, patched in: ``decode_step`` returns None over 8 tokens), in one process,
interleaved, greedy tokens checked identical.

    PYTHONPATH=. python benchmarks/bench_wide_decode.py [--requests 32] [--max-tokens 24]
        [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import structgen.runtime.models.decoder as decoder
from structgen import Engine, SamplingParams

FUSED = decoder.decode_step


def _per_op_over_8(model, residual, *args, **kwargs):
    return None if residual.shape[0] > 8 else FUSED(model, residual, *args, **kwargs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    engine = Engine(prefix_cache=False)
    prompts = [
        [{"role": "user", "content": f"Write a short story number {i} about a cat."}]
        for i in range(args.requests)
    ]
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, ignore_eos=True)
    times: dict[str, list[float]] = {"per-op over 8 rows": [], "fused chunks of 8": []}
    tokens = {}
    for _ in range(args.repeats):
        for name, step in zip(times, (_per_op_over_8, FUSED)):
            decoder.decode_step = step
            t0 = time.perf_counter()
            outs = engine.generate(prompts, params)
            times[name].append(time.perf_counter() - t0)
            tokens[name] = [o.token_ids for o in outs]
    decoder.decode_step = FUSED
    print("greedy tokens identical:", len({str(t) for t in tokens.values()}) == 1)
    print("| path | runs (s) | median (s) |\n|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {', '.join(f'{t:.2f}' for t in ts)} | {statistics.median(ts):.2f} |")
    a, b = (statistics.median(ts) for ts in times.values())
    print(f"fused/per-op: {b / a:.3f}")


if __name__ == "__main__":
    main()
