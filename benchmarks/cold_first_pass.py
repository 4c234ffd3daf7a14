"""The first cold pass of each schema of data/cold_schemas.json in a fresh process.

What a server's first requests pay: besides compile, masks and advances, the per-vocabulary
tables built on the way (``LexicalMaskCache.exit_tables``: one per new exit-byte set), which
every later pass of a process (``cold_cpu_time.py``, ``cold_ab.py``, bench_grammar's median
of three) finds built. Thread CPU time, SmolLM2 49k. Prints one JSON line: schema ->
[total ms (compile + masks + advances), masks ms, exit sets built]. Before / after: run it
from each checkout in turn, alternated, several times:

    cd CHECKOUT && PYTHONPATH=. python /path/to/benchmarks/cold_first_pass.py
"""

from __future__ import annotations

import json

import torch

import benchmarks.bench_grammar as bg
from benchmarks.cold_cpu_time import timed_pass


def main() -> None:
    tok = bg.smollm2_tokenizer()
    eng = bg.Structgen(tok)
    lex = eng.vocab.lexical_masks
    cases = json.loads(bg.COLD_SCHEMAS.read_text())
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    out = {}
    for name, case in cases.items():
        text = json.dumps(case["instance"], separators=(",", ":"))
        ids = tok.encode(text, add_special_tokens=False)
        num_exits = len(lex._exits)
        comp, masks, adv, _ = timed_pass(eng, buf, case["schema"], ids)
        total = 1e3 * (comp + sum(masks) + adv)
        out[name] = [round(total, 3), round(1e3 * sum(masks), 3), len(lex._exits) - num_exits]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
