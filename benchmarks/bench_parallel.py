"""Data-parallel routing and tensor-parallel overhead, measured on CPU.

Part 1, routing: 2 replicas serve a workload of P shared prefixes (long system prompts),
R requests each, in shuffled waves. The cache-aware router is compared with the same
router forced to ignore the cache (least-loaded, rotating: round robin), measured in the
same run: prefix-cache hit rate and wall time. Each replica's KV cache holds only about
half the prefixes, so spreading every prefix over both replicas evicts.

Part 2, TP overhead: decode step time of the tiny model, TP=1 vs TP=2 (gloo on CPU). On
CPU this measures the cost of the step broadcast and 2 all-reduces per layer, not a
speed-up (a tiny model on shared cores has nothing to split).

    python benchmarks/bench_parallel.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_model(folder: Path) -> str:
    from benchmarks.support import save_tiny

    return save_tiny(folder, "llama", 4, 2)


def routing(path: str, num_prefixes: int, per_prefix: int, kv_tokens: int) -> list[dict]:
    from tqdm import tqdm

    from structgen import Engine, SamplingParams

    rng = random.Random(0)
    words = "The quick brown fox jumps over the lazy dog nurse works Lyon function return".split()
    prefixes = [
        f"[{i}] " + " ".join(rng.choice(words) for _ in range(120)) + " "
        for i in range(num_prefixes)
    ]
    reqs = [
        (p, f"question {j} about {i}") for i, p in enumerate(prefixes) for j in range(per_prefix)
    ]
    rng.shuffle(reqs)
    params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    rows = []
    for policy in tqdm(["cache-aware", "round-robin"], desc="routing"):
        with Engine(
            path, data_parallel_size=2, dtype="float32", max_kv_tokens=kv_tokens, page_size=16
        ) as engine:
            if policy == "round-robin":
                engine.router.cache_threshold = 2.0  # never route by cache
            t0 = time.perf_counter()
            for start in range(0, len(reqs), 8):  # waves of 8 concurrent requests
                outs = engine.generate([p + q for p, q in reqs[start : start + 8]], params)
                bad = [o.error for o in outs if o.finish_reason == "error"]
                assert not bad, bad
            wall = time.perf_counter() - t0
            st = engine.stats()
        rows.append(
            {
                "policy": policy,
                "hit_rate": st["prefix_hit_rate"],
                "wall_s": wall,
                "hit_tokens": st["prefix_hit_tokens"],
                "prompt_tokens": st["prompt_tokens"],
                "routed": st["routed"],
            }
        )
    return rows


def tp_overhead(path: str, steps: int) -> list[dict]:
    from structgen import Engine

    rows = []
    for tp in (1, 2):
        with Engine(
            path, tensor_parallel_size=tp, dtype="float32", max_kv_tokens=4096, page_size=16
        ) as engine:
            pool = engine.pool
            batch = 8
            tables = [pool.alloc(8) for _ in range(batch)]
            engine.runner.forward([[5, 6, 7, 8]] * batch, [0] * batch, tables)
            times = []
            for i in range(steps):
                t0 = time.perf_counter()
                engine.runner.forward([[9]] * batch, [4 + i] * batch, tables)
                times.append(time.perf_counter() - t0)
            times.sort()
            rows.append(
                {
                    "tp": tp,
                    "p50_ms": 1e3 * times[len(times) // 2],
                    "p90_ms": 1e3 * times[int(len(times) * 0.9)],
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    num_prefixes, per_prefix, steps = (6, 4, 30) if args.quick else (8, 8, 100)
    with tempfile.TemporaryDirectory() as tmp:
        path = make_model(Path(tmp) / "tiny")
        # each replica's KV: ~half the prefixes (~205 tokens each) + half a wave running
        route = routing(path, num_prefixes, per_prefix, kv_tokens=num_prefixes * 205 // 2 + 4 * 230)
        tp = tp_overhead(path, steps)
    base = route[1]
    print(
        "\n| routing | prefix hit rate | hit tokens / prompt tokens | wall s | routed | hit rate "
        "vs round-robin | wall vs round-robin |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in route:
        print(
            f"| {r['policy']} | {r['hit_rate']:.3f} | {r['hit_tokens']} / {r['prompt_tokens']} | "
            f"{r['wall_s']:.2f} | {r['routed']} | "
            f"{r['hit_rate'] / max(base['hit_rate'], 1e-9):.2f}x | "
            f"{r['wall_s'] / base['wall_s']:.2f}x |"
        )
    print("\n| tensor parallel | decode step p50 ms (batch 8) | p90 ms | vs TP=1 |")
    print("|---|---|---|---|")
    for r in tp:
        print(
            f"| TP={r['tp']} | {r['p50_ms']:.2f} | {r['p90_ms']:.2f} | "
            f"{r['p50_ms'] / tp[0]['p50_ms']:.2f}x |"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.bar(
        [r["policy"] for r in route],
        [r["hit_rate"] for r in route],
        color=["tab:green", "tab:gray"],
    )
    a.set_ylabel("prefix-cache hit rate")
    a.set_title(f"DP=2, {num_prefixes} prefixes x {per_prefix}")
    b.bar([f"TP={r['tp']}" for r in tp], [r["p50_ms"] for r in tp], color=["tab:gray", "tab:blue"])
    b.set_ylabel("decode step p50 (ms)")
    b.set_title("tiny Llama, CPU, gloo")
    fig.tight_layout()
    out = Path(__file__).with_name("bench_parallel.png")
    fig.savefig(out, dpi=110)
    print(f"\nplot: {out}")


if __name__ == "__main__":
    main()
