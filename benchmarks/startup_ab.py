"""``Engine()`` start-up of two structgen checkouts, fresh processes, A/B interleaved.

Each round runs, for the baseline checkout (``--baseline DIR``) and this one in turn (the
order alternating by round), :data:`CHILD` in a fresh interpreter with that checkout first
on ``PYTHONPATH``: ``import structgen``, then timed ``Engine()`` (the default model), then
``engine.vocab`` (its grammar vocabulary prepared: what a first constrained request waits
for), then the process CPU seconds so far (``time.process_time``: every thread's). Warm:
the structgen cache filled (one untimed ``Engine()`` per checkout first); cold: a new
empty cache folder per run (the tokenizer converted from the GGUF file, the vocabulary
built and both written). Then README's
``structgen extract`` example (warm), process start to JSON printed, wall and CPU (user +
system, ``getrusage`` of the child), per checkout.

Prints medians per checkout and the ratio this / baseline (same run: the host's load hits
both alike).

    PYTHONPATH=. python benchmarks/startup_ab.py --baseline /work/wt-base [--repeats 7]
        [--modes warm,cold,extract]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.support import README_EXTRACT_ARGS  # noqa: E402

CHILD = (
    "import json, time; t0 = time.perf_counter(); import structgen; "
    "t1 = time.perf_counter(); e = structgen.Engine(); t2 = time.perf_counter(); "
    "v = e.vocab; t3 = time.perf_counter(); "
    "print(json.dumps({'import_s': t1 - t0, 'engine_s': t2 - t1, 'vocab_ready_s': t3 - t1, "
    "'cpu_s': time.process_time(), 'file': structgen.__file__}))"
)
EXTRACT = README_EXTRACT_ARGS


def _env(checkout: Path, cache: str, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), STRUCTGEN_CACHE_DIR=cache)
    env["OMP_NUM_THREADS"] = str(threads)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # each checkout's bytecode cached, as installed
    return env


def _child(checkout: Path, cache: str, threads: int) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=_env(checkout, cache, threads),
        capture_output=True,
        text=True,
        timeout=900,
        cwd=checkout,
    )
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-3000:])
    row = json.loads(run.stdout.strip().splitlines()[-1])
    if not row["file"].startswith(str(checkout)):
        raise RuntimeError(f"{checkout}: imported {row['file']}")
    return row


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _extract(checkout: Path, cache: str, threads: int) -> tuple[float, float, str]:
    """README's extract example: (wall s, process CPU s (user + system), printed JSON)."""
    c0 = _children_cpu()
    t0 = time.perf_counter()
    run = subprocess.run(
        [sys.executable, *EXTRACT],
        env=_env(checkout, cache, threads),
        capture_output=True,
        text=True,
        timeout=900,
        cwd=checkout,
    )
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-3000:])
    return wall, _children_cpu() - c0, run.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, type=Path, help="the baseline checkout")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of the children")
    ap.add_argument("--modes", default="warm,cold,extract")
    args = ap.parse_args()
    checkouts = {"base": args.baseline.resolve(), "this": ROOT}
    modes = args.modes.split(",")
    rows: dict[tuple[str, str], list[dict]] = {}
    outputs: dict[str, set[str]] = {"base": set(), "this": set()}
    with tempfile.TemporaryDirectory() as root:
        warm = {name: os.path.join(root, f"warm-{name}") for name in checkouts}
        for name, path in checkouts.items():  # fill each checkout's own cache, untimed
            _child(path, warm[name], args.threads)
        for r in range(args.repeats):
            order = list(checkouts) if r % 2 == 0 else list(checkouts)[::-1]
            for mode in modes:
                for name in order:
                    path = checkouts[name]
                    if mode == "warm":
                        row = _child(path, warm[name], args.threads)
                    elif mode == "cold":
                        row = _child(path, os.path.join(root, f"cold-{name}-{r}"), args.threads)
                    else:
                        wall, cpu, out = _extract(path, warm[name], args.threads)
                        outputs[name].add(out)
                        row = {"wall_s": wall, "cpu_s": cpu}
                    rows.setdefault((mode, name), []).append(row)
    print(f"{args.repeats} rounds, A/B alternated, medians (s); ratio = this / base\n")
    print("| mode | measure | base | this | ratio |")
    print("|---|---|---|---|---|")
    for mode in modes:
        keys = ("wall_s", "cpu_s") if mode == "extract" else ("engine_s", "vocab_ready_s", "cpu_s")
        for key in keys:
            a = statistics.median(x[key] for x in rows[(mode, "base")])
            b = statistics.median(x[key] for x in rows[(mode, "this")])
            print(f"| {mode} | {key} | {a:.3f} | {b:.3f} | {b / a:.3f} |")
    if "extract" in modes:
        same = outputs["base"] == outputs["this"] and len(outputs["this"]) == 1
        print(f"\nextract outputs equal across checkouts and runs: {same}")
        for out in sorted(outputs["this"] | outputs["base"]):
            print("  ", out)


if __name__ == "__main__":
    main()
