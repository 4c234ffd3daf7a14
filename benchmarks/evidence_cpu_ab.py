"""Thread CPU of the evidence pass per document, two checkouts (A/B) and an A/A.

``apply_evidence`` (``structgen.extraction.evidence``) is run over every document of a
set on the model's outputs saved with evidence off (a ``bench_extract.py --extract-kwargs
'{"evidence": false}' --json RUN.json`` file), in a fresh process per arm and round with
the arm's checkout first on ``sys.path``; the arms alternate their order from round to
round (``support.alternating``). Each process runs the pass once untimed (imports, regex
compiles), then ``--passes`` times timed with ``time.thread_time``; it reports the median
pass in milliseconds per document. The base runs twice per round (``base`` and
``base-aa``): their ratio is the noise.

    python benchmarks/evidence_cpu_ab.py --raw RUN.json --data-dir benchmarks/data/extraction \
        --base /path/to/base/checkout [--rounds 7] [--passes 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.support import alternating  # noqa: E402

_WORKER = r"""
import json, statistics, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[1] + "/benchmarks")
from extraction_scoring import load_documents
from structgen.extraction.evidence import apply_evidence
docs = load_documents(Path(sys.argv[2]))
run = json.loads(Path(sys.argv[3]).read_text())["structgen"]["per_doc"]
by_id = {r["id"]: r["value"] for r in run}
work = [(d.schema, d.text, by_id[d.id]) for d in docs if by_id.get(d.id) is not None]
def one():
    t0 = time.thread_time()
    for schema, text, value in work:
        apply_evidence(schema, text, value)
    return (time.thread_time() - t0) * 1000 / len(work)
one()
print(json.dumps(statistics.median(one() for _ in range(int(sys.argv[4])))))
"""


def _arm(tree: Path, data_dir: Path, raw: Path, passes: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, str(tree), str(data_dir), str(raw), str(passes)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--raw", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--base", type=Path, required=True, help="the base checkout")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    trees = {"base": args.base.resolve(), "base-aa": args.base.resolve(), "this": ROOT}
    times: dict[str, list[float]] = {k: [] for k in trees}
    for r, arm in alternating(list(trees), args.rounds):
        times[arm].append(_arm(trees[arm], args.data_dir.resolve(), args.raw, args.passes))
        if all(len(v) == r + 1 for v in times.values()):
            print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in times.items()))
    med = {k: statistics.median(v) for k, v in times.items()}
    print("thread CPU ms/doc, medians:", ", ".join(f"{k} {v:.2f}" for k, v in med.items()))
    print(f"this / base {med['this'] / med['base']:.3f}x; A/A base-aa / base "
          f"{med['base-aa'] / med['base']:.3f}x")  # fmt: skip


if __name__ == "__main__":
    main()
