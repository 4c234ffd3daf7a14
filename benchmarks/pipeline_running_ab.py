"""One-process A/B of the host pipelines' ``max_running_requests`` in the batched extraction
(#23): ``Engine().extract(contact_card, N cards)`` on the default two host pipelines, each
pipeline's scheduler set to one value per arm, arms alternated (order reversed every other
round), every pipeline's prefix cache and the engine's flushed before each timed call (each
call computes the schema head and every card's own tokens, the same work in every arm).

Per call: wall and process CPU per card, the pipelines' forward passes, the tokens (rows)
through them, the 64-row C calls they make (``ceil(rows / 64)`` a pass: ``CpuDecoder`` runs a
pass as consecutive calls of ``MAX_STEP_ROWS`` = 64 rows), and the forwards' thread CPU per
card; medians per arm. The greedy values must be equal in every call (the kernels are batch
invariant): ``AssertionError`` otherwise.

Run:  PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/pipeline_running_ab.py \
          --docs 200 --values 64,128 --rounds 2
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--values", default="64,128", help="max_running_requests values")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from structgen import Engine
    from structgen.runtime.host_pipelines import host_pipelines

    values = [int(v) for v in args.values.split(",")]
    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs, args.seed)
    n = len(texts)
    engine = Engine()
    engine.extract(schema, texts[0])  # untimed: compile
    pipes = host_pipelines(engine)
    counts = [0, 0, 0, 0.0]  # passes, 64-row calls, rows, forward thread CPU s

    for e in pipes.engines:

        def counted(scheduled, execute=e.runner.execute):
            rows = sum(num for _, num in scheduled.scheduled)
            t = time.thread_time()
            try:
                return execute(scheduled)
            finally:
                counts[0] += 1
                counts[1] += -(-rows // 64)
                counts[2] += rows
                counts[3] += time.thread_time() - t

        e.runner.execute = counted
    res: dict[int, list[tuple[float, ...]]] = {v: [] for v in values}
    first = None
    for r, v in alternating(values, args.rounds):
        for e in pipes.engines:
            e.scheduler.max_running_requests = v
        pipes.flush_cache()
        engine.flush_cache()
        counts[:] = [0, 0, 0, 0.0]
        t, c = time.perf_counter(), time.process_time()
        out = engine.extract(schema, texts)
        wall, cpu = (time.perf_counter() - t) / n, (time.process_time() - c) / n
        first = out if first is None else first
        assert out == first, f"values differ at max_running_requests={v}"
        res[v].append((wall, cpu, counts[0], counts[1], counts[2], counts[3] / n))
        print(
            f"round {r}, max_running_requests {v}: wall {wall:.3f} s/doc, process CPU "
            f"{cpu:.3f} s/doc, passes {counts[0]}, 64-row calls {counts[1]}, rows "
            f"{counts[2]}, forward thread CPU {1000 * counts[3] / n:.1f} ms/doc, load "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    print("| max_running_requests | wall s/doc | process CPU s/doc | passes | 64-row calls "
          "| rows | forward thread CPU ms/doc |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for v in values:
        m = [statistics.median(x[i] for x in res[v]) for i in range(6)]
        print(
            f"| {v} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.0f} | {m[3]:.0f} | {m[4]:.0f} "
            f"| {1000 * m[5]:.1f} |"
        )
    print("values equal across arms and rounds")


if __name__ == "__main__":
    main()
