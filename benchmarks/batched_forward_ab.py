"""One-process A/B of the batched extraction's forward (#23): ``Engine().extract(contact_card,
N cards)`` on the default two host pipelines, arms alternated (order reversed every other
round), every pipeline's prefix cache and the engine's flushed before each timed call (each
call computes the schema head and every card's own tokens: the same work in every arm), after
one untimed call of all the cards (the first call of that many grows the pipelines' KV pools).

Two kinds of arm:

- ``--values 32,64``: ``structgen.runtime.cpu.layer_table.MAX_STEP_ROWS`` (the rows of one
  ``decode_layers`` call; ``CpuDecoder`` runs a forward pass of more rows as consecutive calls
  of that many) set to each value; values above the C extension's limit (``decode_layers``'
  MAX_STEP_ROWS) raise ``ValueError`` from the first call;
- ``--base-ext SO``: the fused step's extension swapped between another build's
  ``_decodestep`` shared object (e.g. main's, built in a base worktree; arm ``base``) and this
  tree's (arm ``this``), through ``layer_table._ext``, the module ``CpuDecoder`` calls.

Per call: wall and process CPU per card, the pipelines' forward passes, the rows (tokens)
through them, the C calls they make (``ceil(rows / MAX_STEP_ROWS)`` a pass) and the forwards'
thread CPU per card (each host pipeline runs its kernels on its own thread); medians per arm.
The greedy values must be equal in every call (each row's arithmetic does not depend on the
rows beside it in a call, and the builds compared must give the same floats):
``AssertionError`` otherwise.

Run:  PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/batched_forward_ab.py \
          --docs 200 [--values 32,64 | --base-ext SO] --rounds 2
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_extract_batch import documents  # noqa: E402

from benchmarks.support import alternating  # noqa: E402


def load_decodestep(path: str):
    """The ``_decodestep`` extension built at ``path``, loaded beside this tree's."""
    name = "structgen.runtime.cpu._decodestep"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    return importlib.util.module_from_spec(spec)


def run_arms(arms: dict, docs: int, seed: int, rounds: int) -> None:
    """Time ``Engine().extract(contact_card, docs cards)`` once per arm and round and print
    the medians' table (module docstring).

    Args:
        arms: arm name -> a callable taking the host pipelines (``HostPipelines``) that sets
            the arm up before its timed call.
        docs, seed: the cards (``bench_extract_batch.documents``).
        rounds: rounds, arms alternated (``support.alternating``).

    Raises:
        AssertionError: the values differ between calls.
    """
    from structgen import Engine
    from structgen.runtime.cpu import layer_table
    from structgen.runtime.host_pipelines import host_pipelines

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(docs, seed)
    n = len(texts)
    engine = Engine()
    engine.extract(schema, texts[0])  # untimed: compile
    pipes = host_pipelines(engine)
    engine.extract(schema, texts)  # untimed: the first call of all the texts grows the KV pools
    counts = [0, 0, 0, 0.0]  # passes, C calls, rows, forward thread CPU s

    for e in (engine, *pipes.engines):  # under 64 texts extract runs on the engine itself

        def counted(scheduled, execute=e.runner.execute):
            rows = sum(num for _, num in scheduled.scheduled)
            t = time.thread_time()
            try:
                return execute(scheduled)
            finally:
                counts[0] += 1
                counts[1] += -(-rows // layer_table.MAX_STEP_ROWS)
                counts[2] += rows
                counts[3] += time.thread_time() - t

        e.runner.execute = counted
    res: dict[str, list[tuple[float, ...]]] = {a: [] for a in arms}
    first = None
    for r, arm in alternating(list(arms), rounds):
        arms[arm](pipes)
        pipes.flush_cache()
        engine.flush_cache()
        counts[:] = [0, 0, 0, 0.0]
        t, c = time.perf_counter(), time.process_time()
        out = engine.extract(schema, texts)
        wall, cpu = (time.perf_counter() - t) / n, (time.process_time() - c) / n
        first = out if first is None else first
        assert out == first, f"values differ in arm {arm}"
        res[arm].append((wall, cpu, counts[0], counts[1], counts[2], counts[3] / n))
        print(
            f"round {r}, arm {arm}: wall {wall:.3f} s/doc, process CPU {cpu:.3f} s/doc, "
            f"passes {counts[0]}, C calls {counts[1]}, rows {counts[2]}, forward thread "
            f"CPU {1000 * counts[3] / n:.1f} ms/doc, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    print("| arm | wall s/doc | process CPU s/doc | passes | C calls | rows "
          "| forward thread CPU ms/doc |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for arm in arms:
        m = [statistics.median(x[i] for x in res[arm]) for i in range(6)]
        print(
            f"| {arm} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.0f} | {m[3]:.0f} | {m[4]:.0f} "
            f"| {1000 * m[5]:.1f} |"
        )
    print("values equal across arms and rounds")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--values", default="32,64", help="rows per C call (without --base-ext)")
    ap.add_argument("--base-ext", default=None, help="another build's _decodestep .so")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from structgen.runtime.cpu import layer_table

    saved_rows, saved_ext = layer_table.MAX_STEP_ROWS, layer_table._ext
    if args.base_ext:
        base = load_decodestep(args.base_ext)
        arms = {"base": lambda _: setattr(layer_table, "_ext", base),
                "this": lambda _: setattr(layer_table, "_ext", saved_ext)}  # fmt: skip
    else:
        arms = {
            v: (lambda _, v=int(v): setattr(layer_table, "MAX_STEP_ROWS", v))
            for v in args.values.split(",")
        }
    try:
        run_arms(arms, args.docs, args.seed, args.rounds)
    finally:
        layer_table.MAX_STEP_ROWS, layer_table._ext = saved_rows, saved_ext


if __name__ == "__main__":
    main()
