"""The batched extraction of two structgen checkouts in one process: CPU per document (#23).

Both trees' packages are imported under their own name, ``structgen``, one after the other:
after a tree's ``Engine()`` and its warm-up calls, every ``structgen*`` entry of
``sys.modules`` is set aside as that tree's module set, and before each timed call the
arm's set is put back (so a function's lazy ``import structgen...`` finds its own tree's
module). Each tree builds its own ``Engine()`` (the default CPU engine) over the same model
files; each engine extracts one untimed card and then all ``--docs`` cards once, untimed
(its host pipelines built, KV pools grown, lazy imports done).

Timed: ``extract(contact_card, the --docs cards)`` of ``bench_extract_batch.py`` (seed 0, the
default call: two host pipelines from 64 texts), every prefix cache of the arm's engine
(its own and its pipelines') flushed before the call. Arms: ``base`` (``--baseline``),
``this`` (this checkout) and ``this (A/A)`` (the same engine again: the noise), their order
rotated each round. Per call: process CPU s/doc (every thread), forward CPU ms/doc (the
thread CPU inside ``runner.execute`` of every pipeline, summed), host CPU ms/doc (process
minus forward: scheduling, sampling and masks, jump-forward, requests, extraction glue) and,
with ``--parts``, the thread CPU inside each named function (outermost call; its tree's
attribute replaced by a timed wrapper). The values must be equal in every call. Medians per
arm and the ratios base / this and this / this (A/A).

    OMP_NUM_THREADS=2 PYTHONPATH=. nice -n 10 python benchmarks/host_python_ab.py \\
        --baseline /path/to/base-worktree [--docs 100] [--rounds 3] \\
        [--parts structgen.runtime.engine:sample_tokens,...]

A part is ``module:attr`` or ``module:Class.attr``, patched where the caller looks it up
(``structgen.runtime.engine:sample_tokens``, ``structgen.runtime.scheduler:process_tokens``).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_extract_batch import documents  # noqa: E402  (text only: imports no structgen)


def _structgen_modules() -> dict:
    return {k: m for k, m in sys.modules.items() if k == "structgen" or k.startswith("structgen.")}


def _install(mods: dict) -> None:
    """Make ``mods`` the process's ``structgen`` package (every other tree's entries out)."""
    for k in _structgen_modules():
        del sys.modules[k]
    sys.modules.update(mods)


class Tree:
    """One checkout's engine, module set and timed wrappers (``parts``)."""

    def __init__(self, root: Path, schema: dict, texts: list[str], parts: list[str]) -> None:
        _install({})
        sys.path.insert(0, str(root))
        try:
            structgen = importlib.import_module("structgen")
            assert Path(structgen.__file__).resolve().parents[1] == root.resolve(), (
                structgen.__file__
            )
            model_runner = importlib.import_module("structgen.runtime.model_runner")
            self.cpu = collections.Counter()  # part -> thread CPU s (forward: "forward")
            self._lock = threading.Lock()
            self._wrap(model_runner, "BaseModelRunner.execute", "forward")
            for part in parts:
                mod, attr = part.split(":")
                self._wrap(importlib.import_module(mod), attr, part)
            self.engine = structgen.Engine()
            self.engine.extract(schema, texts[-1])  # compile, the shared prefix cached
            self.engine.extract(schema, texts[:-1])  # pipelines built, pools grown
        finally:
            sys.path.remove(str(root))
        self.modules = _structgen_modules()
        self.pipelines = self.engine.__dict__.get("host_pipelines_")

    def _wrap(self, module, attr: str, key: str) -> None:
        owner = module
        *path, name = attr.split(".")
        for p in path:
            owner = getattr(owner, p)
        fn = getattr(owner, name)
        depth = threading.local()
        cpu, lock = self.cpu, self._lock

        def timed(*args, **kwargs):
            d = getattr(depth, "n", 0)
            depth.n = d + 1
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                depth.n = d
                if d == 0:
                    dt = time.thread_time() - t0
                    with lock:
                        cpu[key] += dt

        setattr(owner, name, timed)

    def run(self, schema: dict, texts: list[str]) -> tuple[list, float, dict]:
        """One timed call: (values, process CPU s, thread CPU s per part)."""
        _install(self.modules)
        if self.pipelines is not None:
            self.pipelines.flush_cache()
        self.engine.flush_cache()
        self.cpu.clear()
        c0 = time.process_time()
        out = self.engine.extract(schema, texts)
        return out, time.process_time() - c0, dict(self.cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="the checkout to compare")
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", default="", help="module:attr,... timed (thread CPU)")
    args = ap.parse_args()
    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs + 1, 0)
    parts = [p for p in args.parts.split(",") if p]
    trees = {
        "base": Tree(args.baseline, schema, texts, parts),
        "this": Tree(ROOT, schema, texts, parts),
    }
    arms = [("base", "base"), ("this", "this"), ("this (A/A)", "this")]
    n = args.docs
    rows: dict[str, list[dict[str, float]]] = {a: [] for a, _ in arms}
    first = None
    for r in range(args.rounds):
        k = r % len(arms)
        for arm, tree in arms[k:] + arms[:k]:
            out, proc, cpu = trees[tree].run(schema, texts[:-1])
            first = out if first is None else first
            assert out == first, f"round {r + 1}, {arm}: other values"
            fig = {"process": proc / n * 1e3, "forward": cpu.get("forward", 0.0) / n * 1e3}
            fig["host"] = fig["process"] - fig["forward"]
            fig.update({p: cpu.get(p, 0.0) / n * 1e3 for p in parts})
            rows[arm].append(fig)
            print(
                f"round {r + 1} {arm:11s} process {fig['process']:6.1f}, forward "
                f"{fig['forward']:6.1f}, host {fig['host']:5.1f} ms/doc; "
                + ", ".join(f"{p.split(':')[1]} {fig[p]:.2f}" for p in parts)
                + f"; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    keys = ["process", "forward", "host", *parts]
    med = {a: {k: statistics.median(f[k] for f in rows[a]) for k in keys} for a in rows}
    print(f"\n{n} cards, {args.rounds} rounds; medians, ms/doc (thread CPU for the parts)")
    print("| measure | base | this | this (A/A) | base / this | this / A/A |\n" + "|---" * 6 + "|")
    for k in keys:
        b, t, a = med["base"][k], med["this"][k], med["this (A/A)"][k]
        print(
            f"| {k} | {b:.2f} | {t:.2f} | {a:.2f} | {b / t if t else 0:.3f}x "
            f"| {t / a if a else 0:.3f}x |"
        )
    print("values equal in every call")


if __name__ == "__main__":
    main()
