"""In-process A/B of the grammar automaton's initial tables on a recursive schema's cold
request (thread CPU): main's start (64 rows filled with -1, 64 configuration slots, grown
by doubling) against the current one (``automaton._ROW_CAPACITY`` unfilled rows and
configuration slots). "old" passes reset the tables to main's right after the automaton is
constructed (no row is built by then); the passes interleave, the order alternating, as
``cold_ab``'s (its ``_pass``: compile with every per-grammar cache emptied, then a mask and
an advance per token). Prints the medians of total, masks and compile (ms) per mode.

    PYTHONPATH=. nice -n 10 python benchmarks/row_tables_ab.py [--passes 31]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402
import structgen.fsm.grammar.automaton as automaton  # noqa: E402

OLD_CAPACITY = 64


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=31)
    args = ap.parse_args()
    init = automaton.GrammarAutomaton.__init__
    mode = {"old": False}

    def patched(self, *a, **k):
        init(self, *a, **k)
        if mode["old"]:
            n = self.num_states
            if self._num_rows or n > OLD_CAPACITY:
                raise RuntimeError("rows built or configurations past 64 at construction")
            self._rows = np.full((OLD_CAPACITY, 256), -1, np.int32)
            accepting = np.zeros(OLD_CAPACITY, bool)
            accepting[:n] = self._accepting[:n]
            self._slot = np.full(OLD_CAPACITY, -1, np.int64)
            self._accepting = accepting

    automaton.GrammarAutomaton.__init__ = patched
    tok = bg.smollm2_tokenizer()
    eng = ca._StructgenOf("new", "structgen", tok)
    _, kind, spec, ids = ca._workloads(tok, {"recursive"})[0]
    gc.collect()
    gc.freeze()
    res: dict[str, list[tuple[float, float, float]]] = {"old": [], "new": []}
    for p in range(args.passes):
        for m in ("old", "new") if p % 2 else ("new", "old"):
            mode["old"] = m == "old"
            masks, total, n_ok, compile_s = ca._pass(eng, kind, spec, ids)
            if n_ok != len(ids):
                raise RuntimeError(f"{m}: the instance was rejected at token {n_ok}")
            res[m].append((total, sum(masks), compile_s))
    print("| workload | what | old ms | new ms | old / new |")
    print("|---|---|---|---|---|")
    for i, what in enumerate(("total", "masks", "compile")):
        old = statistics.median(r[i] for r in res["old"])
        new = statistics.median(r[i] for r in res["new"])
        print(
            f"| recursive ({len(ids)}) | {what} | {old * 1e3:.3f} | {new * 1e3:.3f}"
            f" | {old / new:.3f}x |"
        )


if __name__ == "__main__":
    main()
