"""MaskBench sample compile time: a baseline structgen checkout, this one and llguidance in one
process, interleaved per schema (thread CPU time).

The baseline (``--baseline DIR``, loaded as ``structgen_base`` as in ``cold_ab.py``) and this
checkout compile each schema of the ``bench_maskbench --sample`` set (the first 60 archive
members of each subset in sorted name order) with ``bench_maskbench``'s scoring
(``compile_json_schema`` defaults but ``allow_extra_properties=True``, after ``clear_cache()``);
llguidance as ``bench_maskbench.LLGuidance`` (grammar and matcher). The three run one after
the other for each schema, their order rotating, best of ``--repeat`` (a schema whose first
structgen compile takes over 0.2 s: best of 1). Reported: p50 / p90 over the schemas all three
compile, the ratios to llguidance, and the schemas whose outcome (compiled or the error type)
differs between the two checkouts.

    PYTHONPATH=. python benchmarks/maskbench_compile_ab.py --baseline /work/main [--repeat 3]
        [--subsets Github_easy,...] [--per-subset 60]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_maskbench import (  # noqa: E402
    SAMPLE_PER_SUBSET,
    LLGuidance,
    iter_corpus,
    smollm2_tokenizer,
    subsets_on_disk,
)

import benchmarks.cold_ab as ca  # noqa: E402


class _Checkout:
    """``compile_json_schema`` of one structgen package, cold (its caches emptied first)."""

    def __init__(self, pkg: str, tok) -> None:
        import importlib

        self.fsm = importlib.import_module(f"{pkg}.fsm")
        self.vocab = self.fsm.Vocabulary.from_tokenizer(tok)
        _ = self.vocab.token_trie, self.vocab.index_tables

    def compile(self, schema):
        self.fsm.clear_cache()
        return self.fsm.compile_json_schema(schema, self.vocab, allow_extra_properties=True)


def _timed(fn, schema) -> tuple[float, str]:
    """(thread CPU seconds, outcome: "ok" or the error's type name)."""
    t0 = time.thread_time()
    try:
        fn(schema)
        out = "ok"
    except Exception as exc:  # noqa: BLE001 - a refusal is an outcome
        out = type(exc).__name__
    return time.thread_time() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--subsets", default="", help="comma-separated (default: all on disk)")
    ap.add_argument("--per-subset", type=int, default=SAMPLE_PER_SUBSET)
    args = ap.parse_args()
    ca._load_checkout("structgen_base", args.baseline)
    tok = smollm2_tokenizer()
    engines = {
        "base": _Checkout("structgen_base", tok).compile,
        "new": _Checkout("structgen", tok).compile,
        "llguidance": LLGuidance(tok).compile,
    }
    subsets = [s for s in args.subsets.split(",") if s] or subsets_on_disk()
    items = [
        (f"{sub}/{name}", json.loads(raw)["schema"])
        for sub, name, raw in iter_corpus(subsets, args.per_subset)
    ]
    best: dict[str, dict[str, float]] = {e: {} for e in engines}
    outcome: dict[str, dict[str, str]] = {e: {} for e in engines}
    names = list(engines)
    gc.collect()
    for i, (key, schema) in enumerate(items):
        reps = args.repeat
        for r in range(reps):
            order = names[(i + r) % 3 :] + names[: (i + r) % 3]
            for eng in order:
                dt, out = _timed(engines[eng], schema)
                best[eng][key] = min(dt, best[eng].get(key, dt))
                outcome[eng].setdefault(key, out)
            if best["new"][key] > 0.2:
                break
    both = [
        k for k, _ in items if all(outcome[e][k] == "ok" for e in engines)
    ]  # all three compiled
    ms = {e: np.array([best[e][k] for k in both]) * 1e3 for e in engines}
    print(f"{len(items)} schemas, {len(both)} compiled by all three; thread CPU ms")
    print("| engine | p50 ms | p90 ms | p50 / llguidance's |")
    print("|---|---|---|---|")
    llg50 = np.percentile(ms["llguidance"], 50)
    for e in engines:
        p50, p90 = np.percentile(ms[e], 50), np.percentile(ms[e], 90)
        print(f"| {e} | {p50:.2f} | {p90:.2f} | {p50 / llg50:.2f}x |")
    ratio = np.median(ms["new"] / ms["base"])
    print(f"median per-schema new / base: {ratio:.3f}")
    diff = [k for k, _ in items if outcome["base"][k] != outcome["new"][k]]
    print(f"outcomes differing between base and new: {len(diff)} {diff[:10]}")


if __name__ == "__main__":
    main()
