"""One-process A/B of the host pipelines' prefix import (#23): ``Engine().extract(contact_card,
N cards)`` on the default two host pipelines whose schedulers copy what the engine's prefix
cache holds of a card's prompt (the schema's shared head; ``Engine.host_pipeline``,
``RadixCache.import_prefix``) against the same pipelines computing it themselves (their
``scheduler.prefix_source`` set to None: each fresh pipeline computes the head in a first
pass of one card while its other cards wait for it, as before).

Before each timed call (as ``bench_extract_batch.py``'s batched call meets them): every
pipeline's prefix cache flushed, the engine's flushed and one card outside the set extracted on
the engine (untimed: the engine's cache holds the schema head and that card only, never a card
of the set), after one untimed call of all the cards (the pipelines' KV pools grown). Arms
alternated (``support.alternating``); ``import (A/A)`` is the import arm again, for the noise.
Per call: wall, process CPU per card (every thread), forward passes, rows (tokens) through the
pipelines' forwards, prompt tokens the pipelines' caches served; medians per arm. The greedy
values must be equal in every call (imported KV is what the pipeline would compute: the kernels
are batch and thread-count invariant): ``AssertionError`` otherwise.

Run:  PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/pipeline_import_ab.py \
          --docs 200 --rounds 2
"""

from __future__ import annotations

import argparse
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

KEYS = ("wall", "cpu", "passes", "rows", "hits")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from structgen import Engine
    from structgen.runtime.host_pipelines import host_pipelines

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs, args.seed)
    spare = documents(args.docs + 1, args.seed)[-1]  # not in the set
    n = len(texts)
    engine = Engine()
    engine.extract(schema, spare)  # untimed: compile, the schema head cached
    pipes = host_pipelines(engine)
    sources = [e.scheduler.prefix_source for e in pipes.engines]
    assert all(sources), "the pipelines have no prefix source"
    engine.extract(schema, texts)  # untimed: the first call of all the cards grows the pools
    counts = [0, 0]  # passes, rows

    for e in pipes.engines:

        def counted(scheduled, execute=e.runner.execute):
            counts[0] += 1
            counts[1] += sum(num for _, num in scheduled.scheduled)
            return execute(scheduled)

        e.runner.execute = counted

    def set_sources(on: bool) -> None:
        for e, s in zip(pipes.engines, sources):
            e.scheduler.prefix_source = s if on else None

    arms = {"compute": False, "import": True, "import (A/A)": True}
    res: dict[str, dict[str, list[float]]] = {a: {k: [] for k in KEYS} for a in arms}
    first = None
    try:
        for r, arm in alternating(list(arms), args.rounds):
            set_sources(arms[arm])
            pipes.flush_cache()
            engine.flush_cache()
            engine.extract(schema, spare)  # untimed: the engine's cache holds the head only
            hits0 = sum(e.scheduler.num_prefix_hit_tokens for e in pipes.engines)
            counts[:] = [0, 0]
            t, c = time.perf_counter(), time.process_time()
            out = engine.extract(schema, texts)
            wall, cpu = (time.perf_counter() - t) / n, (time.process_time() - c) / n
            hits = sum(e.scheduler.num_prefix_hit_tokens for e in pipes.engines) - hits0
            first = out if first is None else first
            assert out == first, f"values differ in arm {arm}, round {r}"
            for k, v in zip(KEYS, (wall, cpu, counts[0], counts[1], hits)):
                res[arm][k].append(v)
            print(
                f"round {r}, {arm}: wall {wall:.3f} s/doc, process CPU {1000 * cpu:.1f} ms/doc, "
                f"passes {counts[0]}, rows {counts[1]}, cache-served prompt tokens {hits}; "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        set_sources(True)
    base = statistics.median(res["compute"]["cpu"])
    print(
        "\n| arm | process CPU ms/doc (rounds) | median | compute / arm (CPU) | wall s/doc, median "
        "| passes | rows | rows/doc | cache-served prompt tokens |\n" + "|---" * 9 + "|"
    )
    for arm in arms:
        m = {k: statistics.median(v) for k, v in res[arm].items()}
        print(
            f"| {arm} | {', '.join(f'{1000 * x:.1f}' for x in res[arm]['cpu'])} "
            f"| {1000 * m['cpu']:.1f} | {base / m['cpu']:.3f}x | {m['wall']:.3f} "
            f"| {m['passes']:.0f} | {m['rows']:.0f} | {m['rows'] / n:.2f} | {m['hits']:.0f} |"
        )
    print("values equal across arms and rounds; load average at the end: "
          + " / ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip


if __name__ == "__main__":
    main()
