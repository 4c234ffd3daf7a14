"""Cold advances (and masks) of two structgen checkouts, interleaved in one process.

cold_ab's engines and reset (``benchmarks/cold_ab.py``: the baseline checkout loaded as
``structgen_base``, every per-grammar cache emptied before each compile), each workload
forced token by token: ``fill_bitmask`` then ``advance`` per token, each timed alone with
``time.thread_time_ns``; old and new alternate (order flipped each pass). Asserts the two
checkouts write the same masks (not the same state ids: a checkout may number its
configurations otherwise). Prints, per workload, the medians over the passes of the
summed advance time (us) and its ratio old / new, the median of the per-pass ratios, and
the summed mask time's medians and ratio.

    PYTHONPATH=. python benchmarks/cold_advance_ab.py --baseline DIR [--passes 21]
        [--only nested,recursive]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--passes", type=int, default=21)
    ap.add_argument("--only", default="nested,recursive", help="comma-separated workloads")
    args = ap.parse_args()
    ca._load_checkout("structgen_base", args.baseline)
    tok = bg.smollm2_tokenizer()
    engines = [
        ca._StructgenOf("old", "structgen_base", tok),
        ca._StructgenOf("new", "structgen", tok),
    ]
    work = ca._workloads(tok, set(args.only.split(",")))
    gc.collect()
    gc.freeze()
    clock = time.thread_time_ns
    adv: dict = {}
    msk: dict = {}
    states: dict = {}
    for p in range(args.passes):
        for name, kind, spec, ids in work:
            for eng in engines if p % 2 == 0 else engines[::-1]:
                eng.reset()
                m = eng.matcher(getattr(eng, kind)(spec))
                buf = torch.zeros((1, eng.words), dtype=torch.int32)
                a_ns = m_ns = 0
                path = []
                for t in ids:
                    c0 = clock()
                    m.fill_bitmask(buf, 0)
                    c1 = clock()
                    ok = m.advance(t)
                    a_ns += clock() - c1
                    m_ns += c1 - c0
                    if not ok:
                        raise SystemExit(f"{eng.name} refused a token of {name}")
                    path.append(buf.numpy().tobytes())
                adv.setdefault((name, eng.name), []).append(a_ns / 1e3)
                msk.setdefault((name, eng.name), []).append(m_ns / 1e3)
                if states.setdefault((name, eng.name), path) != path:
                    raise SystemExit(f"{eng.name}: masks differ between passes on {name}")
    print(
        "| workload (tokens) | advances us old / new | old / new | per-pass ratio "
        "| masks us old / new | old / new |"
    )
    print("|---|---|---|---|---|---|")
    for name, _, _, ids in work:
        if states[(name, "old")] != states[(name, "new")]:
            raise SystemExit(f"old and new write different masks on {name}")
        ao, an = (statistics.median(adv[(name, e)]) for e in ("old", "new"))
        mo, mn = (statistics.median(msk[(name, e)]) for e in ("old", "new"))
        per = statistics.median(o / n for o, n in zip(adv[(name, "old")], adv[(name, "new")]))
        print(
            f"| {name} ({len(ids)}) | {ao:.1f} / {an:.1f} | {ao / an:.2f}x | {per:.2f}x "
            f"| {mo:.1f} / {mn:.1f} | {mo / mn:.2f}x |"
        )


if __name__ == "__main__":
    main()
