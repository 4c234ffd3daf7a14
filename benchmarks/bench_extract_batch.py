"""Batched extraction throughput: ``Engine.extract`` over N documents of one schema at once
against the same engine one document at a time (#23: ``--input`` of 200 documents >= 3x
batch 1).

The documents are contact cards written from seeded templates (names, companies, roles,
cities, phone and e-mail shapes vary; the dev set's ``contact_card`` schema), so every text
is different and only the prompt's shared head is in the prefix cache, as for a real
``structgen extract --input`` job. Batch 1: the first ``--batch1-docs`` documents, each
its own ``extract`` call, after one untimed call; batched: all ``--docs`` in one call
(``extract``'s continuous batching). Both at ``extract``'s defaults, in one process.

Run:  python benchmarks/bench_extract_batch.py [--docs 200] [--batch1-docs 10] [--seed 0]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--batch1-docs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    from structgen import Engine

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs, args.seed)
    engine = Engine()
    engine.extract(schema, texts[0])  # untimed: compile, first prefix
    t = time.perf_counter()
    for text in texts[: args.batch1_docs]:
        engine.extract(schema, text)
    batch1 = (time.perf_counter() - t) / args.batch1_docs
    t = time.perf_counter()
    values = engine.extract(schema, texts)
    batched = (time.perf_counter() - t) / len(texts)
    right = sum(1 for v, s in zip(values, texts) if v.get("email", "") in s)
    n, b = len(texts), args.batch1_docs
    print(
        f"| documents | s/doc batch 1 ({b} docs) | s/doc batched ({n} at once) "
        "| batched speed-up | e-mails copied right |\n|---|---|---|---|---|\n"
        f"| {n} contact cards | {batch1:.3f} | {batched:.3f} | **{batch1 / batched:.2f}x** "
        f"| {right}/{n} |\n\nload average at the end: "
        + " / ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    if args.json:
        args.json.write_text(
            json.dumps({"batch1_s": batch1, "batched_s": batched, "docs": len(texts)})
        )


if __name__ == "__main__":
    main()
