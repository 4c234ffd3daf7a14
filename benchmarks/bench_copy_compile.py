"""Per-document cost of a copy constraint: ``copy_constraint(schema, text)`` (the
``CopyJsonSchema`` conversion) and ``extractor._compiled`` (its compile for the vocabulary),
the serial Python each document of ``structgen extract`` pays before decoding (#23).

The documents are ``bench_extract_batch``'s contact cards (every text different), the schema
the dev set's ``contact_card``. The first document is untimed (warms the process: caches
of text-independent pieces fill there); the medians (thread CPU, ms) are over the next
``--docs``. The ``structgen`` measured is the one on ``PYTHONPATH`` (printed), so one copy of
this script times two trees: run it alternately with each tree's path. ``lowered`` hashes
every document's lowering and copied fields (equal hashes: the trees write the same
grammars).

Run:  PYTHONPATH=TREE python benchmarks/bench_copy_compile.py [--docs 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import hashlib
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
    digest = hashlib.sha256()
    for text in texts:
        t0 = time.thread_time()
        plan = copy_constraint(schema, text)
        t1 = time.thread_time()
        _compiled(plan, schema, vocab)
        convert.append(t1 - t0)
        compile_.append(time.thread_time() - t1)
        digest.update(repr((plan.spec.lower(), plan.copied_fields)).encode())
    c, k = statistics.median(convert[1:]), statistics.median(compile_[1:])
    print(
        f"{Path(structgen.__file__).parents[1]}: copy_constraint {1000 * c:.3f} ms, "
        f"compile {1000 * k:.3f} ms (thread CPU, median of {args.docs}), "
        f"lowered {digest.hexdigest()[:16]}"
    )


if __name__ == "__main__":
    main()
