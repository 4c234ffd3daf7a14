"""A recursive schema's cold masks compiled as rules vs unrolled as a regex, same process.

The recursive schema of data/cold_schemas.json compiled with ``max_recursion_depth=None``
(its ``$ref`` cycle as grammar rules: a ``CompiledCFG``) and with ``max_recursion_depth=D``
(unrolled D levels into one regex: a ``CompiledGrammar``), and as rules on a vocabulary
whose shared head parts are off (``rules-whole``: bench_grammar's ``StructgenWhole``, every
first mask of a configuration walked whole, as before CFG states split on the lexer state),
alternated pass by pass, every cache emptied before each compile (bench_grammar's
cold-empty), thread CPU time: per-token mask mean and compile + masks of the instance,
median over 7 passes. Prints one line per path and the ratios.

    PYTHONPATH=. python benchmarks/cold_rules_vs_regex.py [D]   # D defaults to 6
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch

import benchmarks.bench_grammar as bg
from structgen.fsm import clear_cache, compile_json_schema


def main() -> None:
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    tok = bg.smollm2_tokenizer()
    eng = bg.Structgen(tok)  # rules and regex: one vocabulary, as before
    engines = {"rules": eng, "regex": eng, "rules-whole": bg.StructgenWhole(tok)}
    case = json.loads(bg.COLD_SCHEMAS.read_text())["recursive"]
    text = json.dumps(case["instance"], separators=(",", ":"))
    ids = tok.encode(text, add_special_tokens=False)
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    clock = time.thread_time
    res: dict[str, list] = {name: [] for name in engines}
    for p in range(7):
        order = list(engines) if p % 2 == 0 else list(reversed(engines))
        for which in order:
            vocab = engines[which].vocab
            clear_cache()
            vocab.lexical_masks.clear()
            t0 = clock()
            g = compile_json_schema(
                case["schema"],
                vocab,
                strict=False,
                allow_extra_properties=True,
                max_recursion_depth=depth if which == "regex" else None,
            )
            comp = clock() - t0
            m = g.matcher()
            masks, ok = 0.0, True
            for t in ids:
                a = clock()
                m.fill_bitmask(buf, 0)
                masks += clock() - a
                ok = m.advance(t) and ok
            res[which].append((masks / len(ids), comp + masks, type(g).__name__, ok))
    med = {}
    for which, runs in res.items():
        mean = np.median([r[0] for r in runs]) * 1e6
        total = np.median([r[1] for r in runs]) * 1e3
        med[which] = (mean, total)
        print(
            f"{which}: {runs[0][2]}, every token advanced {all(r[3] for r in runs)}, "
            f"cold mask mean {mean:.0f} us per token, compile + masks {total:.1f} ms"
        )
    for a, b in (("rules", "regex"), ("rules-whole", "regex"), ("rules-whole", "rules")):
        print(
            f"{a} / {b}: mask mean {med[a][0] / med[b][0]:.2f}x, "
            f"compile + masks {med[a][1] / med[b][1]:.2f}x"
        )


if __name__ == "__main__":
    main()
