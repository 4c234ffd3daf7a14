"""Process CPU seconds per generated token of the default engine between two checkouts.

Under a loaded host, wall-clock tokens/s of one child against another measures the load (other
processes' share of the cores when each child ran); the process's own CPU time per token is far
less sensitive to it. Each round runs one fresh child per checkout (``PYTHONPATH`` = its root,
``OMP_NUM_THREADS=2``), the order alternating: ``Engine(dtype="float32", prefix_cache=False)``,
a warm-up, then 5 greedy batch-1 generates of 24 tokens (``ignore_eos``) after a chat prompt;
per child the medians of process CPU and wall milliseconds per token, and the tokens, which
must be equal across checkouts (checked).

    nice -n 10 python benchmarks/decode_cpu_ab.py A_ROOT B_ROOT [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def child() -> dict:
    import structgen
    from structgen import SamplingParams

    eng = structgen.Engine(dtype="float32", prefix_cache=False)
    chat = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    eng.generate([chat], SamplingParams(max_tokens=4, temperature=0.0))  # warm-up
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    cpu, wall, tokens = [], [], None
    for _ in range(5):
        c0, t0 = time.process_time(), time.perf_counter()
        out = eng.generate([chat], params)
        cpu.append((time.process_time() - c0) / 24)
        wall.append((time.perf_counter() - t0) / 24)
        tokens = list(out[0].token_ids)
    return {
        "cpu_ms": statistics.median(cpu) * 1e3,
        "wall_ms": statistics.median(wall) * 1e3,
        "tokens": tokens,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a_root", nargs="?")
    ap.add_argument("b_root", nargs="?")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child()))
        return
    if not (args.a_root and args.b_root):
        ap.error("need A_ROOT and B_ROOT")
    from benchmarks.support import alternating  # here: a child runs under the other checkout

    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for r, name in alternating("AB", args.rounds):
        root = args.a_root if name == "A" else args.b_root
        env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "2"}
        run = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        )
        runs[name].append(json.loads(run.stdout.strip().splitlines()[-1]))
        got = {k: round(v, 2) for k, v in runs[name][-1].items() if k != "tokens"}
        print(f"round {r + 1}/{args.rounds} {name}: {got}", flush=True)
    same = all(a["tokens"] == b["tokens"] for a in runs["A"] for b in runs["B"])
    print(f"\nA = {args.a_root}, B = {args.b_root}; {args.rounds} rounds, medians")
    print("| measure | A | B | B / A |\n|---|---|---|---|")
    for key in ("cpu_ms", "wall_ms"):
        a = statistics.median(x[key] for x in runs["A"])
        b = statistics.median(x[key] for x in runs["B"])
        print(f"| {key} per token | {a:.2f} | {b:.2f} | {b / a:.3f} |")
    print(f"greedy tokens equal across checkouts and rounds: {same}")


if __name__ == "__main__":
    main()
