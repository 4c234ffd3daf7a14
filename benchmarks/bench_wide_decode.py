"""Decode steps over 8 rows, in one process, interleaved, greedy tokens checked identical: the fused
CPU step in one call of up to ``MAX_STEP_ROWS`` (64) rows (now), the fused step in calls of 8 rows
(session 22's rule: ``decode_step.MAX_STEP_ROWS`` patched to 8) and, with ``--per-op``, the per-op
path over 8 rows (the rule before that: ``decode_step`` returns None over 8 tokens; slow).

    PYTHONPATH=. python benchmarks/bench_wide_decode.py [--requests 32] [--max-tokens 24]
        [--repeats 3] [--per-op]

``--steps N``: decode steps alone instead of ``generate`` (the default engine's model under
``PagedSequences``, ``--requests`` sequences prefilled to 20-26 tokens, then N steps of each rule
alternating), the medians of one step's time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import structgen.runtime.models.decoder as decoder
from structgen import Engine, SamplingParams
from structgen.runtime.cpu import decode_step

FUSED = decoder.decode_step
ONE_CALL = decode_step.MAX_STEP_ROWS


def _per_op_over_8(model, residual, *args, **kwargs):
    return None if residual.shape[0] > 8 else FUSED(model, residual, *args, **kwargs)


def _steps(engine, n: int, reps: int) -> None:
    import torch

    from structgen.runtime.models.testing import PagedSequences

    model = engine.runner.model
    seqs = PagedSequences(model, num_pages=2048, page_size=16)
    out = seqs.step({s: [(13 * s + j) % 1000 + 1 for j in range(20 + s % 7)] for s in range(n)})
    last = {s: int(out[s].argmax()) for s in out}
    times: dict[int, list[float]] = {8: [], ONE_CALL: []}
    with torch.inference_mode():
        for _ in range(reps):
            for rows in times:
                decode_step.MAX_STEP_ROWS = rows
                t0 = time.perf_counter()
                out = seqs.step({s: [last[s]] for s in range(n)})
                times[rows].append(time.perf_counter() - t0)
                last = {s: int(out[s].argmax()) for s in out}
    decode_step.MAX_STEP_ROWS = ONE_CALL
    a, b = statistics.median(times[8]), statistics.median(times[ONE_CALL])
    print(
        f"{n} rows, {reps} steps a rule: calls of 8 rows {a * 1e3:.1f} ms, one call "
        f"{b * 1e3:.1f} ms (medians), one call / calls of 8: {b / a:.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--per-op", action="store_true", help="also the per-op path over 8 rows")
    ap.add_argument("--steps", type=int, default=0, help="time N decode steps a rule instead")
    args = ap.parse_args()
    engine = Engine(prefix_cache=False)
    if args.steps:
        _steps(engine, args.requests, args.steps)
        return
    prompts = [
        [{"role": "user", "content": f"Write a short story number {i} about a cat."}]
        for i in range(args.requests)
    ]
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, ignore_eos=True)
    paths = {"fused calls of 8 rows": (FUSED, 8), "fused one call": (FUSED, ONE_CALL)}
    if args.per_op:
        paths = {"per-op over 8 rows": (_per_op_over_8, ONE_CALL), **paths}
    times: dict[str, list[float]] = {name: [] for name in paths}
    tokens = {}
    for _ in range(args.repeats):
        for name, (step, rows) in paths.items():
            decoder.decode_step, decode_step.MAX_STEP_ROWS = step, rows
            t0 = time.perf_counter()
            outs = engine.generate(prompts, params)
            times[name].append(time.perf_counter() - t0)
            tokens[name] = [o.token_ids for o in outs]
    decoder.decode_step, decode_step.MAX_STEP_ROWS = FUSED, ONE_CALL
    print("greedy tokens identical:", len({str(t) for t in tokens.values()}) == 1)
    print("| path | runs (s) | median (s) |\n|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {', '.join(f'{t:.2f}' for t in ts)} | {statistics.median(ts):.2f} |")
    base = statistics.median(times["fused calls of 8 rows"])
    print(f"one call / calls of 8: {statistics.median(times['fused one call']) / base:.3f}")


if __name__ == "__main__":
    main()
