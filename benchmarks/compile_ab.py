"""Grammar compile time of two structgen checkouts and llguidance in one process (CPU time).

The baseline checkout (``--baseline DIR``, loaded as ``structgen_base`` as in ``cold_ab.py``)
and this one compile each named file of ``benchmarks/data/grammars`` with every cache emptied
first (``cold_ab``'s engines), alternated, with llguidance (its grammar and matcher, where it
compiles) after them; process time, best of ``--repeat`` per engine.

    PYTHONPATH=. python benchmarks/compile_ab.py --baseline /work/main [--repeat 15]
        [--names sql_select.lark,c_statements.lark,arithmetic.lark,json.gbnf]
        [--tokenizer smollm2|bpe150k]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402
import benchmarks.grammar_cfg_mode as gm  # noqa: E402

NAMES = "sql_select.lark,c_statements.lark,arithmetic.lark,json.gbnf"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--names", default=NAMES, help="comma-separated files of data/grammars")
    ap.add_argument(
        "--tokenizer", choices=["smollm2", "bpe150k"], default="smollm2", help="vocabulary"
    )
    args = ap.parse_args()
    ca._load_checkout("structgen_base", args.baseline)
    tok = bg.bpe_150k_tokenizer() if args.tokenizer == "bpe150k" else bg.smollm2_tokenizer()
    old = ca._StructgenOf("old", "structgen_base", tok)
    new = ca._StructgenOf("new", "structgen", tok)
    llg = ca._LLGuidance(tok)
    gc.collect()
    gc.freeze()
    print("| grammar | old ms | new ms | llguidance ms | new / old | new / llguidance |")
    print("|---|---|---|---|---|---|")
    for name in args.names.split(","):
        text = (gm.DATA / name).read_text(encoding="utf-8")
        kind = "lark" if name.endswith(".lark") else "gbnf"
        best = {"old": float("inf"), "new": float("inf"), "llg": float("inf")}
        for r in range(args.repeat):
            order = ((old, "old"), (new, "new")) if r % 2 else ((new, "new"), (old, "old"))
            for eng, key in order:
                t0 = time.process_time()
                getattr(eng, kind)(text)
                best[key] = min(best[key], time.process_time() - t0)
            t0 = time.process_time()
            llg.matcher(getattr(llg, kind)(text))
            best["llg"] = min(best["llg"], time.process_time() - t0)
        o, n, g = (best[k] * 1e3 for k in ("old", "new", "llg"))
        print(f"| {name} | {o:.2f} | {n:.2f} | {g:.2f} | {n / o:.2f}x | {n / g:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
