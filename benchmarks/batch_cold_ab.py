"""Batch-64 cold steps of two structgen checkouts in one process (thread CPU).

bench_grammar's batch mode (``--batch``: 64 matchers over 64 distinct MaskBench --sample
schemas stepping together, per step ``fill_bitmask_batch`` of every active row, serial,
then each row's advance along its instance) for this checkout and a baseline
(``--baseline DIR``, loaded as ``structgen_base`` as in ``cold_ab.py``), cold-empty (every
cache emptied, all 64 schemas compiled afresh before the first step), the two interleaved
``--passes`` times (the order alternating). Timed with ``time.thread_time`` (the fill is
serial, on this thread): the compile of the 64, and per step the fill + advances; per
checkout the median over passes of the mean step and of the total of the steps; the mean
step's wall clock too (bench_grammar's figure; load adds to it).

    PYTHONPATH=. python benchmarks/batch_cold_ab.py --baseline /work/main [--passes 5]
        [--items FILE.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402
from benchmarks.support import alternating  # noqa: E402


def _pass(eng, items) -> tuple[float, list[float], list[float], int]:
    """(compile seconds, per-step thread CPU seconds, per-step wall seconds, rejected rows)
    of one cold-empty batch pass."""
    with eng._own_name():
        t0 = time.thread_time()
        eng._fresh()
        grammars = [
            eng.fsm.compile_json_schema(s, eng.vocab, strict=False, allow_extra_properties=True)
            for _, s, _ in items
        ]
        matchers = [g.matcher() for g in grammars]
        compile_s = time.thread_time() - t0
        bitmask = torch.zeros((len(items), eng.words), dtype=torch.int32)
        paths = [ids for _, _, ids in items]
        pos = [0] * len(items)
        steps, walls, rejected = [], [], 0
        while True:
            active = [i for i in range(len(items)) if pos[i] < len(paths[i])]
            if not active:
                break
            t, w = time.thread_time(), time.perf_counter()
            errors = eng.fsm.BaseMatcher.fill_bitmask_batch(
                [matchers[i] for i in active], bitmask, active
            )
            for i in active:
                if not matchers[i].advance(paths[i][pos[i]]):
                    rejected += 1
                    pos[i] = len(paths[i])
                else:
                    pos[i] += 1
            steps.append(time.thread_time() - t)
            walls.append(time.perf_counter() - w)
            assert not any(errors), errors
    return compile_s, steps, walls, rejected


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--items", type=Path, help="cache of the batch items (JSON; made if absent)")
    args = ap.parse_args()
    ca._load_checkout("structgen_base", args.baseline)
    tok = bg.smollm2_tokenizer()
    if args.items is not None and args.items.exists():
        items = [tuple(x) for x in json.loads(args.items.read_text())]
    else:
        items = bg.load_batch_items(tok, bg.BATCH_SIZE)
        if args.items is not None:
            args.items.write_text(json.dumps(items))
    engines = [
        ca._StructgenOf("old", "structgen_base", tok),
        ca._StructgenOf("new", "structgen", tok),
    ]
    gc.collect()
    gc.freeze()
    res: dict[str, list[tuple[float, float, float, float, int]]] = {e.name: [] for e in engines}
    for _, eng in alternating(engines, args.passes):
        compile_s, steps, walls, rejected = _pass(eng, items)
        res[eng.name].append(
            (compile_s, statistics.fmean(steps), sum(steps), statistics.fmean(walls), rejected)
        )
    lens = [len(ids) for _, _, ids in items]
    print(
        f"{len(items)} schemas, instance tokens median {statistics.median(lens):.0f}, "
        f"max {max(lens)} (steps); {args.passes} passes each"
    )
    print(
        "| checkout | compile 64 ms | cold step ms (median of pass means) | steps total ms "
        "| cold step wall ms | rejected |"
    )
    print("|---|---|---|---|---|---|")
    med = {}
    for name, rows in res.items():
        med[name] = [statistics.median(r[k] for r in rows) for k in range(4)]
        print(
            f"| {name} | {med[name][0] * 1e3:.1f} | {med[name][1] * 1e3:.3f} | "
            f"{med[name][2] * 1e3:.1f} | {med[name][3] * 1e3:.3f} | {max(r[4] for r in rows)} |"
        )
    print(
        f"old / new: compile {med['old'][0] / med['new'][0]:.2f}x, step "
        f"{med['old'][1] / med['new'][1]:.2f}x, steps total {med['old'][2] / med['new'][2]:.2f}x"
    )


if __name__ == "__main__":
    main()
