"""The C trie walk's subtree shortcut on and off in one process (``trie.use_subtree_shortcut``).

Each of the five schemas of ``data/cold_schemas.json`` compiled afresh and forced through its
compact instance on SmolLM2 (cold_ab's cold-empty pass: every per-grammar cache emptied
before each compile), the shortcut on and off in alternate passes (which goes first swapped
every pass); per workload the medians over the passes of the masks' and the request's
thread CPU time (ms) and their ratios.

    PYTHONPATH=. python benchmarks/subtree_shortcut_ab.py [--passes 11] [--only formats,flat]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402
from structgen.fsm.index import trie  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=11)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    tok = bg.smollm2_tokenizer()
    eng = ca._StructgenOf("structgen", "structgen", tok)
    only = set(args.only.split(",")) if args.only else None
    work = [w for w in ca._workloads(tok, only) if w[1] == "schema"]
    print("| workload (tokens) | masks ms on / off | total ms on / off ", end="")
    print("| masks on/off | total on/off |")
    print("|---|---|---|---|---|")
    gc.freeze()
    for name, kind, spec, ids in work:
        res = {True: ([], []), False: ([], [])}
        for p in range(args.passes):
            for on in (True, False) if p % 2 else (False, True):
                trie.use_subtree_shortcut(on)
                masks, total, n_ok, _ = ca._pass(eng, kind, spec, ids)
                assert n_ok == len(ids), (name, on)
                res[on][0].append(sum(masks))
                res[on][1].append(total)
        trie.use_subtree_shortcut(True)
        m_on, m_off = (statistics.median(res[k][0]) * 1e3 for k in (True, False))
        t_on, t_off = (statistics.median(res[k][1]) * 1e3 for k in (True, False))
        print(
            f"| {name} ({len(ids)}) | {m_on:.3f} / {m_off:.3f} | {t_on:.3f} / {t_off:.3f} "
            f"| {m_on / m_off:.3f} | {t_on / t_off:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
