"""Where a fresh process's ``import structgen; structgen.Engine()`` spends its time, by stage.

Each repeat runs :data:`CHILD` in a fresh interpreter: it wraps the start-up's stages (the
imports, then inside ``Engine()`` the tokenizer's load, the GGUF file's parse, the weights'
state dict and repack, the model's construction, the vocabulary's read; then
``Vocabulary.prepare``, which ``Engine()`` starts on a background thread (CPU: that
thread's), and the wait for it after ``Engine()`` returns) with timers, and the cyclic
garbage collector's passes with ``gc.callbacks``, and prints one JSON row per stage: wall
and process CPU seconds. Nested stages (indented) are part of the stage above them.

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
with timed("import torch"):
    import torch  # noqa: F401
with timed("import structgen.runtime.engine (torch loaded)"):
    import structgen.runtime.engine as engine_module
import structgen.runtime.loader as loader
import structgen.runtime.loader.gguf_config as gguf_config
import structgen.runtime.loader.gguf_loader as gguf_loader
import structgen.runtime.loader.vocab_cache as vocab_cache
import structgen.runtime.models as models
from structgen.fsm.index.vocabulary import Vocabulary
from structgen.runtime.loader.gguf_file import GGUFFile

wrap(loader, "load_model", "  load_model")
wrap(gguf_config, "load_cached_tokenizer", "    tokenizer load (cached tokenizer.json)")
wrap(GGUFFile, "__init__", "    GGUF open + metadata parse")
wrap(gguf_loader, "gguf_state_dict", "    weights: state dict + repack")
wrap(gguf_loader, "install_modules", "    install quantized modules")
wrap(gguf_loader, "assign_weights", "    assign float weights")
wrap(loader, "_fused", "    fuse projections")
_get = models.get_model_class
def get_model_class(name):
    cls = _get(name)
    def build(*a, **k):
        with timed("    model construction"):
            return cls(*a, **k)
    return build
models.get_model_class = get_model_class
wrap(vocab_cache, "cached_vocabulary", "  vocabulary read (cache)")
wrap(Vocabulary, "prepare", "Vocabulary.prepare (its thread, from Engine())", time.thread_time)
phase[0] = "Engine()"
with timed("Engine()"):
    engine = structgen.Engine()
start.__exit__()
with timed("wait for engine.vocab after Engine()"):
    engine.vocab
rows += [("gc passes during the imports (wall)", gc_time["imports"], float("nan")),
         ("gc passes during Engine() (wall)", gc_time["Engine()"], float("nan"))]
print(json.dumps(rows))
"""


STAGES = (
    "import structgen",
    "import torch",
    "import structgen.runtime.engine (torch loaded)",
    "Engine()",
    "  load_model",
    "    tokenizer load (cached tokenizer.json)",
    "    GGUF open + metadata parse",
    "    weights: state dict + repack",
    "    model construction",
    "    install quantized modules",
    "    assign float weights",
    "    fuse projections",
    "  vocabulary read (cache)",
    "  rest of Engine()",
    "process: imports + Engine()",
    "Vocabulary.prepare (its thread, from Engine())",
    "wait for engine.vocab after Engine()",
    "gc passes during the imports (wall)",
    "gc passes during Engine() (wall)",
)


def breakdown(repeats: int, env: dict | None = None) -> dict[str, tuple[float, float]]:
    """Stage label (:data:`STAGES`) -> medians over ``repeats`` fresh processes of its
    ``(wall s, CPU s)`` (a stage entered more than once: its sum per process; the gc rows'
    CPU is NaN; "rest of Engine()": ``Engine()`` less its ``load_model`` and vocabulary
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
        parts = [per[k] for k in ("  load_model", "  vocabulary read (cache)")]
        per["  rest of Engine()"] = [per["Engine()"][i] - sum(p[i] for p in parts) for i in (0, 1)]
        runs.append(per)
    return {
        label: tuple(statistics.median(r[label][i] for r in runs) for i in (0, 1))
        for label in STAGES
    }


def markdown(stages: dict[str, tuple[float, float]]) -> str:
    """:func:`breakdown`'s result as a markdown table, in :data:`STAGES` order."""
    lines = ["| stage | wall s | CPU s |", "|---|---|---|"]
    for label in STAGES:
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
