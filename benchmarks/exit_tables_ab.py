"""``LexicalMaskCache.exit_tables`` of two checkouts on SmolLM2's vocabulary, same process.

The exit-byte sets the five schemas of data/cold_schemas.json ask for (recorded while their
instances are forced), each built afresh by the baseline's cache and this checkout's,
alternated, thread CPU time, median of 15 per set; both must give the same tokens and
tries. Prints a markdown table (ms per exit set).

    PYTHONPATH=. python benchmarks/exit_tables_ab.py /work/main
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
from benchmarks.cold_ab import _load_checkout  # noqa: E402
from structgen.fsm.index.lexical_masks import LexicalMaskCache  # noqa: E402

RUNS = 15


def _exit_sets(tok, eng) -> list[int]:
    """The exit-byte sets asked for while forcing the five cold schemas, in order."""
    lex = eng.vocab.lexical_masks
    seen: list[int] = []
    build = lex.exit_tables

    def record(mask: int):
        seen.append(mask)
        return build(mask)

    lex.exit_tables = record
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    for case in json.loads(bg.COLD_SCHEMAS.read_text()).values():
        text = json.dumps(case["instance"], separators=(",", ":"))
        m = eng.compile(case["schema"]).matcher()
        for t in tok.encode(text, add_special_tokens=False):
            m.fill_bitmask(buf, 0)
            m.advance(t)
    del lex.exit_tables
    return list(dict.fromkeys([*seen, 1 << ord('"')]))


def main() -> None:
    _load_checkout("structgen_base", Path(sys.argv[1]))
    base = importlib.import_module("structgen_base.fsm.index.lexical_masks")
    tok = bg.smollm2_tokenizer()
    eng = bg.Structgen(tok)
    vocab = eng.vocab
    caches = {
        "baseline": base.LexicalMaskCache(vocab, auto_prepare=False),
        "this": LexicalMaskCache(vocab, auto_prepare=False),
    }
    for lex in caches.values():  # per-vocabulary tables of each, outside the timing
        lex.exit_tables(1 << ord('"'))
    sums = dict.fromkeys(caches, 0.0)
    print("| exit set | baseline ms | this ms | baseline / this |\n|---|---|---|---|")
    for mask in _exit_sets(tok, eng):
        a, b = (lex.exit_tables(mask) for lex in caches.values())
        assert (a is None) == (b is None)
        if a is not None:
            assert np.array_equal(a[1], b[1]) and np.array_equal(a[0].token, b[0].token)
        per = {name: [] for name in caches}
        for i in range(RUNS):
            for name, lex in list(caches.items())[:: 1 if i % 2 else -1]:
                lex._exits.clear()
                t0 = time.thread_time()
                lex.exit_tables(mask)
                per[name].append(time.thread_time() - t0)
        med = {name: 1e3 * statistics.median(v) for name, v in per.items()}
        for name in caches:
            sums[name] += med[name]
        held = int(caches["this"].tokens_holding(mask).sum())
        print(
            f"| {mask.bit_count()} bytes, {held} tokens hold one | {med['baseline']:.3f} | "
            f"{med['this']:.3f} | {med['baseline'] / med['this']:.2f}x |"
        )
    print(
        f"| sum | {sums['baseline']:.2f} | {sums['this']:.2f} | "
        f"{sums['baseline'] / sums['this']:.2f}x |"
    )


if __name__ == "__main__":
    main()
