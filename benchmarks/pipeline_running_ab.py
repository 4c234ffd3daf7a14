"""One-process A/B of the host pipelines' ``max_running_requests`` in the batched extraction
(#23): ``Engine().extract(contact_card, N cards)`` on the default two host pipelines, each
pipeline's scheduler set to one value per arm; the harness is ``batched_forward_ab.run_arms``
(arms alternated, order reversed every other round, every pipeline's prefix cache and the
engine's flushed before each timed call, after one untimed call of all the cards).

Per call: wall and process CPU per card, the forward passes, the tokens (rows) through them,
the C calls they make (``ceil(rows / MAX_STEP_ROWS)`` a pass), and the forwards' thread CPU per
card; medians per arm. The greedy values must be equal in every call (the kernels are batch
invariant): ``AssertionError`` otherwise.

Run:  PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/pipeline_running_ab.py \
          --docs 200 --values 64,128 --rounds 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from batched_forward_ab import run_arms  # noqa: E402


def _max_running(value: int):
    def set_up(pipes) -> None:
        for e in pipes.engines:
            e.scheduler.max_running_requests = value

    return set_up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--values", default="64,128", help="max_running_requests values")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    arms = {f"max_running_requests={v}": _max_running(int(v)) for v in args.values.split(",")}
    run_arms(arms, args.docs, args.seed, args.rounds)


if __name__ == "__main__":
    main()
