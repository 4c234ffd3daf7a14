"""The first masks of the formats schema's counted states (``fsm/index/count_masks.py``),
two structgen checkouts in one process (thread CPU).

The baseline (``--baseline DIR``, loaded as ``structgen_base`` as ``cold_ab.py`` does)
and this checkout compile the formats schema of ``data/cold_schemas.json`` cold-empty and
force its instance token by token, passes alternated; a token counts when this checkout
served its mask from a canonical state (``TokenIndex._walk_counts`` answered), or with
``--by-class`` by a table class (``TokenIndex._walk_by_class`` answered: an e-mail's local
part, a URI's states). Per such token: the median over the passes of each checkout's mask
time (us), and old / new.

    PYTHONPATH=. python benchmarks/counted_states_ab.py --baseline DIR [--passes 11]
        [--tokenizer smollm2|bpe150k] [--by-class]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path

import torch

import benchmarks.bench_grammar as bg
import benchmarks.cold_ab as ca


def _pass(eng, schema, ids, clock=time.thread_time) -> list[float]:
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    m = eng.matcher(eng.schema(schema))
    out = []
    for t in ids:
        a = clock()
        eng.mask(m, buf)
        out.append(clock() - a)
        assert eng.accept(m, t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--passes", type=int, default=11)
    ap.add_argument("--tokenizer", choices=["smollm2", "bpe150k"], default="bpe150k")
    ap.add_argument("--by-class", action="store_true", help="the states _walk_by_class serves")
    args = ap.parse_args()
    ca._load_checkout("structgen_base", args.baseline)
    tok = bg.bpe_150k_tokenizer() if args.tokenizer == "bpe150k" else bg.smollm2_tokenizer()
    old, new = (
        ca._StructgenOf("old", "structgen_base", tok),
        ca._StructgenOf("new", "structgen", tok),
    )
    case = json.loads(bg.COLD_SCHEMAS.read_text())["formats"]
    ids = tok.encode(json.dumps(case["instance"], separators=(",", ":")), add_special_tokens=False)

    from structgen.fsm.index.token_index import TokenIndex

    which = "_walk_by_class" if args.by_class else "_walk_counts"
    served, plain = set(), getattr(TokenIndex, which)
    step = [0]

    def flagged(self, state):
        mask = plain(self, state)
        if mask is not None:
            served.add(step[0])
        return mask

    setattr(TokenIndex, which, flagged)
    buf = torch.zeros((1, new.words), dtype=torch.int32)
    m = new.matcher(new.schema(case["schema"]))
    for i, t in enumerate(ids):
        step[0] = i
        new.mask(m, buf)
        new.accept(m, t)
    setattr(TokenIndex, which, plain)
    gc.collect()
    gc.freeze()
    times = {"old": [], "new": []}
    for p in range(args.passes):
        for eng in (old, new) if p % 2 == 0 else (new, old):
            times[eng.name].append(_pass(eng, case["schema"], ids))
    print("| token | text before it | old us | new us | old / new |")
    print("|---|---|---|---|---|")
    for i in sorted(served):
        o = statistics.median(r[i] for r in times["old"]) * 1e6
        n = statistics.median(r[i] for r in times["new"]) * 1e6
        before = tok.decode(ids[:i])[-14:].replace("|", "\\|")
        print(f"| {i} | `{before}` | {o:.0f} | {n:.0f} | {o / n:.2f}x |")


if __name__ == "__main__":
    main()
