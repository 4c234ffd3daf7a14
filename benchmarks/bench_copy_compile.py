"""Per-document cost of a copy constraint: ``copy_constraint(schema, text)`` (the
``CopyJsonSchema`` conversion) and ``extractor._compiled`` (its compile for the vocabulary),
the serial Python each document of ``structgen extract`` pays before decoding (#23).

The documents are ``bench_extract_batch``'s contact cards (every text different), the schema
the dev set's ``contact_card``. The first document is untimed (warms the process: caches
of text-independent pieces fill there); the medians are over the next ``--docs``. The
``structgen`` measured is the one on ``PYTHONPATH`` (printed), so one copy of this script
times two trees: run it alternately with each tree's path.

Run:  PYTHONPATH=TREE python benchmarks/bench_copy_compile.py [--docs 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    saved = list(sys.path)
    from bench_extract_batch import documents  # it puts its own tree first on sys.path

    sys.path[:] = saved
    import structgen
    from structgen import Engine
    from structgen.extraction.copy import copy_constraint
    from structgen.extraction.extractor import _compiled

    schema = json.loads((HERE / "data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs + 1, args.seed)
    vocab = Engine().vocab
    convert, compile_ = [], []
    for text in texts:
        t0 = time.perf_counter()
        plan = copy_constraint(schema, text)
        t1 = time.perf_counter()
        _compiled(plan, schema, vocab)
        convert.append(t1 - t0)
        compile_.append(time.perf_counter() - t1)
    c, k = statistics.median(convert[1:]), statistics.median(compile_[1:])
    print(f"{Path(structgen.__file__).parents[1]}: copy_constraint {c:.3f} s, compile {k:.3f} s")


if __name__ == "__main__":
    main()
