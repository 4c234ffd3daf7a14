"""Cold-empty compile CPU of two checkouts in one process, every arm loaded the same way.

The baseline is loaded twice for an A/A; each pass compiles every workload once per engine
in a rotated order after the engine's untimed cold-empty ``reset``, timed with
``time.thread_time``. This checkout is loaded under its own name too (``structgen_new``,
cold_ab's loader), not run as ``structgen``: all three arms take the same path through
``_StructgenOf.compile`` (its ``sys.modules`` swap included), so the A/A and the A/B
measure the same harness. Reports per workload the
median and least compile ms of each arm, old / new and old / old2 (the A/A).

    PYTHONPATH=. python benchmarks/compile_cold_ab.py --baseline /work/wt-base
        [--passes 31] [--only nested,recursive] [--tokenizer smollm2|bpe150k]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--new", default=str(ROOT), help="the checkout to compare (default: this)")
    ap.add_argument("--passes", type=int, default=31)
    ap.add_argument("--only", default="nested,recursive")
    ap.add_argument("--tokenizer", default="smollm2", choices=["smollm2", "bpe150k"])
    args = ap.parse_args()
    tok = bg.smollm2_tokenizer() if args.tokenizer == "smollm2" else bg.bpe_150k_tokenizer()
    ca._load_checkout("structgen_base", Path(args.baseline))
    ca._load_checkout("structgen_base2", Path(args.baseline))
    ca._load_checkout("structgen_new", Path(args.new))
    engines = {
        "old": ca._StructgenOf("old", "structgen_base", tok),
        "old2": ca._StructgenOf("old2", "structgen_base2", tok),
        "new": ca._StructgenOf("new", "structgen_new", tok),
    }
    cases = json.loads(bg.COLD_SCHEMAS.read_text())
    names = [n for n in args.only.split(",") if n]
    for eng in engines.values():
        for name in names:
            eng.reset()
            eng.compile(cases[name]["schema"])
    gc.collect()
    gc.freeze()
    times = {(e, n): [] for e in engines for n in names}
    order = list(engines)
    for _ in range(args.passes):
        order = order[1:] + order[:1]
        for name in names:
            for e in order:
                eng = engines[e]
                eng.reset()
                t0 = time.thread_time()
                eng.compile(cases[name]["schema"])
                times[e, name].append(time.thread_time() - t0)
    print(
        f"| workload ({args.tokenizer}) | old ms med / min | old2 ms med / min | new ms med / min "
        "| old / new (med) | old / old2 (med, A/A) |"
    )
    print("|---|---|---|---|---|---|")
    for name in names:
        med = {e: statistics.median(times[e, name]) * 1e3 for e in engines}
        low = {e: min(times[e, name]) * 1e3 for e in engines}
        print(
            f"| {name} | {med['old']:.3f} / {low['old']:.3f} | {med['old2']:.3f} / "
            f"{low['old2']:.3f} | {med['new']:.3f} / {low['new']:.3f} | "
            f"{med['old'] / med['new']:.2f}x | {med['old'] / med['old2']:.2f}x |"
        )


if __name__ == "__main__":
    main()
