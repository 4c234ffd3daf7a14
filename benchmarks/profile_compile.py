"""Per-schema compile time of ``compile_json_schema`` on bench_grammar's sample (CPU time).

Measures, for each schema of ``bench_grammar.load_sample(per_subset, 1)``, the process
time of ``compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)``
after ``clear_cache()`` (as bench_grammar's ``Structgen.compile``) and of the first mask,
repeated ``--repeat`` times (the minimum per schema is kept: this machine is shared).
Prints p50 / p90 / max and the slowest schemas; ``--profile`` adds a cProfile of one
pass sorted by cumulative time.

Run:  python benchmarks/profile_compile.py [--per-subset 12] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grammar import load_sample, smollm2_tokenizer  # noqa: E402


def measure(sample, vocab, repeat: int):
    """Min over ``repeat`` passes of (compile s, first-mask s) per compiled schema."""
    from structgen.fsm import clear_cache, compile_json_schema

    best: dict[str, list[float]] = {}
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    for _ in range(repeat):
        for sub, name, schema, _ in sample:
            clear_cache()
            try:
                t0 = time.process_time()
                g = compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)
                t1 = time.process_time()
                g.matcher().fill_bitmask(buf, 0)
                t2 = time.process_time()
            except Exception:  # noqa: BLE001 - the bench skips what does not compile
                continue
            key = f"{sub}/{name}"
            old = best.get(key)
            best[key] = (
                [t1 - t0, t2 - t1] if old is None else [min(old[0], t1 - t0), min(old[1], t2 - t1)]
            )
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-subset", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    from structgen.fsm import Vocabulary

    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer())
    sample = load_sample(args.per_subset, 1)
    best = measure(sample, vocab, args.repeat)
    comp = np.array([v[0] for v in best.values()]) * 1e3
    first = np.array([v[1] for v in best.values()]) * 1e3
    print(
        f"{len(best)}/{len(sample)} compiled; compile ms p50 {np.percentile(comp, 50):.2f} "
        f"p90 {np.percentile(comp, 90):.2f} max {comp.max():.1f}; first mask ms p50 "
        f"{np.percentile(first, 50):.2f} p90 {np.percentile(first, 90):.2f} max {first.max():.1f}"
    )
    for key, (c, f) in sorted(best.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"  {c * 1e3:8.1f} ms compile {f * 1e3:8.1f} ms first mask  {key}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        measure(sample, vocab, 1)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
