"""Speculative decoding benchmark on SmolLM2-135M (CPU): extraction with n-gram lookup.

Workload: JSON-schema extraction (``structgen.extraction.extraction_messages``) over the
example schemas (person, event, invoice) and texts whose values the answer copies from
the input; greedy, one request at a time (batch-1 decode, where speculation pays) and
all at once (continuous batching). Each mode runs with speculation off and with
``speculative="ngram"``, on the same engine settings; outputs must be identical. The
same prompts without the grammar (free text, ``max_tokens`` capped) show the
unconstrained path.

Reported per mode: output tokens/s, target forward passes, acceptance rate, mean
tokens per verification, speedup vs off.

Run:  python benchmarks/bench_spec.py [--out benchmarks/RESULTS.md] [--k 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen import Engine, JsonSchema, SamplingParams
from structgen.extraction import extraction_messages

SCHEMAS = {name: json.loads((ROOT / "examples" / "schemas" / f"{name}.json").read_text())
           for name in ("person", "event", "invoice")}
TEXTS = {
    "person": [
        "Maria Lopez, 34, works as a nurse in Lyon. Maria Lopez has lived in Lyon since 2015.",
        "Our new colleague is Kenji Watanabe; Kenji Watanabe is 51 and teaches physics in Osaka.",
        "Record: name Alexandra Petrovna Ivanova, age 42, occupation software architect, "
        "city Saint Petersburg.",
    ],
    "event": [
        "The Annual Northern Lights Photography Workshop takes place on 2025-02-14 at the "
        "Tromsø Arctic Research Centre, organised by the Tromsø Photography Society.",
        "Reminder: the International Conference on Structured Generation will be held on "
        "2026-09-03 in the Grand Hall of the Vienna Congress Center.",
    ],
    "invoice": [
        "Invoice INV-2024-00871 for Globex Corporation Ltd. Currency: EUR. Items: 3 x "
        "Industrial Widget Model A at 19.99; 1 x Premium Support Contract (12 months) at "
        "499.00; 2 x Replacement Filter Cartridge at 24.50. Total: 607.97.",
        "Invoice number ACME-7731, customer Initech Software Solutions, currency USD: "
        "10 x Ergonomic Office Chair at 149.00, 4 x Standing Desk Converter at 89.95. "
        "Total 1849.80.",
    ],
}


def workload(engine: Engine, constrained: bool):
    prompts, cons = [], []
    for name, texts in TEXTS.items():
        for text in texts:
            prompts.append(extraction_messages(SCHEMAS[name], text))
            cons.append(JsonSchema(SCHEMAS[name]) if constrained else None)
    return prompts, cons


def run(engine: Engine, prompts, cons, params, batch: bool):
    before = engine.stats()
    t0 = time.perf_counter()
    if batch:
        outs = engine.generate(prompts, params, cons)
    else:
        outs = [engine.generate([p], params, c)[0] for p, c in zip(prompts, cons)]
    dt = time.perf_counter() - t0
    after = engine.stats()
    n_tok = sum(len(o.token_ids) for o in outs)
    prop = after["spec_proposed_tokens"] - before["spec_proposed_tokens"]
    acc = after["spec_accepted_tokens"] - before["spec_accepted_tokens"]
    steps = after.get("spec_verify_steps", 0) - before.get("spec_verify_steps", 0)
    return outs, {
        "tokens": n_tok,
        "seconds": dt,
        "tok_s": n_tok / dt,
        "forwards": after["num_forward_passes"] - before["num_forward_passes"],
        "acceptance": acc / prop if prop else float("nan"),
        "mean_len": (acc + steps) / steps if steps else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="append the tables to this markdown file")
    ap.add_argument("--k", type=int, default=4, help="speculative tokens per step")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--quick", action="store_true",
                    help="4 prompts (2 person, 1 event, 1 invoice), batch-1 only")
    args = ap.parse_args()
    if args.quick:
        for name, keep in (("person", 2), ("event", 1), ("invoice", 1)):
            TEXTS[name] = TEXTS[name][:keep]
    common = dict(dtype="float32", max_kv_tokens=16384)
    engines = {
        "off": Engine(**common),
        "ngram": Engine(speculative={"method": "ngram", "num_tokens": args.k}, **common),
    }
    rows = []
    for constrained in (True, False):
        params = SamplingParams(max_tokens=args.max_tokens if constrained else 96, temperature=0.0)
        for batch in (False,) if args.quick else (False, True):
            prompts, cons = workload(engines["off"], constrained)
            warm = SamplingParams(max_tokens=1, temperature=0.0)
            for engine in engines.values():  # grammars compiled, prompts in the prefix cache
                engine.generate(prompts, warm, cons)
            ref, base = run(engines["off"], prompts, cons, params, batch)
            for name, engine in engines.items():
                outs, m = (ref, base) if name == "off" else run(engine, prompts, cons, params, batch)
                same = [o.token_ids for o in outs] == [r.token_ids for r in ref]
                rows.append((("JSON schema" if constrained else "free text"),
                             ("batched" if batch else "batch-1"), name, m, m["tok_s"] / base["tok_s"],
                             same))
                print(rows[-1], flush=True)
    lines = [
        f"## Speculative decoding, n-gram lookup ({time.strftime('%Y-%m-%d')}, SmolLM2-135M fp32, "
        f"CPU {torch.get_num_threads()} threads, k={args.k})",
        "",
        f"Command: `python benchmarks/bench_spec.py --k {args.k}{' --quick' if args.quick else ''}`; "
        f"{sum(map(len, TEXTS.values()))} extraction prompts "
        "(person / event / invoice schemas, texts whose values the answer copies), greedy; "
        "prompts prefilled once before timing (both engines hit their prefix cache).",
        "",
        "| grammar | batching | speculation | output tokens | tokens/s | target forwards | "
        "acceptance | tokens / verification | speedup | identical output |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g, b, name, m, ratio, same in rows:
        acc = "-" if m["acceptance"] != m["acceptance"] else f"{m['acceptance']:.2f}"
        ml = "-" if m["mean_len"] != m["mean_len"] else f"{m['mean_len']:.2f}"
        lines.append(f"| {g} | {b} | {name} | {m['tokens']} | {m['tok_s']:.1f} | {m['forwards']} | "
                     f"{acc} | {ml} | {ratio:.2f}x | {'yes' if same else 'NO'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
