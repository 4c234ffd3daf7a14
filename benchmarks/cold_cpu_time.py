"""Cold-empty thread CPU time of structgen on the five schemas of data/cold_schemas.json.

Per schema, best of 3: compile + every mask + every advance of the instance, each compile
with every cache emptied (bench_grammar's Structgen engine), timed with ``time.thread_time``
(what load on shared cores distorts least). Prints one JSON line, schema -> [total s,
compile s, mean mask s, p99 mask s, accepted]. For before / after runs of two checkouts,
alternated:

    cd CHECKOUT && PYTHONPATH=. python /path/to/benchmarks/cold_cpu_time.py smollm2|bpe150k
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch

import benchmarks.bench_grammar as bg


def timed_pass(eng, buf, schema, ids, clock=time.thread_time):
    """One pass of ``schema`` over the token ids ``ids``: (compile s, [mask s per token],
    advances s, every advance accepted and the matcher accepting at the end)."""
    t0 = clock()
    g = eng.compile(schema)
    comp = clock() - t0
    m = g.matcher()
    masks, adv, ok = [], 0.0, True
    for t in ids:
        a = clock()
        m.fill_bitmask(buf, 0)
        b = clock()
        ok = m.advance(t) and ok
        adv += clock() - b
        masks.append(b - a)
    return comp, masks, adv, bool(ok and m.is_accepting())


def main() -> None:
    tok = bg.smollm2_tokenizer() if sys.argv[1] == "smollm2" else bg.bpe_150k_tokenizer()
    eng = bg.Structgen(tok)
    cases = json.loads(bg.COLD_SCHEMAS.read_text())
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    out = {}
    for name, case in cases.items():
        text = json.dumps(case["instance"], separators=(",", ":"))
        ids = tok.encode(text, add_special_tokens=False)
        best = None
        for _ in range(3):
            comp, masks, adv, accepted = timed_pass(eng, buf, case["schema"], ids)
            total = comp + sum(masks) + adv
            if best is None or total < best[0]:
                best = (
                    total,
                    comp,
                    float(np.mean(masks)),
                    float(np.percentile(masks, 99)),
                    accepted,
                )
        out[name] = best
    print(json.dumps(out))


if __name__ == "__main__":
    main()
