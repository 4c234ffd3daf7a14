"""cProfile of ``Engine.extract`` on one dev-set document (after one untimed document of
the same schema), printing the wall time and the top functions by cumulative time.

Where a document's seconds go (model forward, token-budget witnesses, copy constraint,
scoring passes); ``benchmarks/RESULTS.md`` records what it showed.

    OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/profile_extract.py medical_note-05 [--top 45]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "benchmarks" / "data" / "extraction"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("doc_id", help="a document id of documents.jsonl, e.g. medical_note-05")
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--top", type=int, default=45)
    args = ap.parse_args()
    from structgen import Engine

    lines = (args.data_dir / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines if line.strip()]
    doc = next((d for d in docs if d["id"] == args.doc_id), None)
    if doc is None:
        sys.exit(f"no document {args.doc_id!r} in {args.data_dir / 'documents.jsonl'}")
    schema = json.loads((args.data_dir / doc["schema"]).read_text(encoding="utf-8"))
    warm = next(d for d in docs if d["schema"] == doc["schema"] and d["id"] != doc["id"])
    engine = Engine()
    engine.extract(schema, warm["text"])  # untimed: the schema's compile, the prompt's prefix
    t0 = time.perf_counter()
    prof = cProfile.Profile()
    prof.enable()
    engine.extract(schema, doc["text"])
    prof.disable()
    print(f"{doc['id']}: {time.perf_counter() - t0:.2f} s wall (profiled)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
