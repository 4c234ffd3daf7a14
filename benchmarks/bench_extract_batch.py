"""Batched extraction throughput: ``Engine.extract`` over N documents of one schema at once
against the same engine one document at a time (#23: ``--input`` of 200 documents >= 3x
batch 1).

The documents are contact cards written from seeded templates (names, companies, roles,
cities, phone and e-mail shapes vary; the dev set's ``contact_card`` schema), so every text
is different and only the prompt's shared head is in the prefix cache, as for a real
``structgen extract --input`` job. Batch 1: the first ``--batch1-docs`` documents, each
its own ``extract`` call, after one untimed call; batched: all ``--docs`` in one call
(``extract``'s continuous batching). Both at ``extract``'s defaults, in one process.
Per mode also the calling thread's CPU per document and the tokens computed per document
(every token the forward passes took: prompts past the prefix cache, sampled and forced
output tokens, the scoring passes' requests; the engine's ``runner.execute`` wrapped to
count its chunks); ``--json`` also holds the batched call's values, so two trees' outputs
can be compared.

``--ab-fused-extend 1,8,64``: instead, an A/B in one process of the longest extension a fused
decode step over 8 tokens takes (``structgen.runtime.cpu.decode_step.MAX_FUSED_EXTEND`` and
``MAX_FUSED_EXTEND_QUANTIZED`` both set to the value; 1: the rule before session 24, fused only
when every sequence brings one token; the default engine is all int8-activation quantized, so 64
is its rule now), the values alternated round by round (``--rounds``), batch 1 and batched per
value, medians; the batched outputs must be equal.

Run:  python benchmarks/bench_extract_batch.py [--docs 200] [--batch1-docs 10] [--seed 0]
      [--ab-fused-extend 1,8,64 --rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIRST = ["Elena", "Carlos", "Aiko", "Tomas", "Priya", "Jonas", "Fatima", "Liam", "Sofia", "Omar"]
LAST = ["Petrova", "Mendoza", "Tanaka", "Berg", "Shah", "Keller", "Haddad", "Walsh", "Rossi"]
COMPANY = ["Quantix Labs", "Verde Foods", "Lantern Robotics", "Bluefin Logistics", "Orbit Media"]
ROLE = ["Head of Research", "sales manager", "CTO", "office manager", "lead designer", None]
CITY = ["Sofia", "Lyon", "Osaka", "Porto", "Dublin", None]
TEMPLATES = [
    "{name}, {role} at {company}, {city}. {email}, {phone}",
    "Met {name} at the trade fair. Works for {company}. Phone {phone}, mail {email}.",
    "Contact: {name} ({company}). Tel. {phone}. E-mail: {email}. Based in {city}.",
    "Please call {name} from {company} on {phone} or write to {email}.",
]


def documents(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct contact-card texts from the templates (seeded)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        company = rng.choice(COMPANY)
        role, city = rng.choice(ROLE) or "consultant", rng.choice(CITY) or "Berlin"
        domain = company.lower().replace(" ", "") + ".example"
        digits = (rng.randint(30, 49), rng.randint(10, 99), rng.randint(100, 999))
        phone = "+{} {} {} ".format(*digits) + str(rng.randint(1000, 9999))
        email = f"{first.lower()}.{last.lower()}@{domain}"
        text = rng.choice(TEMPLATES).format(
            name=f"{first} {last}", role=role, company=company, city=city, phone=phone, email=email
        )
        if text not in out:
            out.append(text)
    return out


def ab_fused_extend(engine, schema: dict, texts: list[str], args: argparse.Namespace) -> None:
    """Print batch 1 and batched s/doc per fused-extension value (medians over
    ``args.rounds`` rounds, the values' order reversed every other round).

    Raises:
        AssertionError: the batched outputs differ between values or rounds.
    """
    import statistics

    from structgen.runtime.cpu import decode_step

    values = [int(v) for v in args.ab_fused_extend.split(",")]
    b1: dict[int, list[float]] = {v: [] for v in values}
    batched: dict[int, list[float]] = {v: [] for v in values}
    first = None
    saved = decode_step.MAX_FUSED_EXTEND, decode_step.MAX_FUSED_EXTEND_QUANTIZED
    try:
        for r in range(args.rounds):
            for v in values if r % 2 == 0 else values[::-1]:
                decode_step.MAX_FUSED_EXTEND = decode_step.MAX_FUSED_EXTEND_QUANTIZED = v
                t = time.perf_counter()
                for text in texts[: args.batch1_docs]:
                    engine.extract(schema, text)
                b1[v].append((time.perf_counter() - t) / args.batch1_docs)
                t = time.perf_counter()
                out = engine.extract(schema, texts)
                batched[v].append((time.perf_counter() - t) / len(texts))
                first = out if first is None else first
                assert out == first, f"fused extension <= {v}: other outputs"
                print(f"round {r + 1}, fused extension <= {v}: batch 1 {b1[v][-1]:.3f}, "
                      f"batched {batched[v][-1]:.3f} s/doc", flush=True)  # fmt: skip
    finally:
        decode_step.MAX_FUSED_EXTEND, decode_step.MAX_FUSED_EXTEND_QUANTIZED = saved
    base = statistics.median(batched[values[0]])
    print(
        f"\n| longest fused extension | s/doc batch 1 ({args.batch1_docs} docs) | s/doc batched "
        f"({len(texts)} at once) | batched speed-up | batched vs {values[0]} |"
        "\n|---|---|---|---|---|"
    )
    for v in values:
        a, b = statistics.median(b1[v]), statistics.median(batched[v])
        print(f"| {v} | {a:.3f} | {b:.3f} | {a / b:.2f}x | {base / b:.2f}x |")
    print("\nbatched outputs equal across values and rounds; load average at the end: "
          + " / ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--batch1-docs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--ab-fused-extend", default=None, help="MAX_FUSED_EXTEND values, A/B")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the A/B")
    args = ap.parse_args()
    if args.docs < 1 or args.batch1_docs < 1:
        ap.error("--docs and --batch1-docs must be at least 1 (the table is their ratio)")
    from structgen import Engine

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs, args.seed)
    engine = Engine()
    engine.extract(schema, texts[0])  # untimed: compile, first prefix
    if args.ab_fused_extend:
        ab_fused_extend(engine, schema, texts, args)
        return
    computed = [0]  # tokens through the forward
    execute = engine.runner.execute

    def counted(scheduled):
        computed[0] += sum(num for _, num in scheduled.scheduled)
        return execute(scheduled)

    engine.runner.execute = counted
    t, c = time.perf_counter(), time.thread_time()
    for text in texts[: args.batch1_docs]:
        engine.extract(schema, text)
    batch1 = (time.perf_counter() - t) / args.batch1_docs
    thread1 = (time.thread_time() - c) / args.batch1_docs
    tokens1, computed[0] = computed[0] / args.batch1_docs, 0
    t, c = time.perf_counter(), time.thread_time()
    values = engine.extract(schema, texts)
    batched = (time.perf_counter() - t) / len(texts)
    thread = (time.thread_time() - c) / len(texts)
    tokens = computed[0] / len(texts)
    right = sum(1 for v, s in zip(values, texts) if v.get("email", "") in s)
    n, b = len(texts), args.batch1_docs
    print(
        f"| documents | s/doc batch 1 ({b} docs) | s/doc batched ({n} at once) "
        "| batched speed-up | tokens computed / doc, batch 1 / batched "
        "| e-mails copied right |\n|---|---|---|---|---|---|\n"
        f"| {n} contact cards | {batch1:.3f} | {batched:.3f} | **{batch1 / batched:.2f}x** "
        f"| {tokens1:.1f} / {tokens:.1f} | {right}/{n} |\n\ncalling thread's CPU s/doc: batch 1 "
        f"{thread1:.3f}, batched {thread:.3f} ({thread1 / thread:.2f}x); load average at the end: "
        + " / ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "batch1_s": batch1,
                    "batched_s": batched,
                    "batch1_thread_s": thread1,
                    "batched_thread_s": thread,
                    "docs": len(texts),
                    "batch1_tokens_per_doc": tokens1,
                    "batched_tokens_per_doc": tokens,
                    "values": values,
                }
            )
        )


if __name__ == "__main__":
    main()
