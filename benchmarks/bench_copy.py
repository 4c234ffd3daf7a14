"""Copy constraints on SmolLM2-135M-Instruct: field accuracy with and without them, and
what a copy grammar costs per document.

On the documents of ``tests/extraction/data/copy_docs.json`` (10, written for the tests),
in one run and one process, greedy, extract's prompt (``extraction_messages``), all
documents in one batch:
  * compile + first mask of each document's copy grammar (``copy_constraint``, a fresh
    compile per document) beside the plain schema's (cached after its first compile);
  * field accuracy (strings case-folded, numbers equal) and tokens for copy on, copy on
    with scored span ends (``choose_span_ends``), and copy off;
  * the seconds each generation batch and the span scoring took.

Run:  PYTHONPATH=. python benchmarks/bench_copy.py [MAX_TOKENS]
Prints the figures; benchmarks/RESULTS.md ("Copy constraints") records a run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

import structgen
from structgen import SamplingParams
from structgen.extraction import extraction_messages
from structgen.extraction.copy import copy_constraint
from structgen.extraction.spans import choose_span_ends
from structgen.fsm.spec import JsonSchema

ROOT = Path(__file__).resolve().parents[1]


def score(got, expected: dict) -> int:
    """Fields of ``expected`` that ``got`` has right (strings case-folded, stripped)."""
    ok = 0
    for key, want in expected.items():
        value = got.get(key) if isinstance(got, dict) else None
        if isinstance(want, str):
            ok += isinstance(value, str) and value.casefold().strip() == want.casefold()
        else:
            ok += value == want
    return ok


def main() -> None:
    max_tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    docs = json.loads((ROOT / "tests/extraction/data/copy_docs.json").read_text())
    person = json.loads((ROOT / "examples/schemas/person.json").read_text())
    t0 = time.perf_counter()
    engine = structgen.Engine()
    print("load s", round(time.perf_counter() - t0, 1), flush=True)
    schemas = [person if d["schema"] == "person" else d["schema"] for d in docs]
    texts = [d["text"] for d in docs]
    prompts = [extraction_messages(s, t) for s, t in zip(schemas, texts)]
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    buf = torch.zeros((1, (engine.vocab.vocab_size + 31) // 32), dtype=torch.int32)
    plans, grammars, copy_s, plain_s = [], [], [], []
    for schema, text in zip(schemas, texts):
        t0 = time.perf_counter()
        JsonSchema(schema).compile(engine.vocab).matcher().fill_bitmask(buf, 0)
        plain_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        plan = copy_constraint(schema, text, True)
        grammar = plan.spec.compile(engine.vocab)
        grammar.matcher().fill_bitmask(buf, 0)
        copy_s.append(time.perf_counter() - t0)
        plans.append(plan)
        grammars.append(grammar)
    print("compile+first mask s, copy:", [round(x, 3) for x in copy_s], flush=True)
    print("compile+first mask s, plain:", [round(x, 3) for x in plain_s], flush=True)
    plain = [JsonSchema(s, allow_extra_properties=False) for s in schemas]
    for label, constraints in [("copy", grammars), ("no copy", plain)]:
        t0 = time.perf_counter()
        outs = engine.generate(prompts, params, constraints)
        gen_s = time.perf_counter() - t0
        raws = [o.text if o.finish_reason == "stop" else "" for o in outs]
        tokens = sum(len(o.token_ids) for o in outs)
        lengths = sum(o.finish_reason == "length" for o in outs)
        print(f"{label}: generate s {gen_s:.1f}, tokens {tokens}, max_tokens hit {lengths}")
        variants = [(label, raws)]
        if label == "copy":
            t0 = time.perf_counter()
            scored = [
                choose_span_ends(engine, s, [p], [r], [t], [plan.copied_fields])[0]
                for s, p, r, t, plan in zip(schemas, prompts, raws, texts, plans)
            ]
            print(f"span scoring s {time.perf_counter() - t0:.1f}", flush=True)
            variants.append(("copy + scored ends", scored))
        for name, texts_out in variants:
            right = total = 0
            for doc, raw in zip(docs, texts_out):
                try:
                    got = json.loads(raw)
                except ValueError:
                    got = None
                right += score(got, doc["expected"])
                total += len(doc["expected"])
                print("  ", name, raw, flush=True)
            print(f"RESULT {name}: {right}/{total} fields ({right / total:.3f})", flush=True)


if __name__ == "__main__":
    main()
