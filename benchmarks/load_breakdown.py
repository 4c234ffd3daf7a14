"""Where a fresh process's ``import structgen; structgen.Engine()`` spends its time, by stage.

Each repeat runs :data:`CHILD` in a fresh interpreter: it wraps the start-up's stages (the
imports, then inside ``Engine()`` the default CPU model's load (``load_cpu_model``: the
tokenizer, the GGUF file's parse, ``CpuModel.from_gguf``'s repack and tables; the torch
model's ``load_model`` where the settings need it) and the vocabulary's read; then
``Vocabulary.prepare``, which ``Engine()`` starts on a background thread (CPU: that
thread's), and the wait for it after ``Engine()`` returns) with timers, and the cyclic
garbage collector's passes with ``gc.callbacks``, and prints one JSON row per stage: wall
and process CPU seconds, and whether torch was imported. Nested stages (indented) are part
of the stage above them; a stage the start-up did not enter has no row.

Run:  OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/load_breakdown.py [--repeats 5]
(the cache filled first by one untimed ``Engine()``: the warm start). ``bench_e2e.py
--sections load`` prints the same table under its load rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import gc, json, time
rows = []
gc_time = {"imports": 0.0, "Engine()": 0.0}
phase = ["imports"]
_gc0 = [0.0]

def _gc(event, info):
    if event == "start":
        _gc0[0] = time.perf_counter()
    else:
        gc_time[phase[0]] += time.perf_counter() - _gc0[0]

gc.callbacks.append(_gc)

class timed:
    def __init__(self, label, cpu=time.process_time):
        self.label, self.cpu = label, cpu
    def __enter__(self):
        self.w, self.c = time.perf_counter(), self.cpu()
    def __exit__(self, *exc):
        rows.append((self.label, time.perf_counter() - self.w, self.cpu() - self.c))

def wrap(owner, attr, label, cpu=time.process_time):
    f = getattr(owner, attr)
    def timed_call(*a, **k):
        with timed(label, cpu):
            return f(*a, **k)
    setattr(owner, attr, timed_call)

start = timed("process: imports + Engine()")
start.__enter__()
with timed("import structgen"):
    import structgen
with timed("import structgen.runtime.engine"):
    import structgen.runtime.engine as engine_module
import sys
import structgen.runtime.loader as loader
import structgen.runtime.loader.gguf_config as gguf_config
import structgen.runtime.loader.vocab_cache as vocab_cache
from structgen.runtime.cpu.model import CpuModel
from structgen.fsm.index.vocabulary import Vocabulary
from structgen.runtime.loader.gguf_file import GGUFFile

wrap(loader, "load_cpu_model", "  load_cpu_model")
wrap(CpuModel, "from_gguf", "    CpuModel.from_gguf (weights repack, tables; no torch)")
wrap(loader, "load_model", "  load_model (torch model: not the default CPU engine's)")
wrap(gguf_config, "load_cached_tokenizer", "    tokenizer load (cached tokenizer.json)")
wrap(GGUFFile, "__init__", "    GGUF open + metadata parse")
wrap(vocab_cache, "cached_vocabulary", "  vocabulary read (cache)")
wrap(Vocabulary, "prepare", "Vocabulary.prepare (its thread, from Engine())", time.thread_time)
phase[0] = "Engine()"
with timed("Engine()"):
    engine = structgen.Engine()
start.__exit__()
with timed("wait for engine.vocab after Engine()"):
    engine.vocab
rows += [("torch imported (1: yes; wall column)", float("torch" in sys.modules), float("nan"))]
rows += [("gc passes during the imports (wall)", gc_time["imports"], float("nan")),
         ("gc passes during Engine() (wall)", gc_time["Engine()"], float("nan"))]
print(json.dumps(rows))
"""


STAGES = (
    "import structgen",
    "import structgen.runtime.engine",
    "Engine()",
    "  load_cpu_model",
    "    CpuModel.from_gguf (weights repack, tables; no torch)",
    "  load_model (torch model: not the default CPU engine's)",
    "    tokenizer load (cached tokenizer.json)",
    "    GGUF open + metadata parse",
    "  vocabulary read (cache)",
    "  rest of Engine()",
    "process: imports + Engine()",
    "Vocabulary.prepare (its thread, from Engine())",
    "wait for engine.vocab after Engine()",
    "gc passes during the imports (wall)",
    "gc passes during Engine() (wall)",
    "torch imported (1: yes; wall column)",
)


def breakdown(repeats: int, env: dict | None = None) -> dict[str, tuple[float, float]]:
    """Stage label (:data:`STAGES`) -> medians over ``repeats`` fresh processes of its
    ``(wall s, CPU s)`` (a stage entered more than once: its sum per process; the gc rows'
    CPU is NaN; "rest of Engine()": ``Engine()`` less its model load and vocabulary
    read).

    Raises:
        RuntimeError: a child failed (its stderr).
    """
    runs = []
    for _ in range(repeats):
        proc = subprocess.run(
            [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=900
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr)
        per: dict[str, list[float]] = {}
        for label, wall, cpu in json.loads(proc.stdout.strip().splitlines()[-1]):
            w, c = per.setdefault(label, [0.0, 0.0])
            per[label] = [w + wall, c + cpu]
        parts = [
            per.get(k, [0.0, 0.0])
            for k in (
                "  load_cpu_model",
                "  load_model (torch model: not the default CPU engine's)",
                "  vocabulary read (cache)",
            )
        ]
        per["  rest of Engine()"] = [per["Engine()"][i] - sum(p[i] for p in parts) for i in (0, 1)]
        runs.append(per)
    return {
        label: tuple(statistics.median(r[label][i] for r in runs) for i in (0, 1))
        for label in STAGES
        if all(label in r for r in runs)  # a stage the start-up did not enter: no row
    }


def markdown(stages: dict[str, tuple[float, float]]) -> str:
    """:func:`breakdown`'s result as a markdown table, in :data:`STAGES` order."""
    lines = ["| stage | wall s | CPU s |", "|---|---|---|"]
    for label in (label for label in STAGES if label in stages):
        wall, cpu = stages[label]
        name = label.lstrip(" ")
        indent = "&nbsp;" * (len(label) - len(name))
        lines.append(f"| {indent}{name} | {wall:.3f} | {'-' if cpu != cpu else f'{cpu:.3f}'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    subprocess.run(
        [sys.executable, "-c", "import structgen; structgen.Engine()"], env=env, check=True
    )  # fill the cache: the warm start
    print(markdown(breakdown(args.repeats, env)))


if __name__ == "__main__":
    main()
