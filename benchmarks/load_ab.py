"""Same-run A/B of start-up between two checkouts: fresh processes, alternating order.

Each round runs, per checkout (``PYTHONPATH`` = its root, ``OMP_NUM_THREADS=2``, the shared
warm cache): a warm ``import structgen; structgen.Engine()`` (wall, process CPU, main-thread
CPU; with ``--cold`` also a cold one, under a fresh empty ``STRUCTGEN_CACHE_DIR``); README's
``structgen extract`` example (wall, CPU and maximum resident set from ``os.wait4``'s
rusage; the printed JSON must be the same for both); and ``load_breakdown.CHILD`` (CPU per
stage, wall of the gc passes). Prints a markdown table of medians (RSS: the maximum) and the
ratio B/A.

Run:  python benchmarks/load_ab.py A_ROOT B_ROOT [--rounds 6] [--cold] [--no-extract]
(each root a checkout with its C extensions built, e.g. a ``git worktree`` of main).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from load_breakdown import CHILD, STAGES

LOAD = (
    "import time; w=time.perf_counter(); c=time.process_time(); import structgen; "
    "structgen.Engine(); print(time.perf_counter()-w, time.process_time()-c, time.thread_time())"
)
TEXT = "Maria Lopez, 34, works as a nurse in Lyon."


def _env(root: str) -> dict:
    return dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="2")


def _extract(root: str) -> tuple[float, float, float, str]:
    """``(wall s, CPU s, max RSS MB, stdout)`` of README's extract example under ``root``."""
    schema = Path(root) / "examples" / "schemas" / "person.json"
    argv = [sys.executable, "-m", "structgen", "extract", "--schema", str(schema), "--text", TEXT]
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=root, env=_env(root), stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"extract failed under {root}")
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def _run(root: str, code: str, cache_dir: str | None = None) -> str:
    env = _env(root) if cache_dir is None else dict(_env(root), STRUCTGEN_CACHE_DIR=cache_dir)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
        check=True,
    ).stdout  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--cold", action="store_true", help="also a cold Engine() per round")
    ap.add_argument("--no-extract", action="store_true", help="skip the extract example")
    args = ap.parse_args()
    roots = [str(Path(args.a).resolve()), str(Path(args.b).resolve())]
    load = {r: [] for r in roots}
    cold = {r: [] for r in roots}
    extract = {r: [] for r in roots}
    stages = {r: [] for r in roots}
    outputs = set()
    for i in range(args.rounds):
        order = roots if i % 2 == 0 else roots[::-1]
        for r in order:
            load[r].append([float(x) for x in _run(r, LOAD).split()])
        for r in order[::-1] if args.cold else ():
            with tempfile.TemporaryDirectory(prefix="structgen-cold-") as empty:
                cold[r].append([float(x) for x in _run(r, LOAD, empty).split()])
        for r in order[::-1] if not args.no_extract else ():
            *fig, out = _extract(r)
            extract[r].append(fig)
            outputs.add(out)
        for r in order:
            per: dict[str, list[float]] = {}
            for label, w, c in json.loads(_run(r, CHILD).strip().splitlines()[-1]):
                acc = per.setdefault(label, [0.0, 0.0])
                acc[0] += w
                acc[1] += c
            stages[r].append(per)
    a, b = roots
    med = statistics.median
    print(f"| measure | A: {a} | B: {b} | B/A |\n|---|---|---|---|")

    def row(name: str, x: float, y: float, fmt: str = "{:.3f}") -> None:
        print(f"| {name} | {fmt.format(x)} | {fmt.format(y)} | {y / x:.2f} |")

    for kind, runs in (("warm", load), ("cold", cold)):
        for j, name in ((0, "wall s"), (1, "CPU s"), (2, "main-thread CPU s")):
            if runs[a]:
                figures = (med(x[j] for x in runs[r]) for r in roots)
                row(f"{kind} `import structgen; Engine()` {name}", *figures)
    if not args.no_extract:
        row("README extract wall s", *(med(x[0] for x in extract[r]) for r in roots))
        row("README extract CPU s (rusage)", *(med(x[1] for x in extract[r]) for r in roots))
        row("README extract max RSS MB", *(max(x[2] for x in extract[r]) for r in roots), "{:.0f}")
    for label in STAGES:
        if not all(label in s for r in roots for s in stages[r]):
            continue
        k = 0 if label.startswith("gc") else 1
        name = f"{'wall' if k == 0 else 'CPU'} s: {label.strip().removesuffix(' (wall)')}"
        row(f"stage {name}", *(med(s[label][k] for s in stages[r]) for r in roots))
    print("outputs:", outputs)
    if len(outputs) > 1:
        raise SystemExit("the two checkouts printed different extractions")


if __name__ == "__main__":
    main()
