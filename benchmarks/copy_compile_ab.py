"""A/B of the per-document copy-constraint compile of extract (#23): thread CPU per contact
card of ``copy_constraint`` + ``extractor._compiled`` + ``extractor._fit_budget``, as
``extractor._extract_part`` runs them for each text (schema: the dev set's
``contact_card`` with every property required and nullable; texts:
``bench_extract_batch.documents``, every one different).

Each arm is a tree (``--arm NAME=PATH``, repeat the base tree under two names for the A/A
arm); each measurement is one fresh process of that tree (engine loaded, one card untimed,
then ``--cards`` cards timed, each with ``time.thread_time``), processes of the arms
alternated (``support.alternating``). Reported: the median over rounds of each process's
median ms per card, and the ratio of each arm to the first.

Run:  python benchmarks/copy_compile_ab.py --arm base=/work/wt-base --arm base2=/work/wt-base \
          --arm new=. [--rounds 5] [--cards 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(cards: int) -> None:
    """One process's measurement (the tree on ``PYTHONPATH``): prints a JSON list of ms."""
    import time

    saved = list(sys.path)
    from bench_extract_batch import documents  # it puts its own tree first on sys.path

    sys.path[:] = saved
    from structgen import Engine
    from structgen.extraction import extractor
    from structgen.extraction.copy import copy_constraint
    from structgen.extraction.nulls import nullable_required

    schema = json.loads((HERE / "data/extraction/schemas/contact_card.json").read_text())
    gsd = nullable_required(schema)
    vocab = Engine().vocab
    texts = documents(cards + 1, seed=0)
    out = []
    for text in texts:
        t0 = time.thread_time()
        plan, grammar = extractor._compiled(copy_constraint(gsd, text, None), gsd, vocab)
        extractor._fit_budget(plan, grammar, gsd, vocab, 512)
        out.append(1000 * (time.thread_time() - t0))
    print(json.dumps(out[1:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", action="append", default=[], help="NAME=TREE")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cards", type=int, default=200)
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.cards)
        return
    sys.path.insert(0, str(HERE))
    from support import alternating

    arms = dict(a.split("=", 1) for a in args.arm)
    per: dict[str, list[float]] = {name: [] for name in arms}
    for _, name in alternating(list(arms), args.rounds):
        env = {**os.environ, "PYTHONPATH": str(Path(arms[name]).resolve())}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--measure", "--cards"]
        done = subprocess.run(cmd + [str(args.cards)], env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(done.stderr)
        ms = json.loads(done.stdout.strip().splitlines()[-1])
        per[name].append(statistics.median(ms))
        print(f"{name}: median {per[name][-1]:.3f} ms/card, total {sum(ms):.0f} ms", flush=True)
    first = statistics.median(per[next(iter(arms))])
    for name, values in per.items():
        m = statistics.median(values)
        print(f"{name}: {m:.3f} ms/card ({m / first:.3f}x of the first arm), rounds {values}")


if __name__ == "__main__":
    main()
