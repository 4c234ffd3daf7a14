"""Hash of every copy-constraint lowering over the extraction dev set and the contact cards:
equal hashes between two trees mean they write the same grammars (pattern, definitions,
warnings, reusable set and copied fields, per document).

Each dev document's schema is lowered as extract generates under it (``schema_for``) and
with every property required and nullable (``nullable_required``); the cards are
``bench_extract_batch.documents(--cards)`` under ``contact_card.json``.

Run:  PYTHONPATH=TREE python benchmarks/copy_lowering_hash.py [--cards 300]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cards", type=int, default=300)
    args = ap.parse_args()
    saved = list(sys.path)
    from bench_extract_batch import documents  # it puts its own tree first on sys.path

    sys.path[:] = saved
    import structgen
    from structgen.extraction.copy import copy_constraint
    from structgen.extraction.nulls import nullable_required
    from structgen.fsm.spec import schema_for

    data = HERE / "data/extraction"
    jobs = []
    for line in (data / "documents.jsonl").read_text().splitlines():
        doc = json.loads(line)
        sd = schema_for(json.loads((data / doc["schema"]).read_text()))
        jobs += [(sd, doc["text"]), (nullable_required(sd), doc["text"])]
    card = schema_for(json.loads((data / "schemas/contact_card.json").read_text()))
    jobs += [(s, t) for t in documents(args.cards, 0) for s in (card, nullable_required(card))]
    digest = hashlib.sha256()
    for schema, text in jobs:
        plan = copy_constraint(schema, text)
        digest.update(repr((plan.spec.lower(), plan.copied_fields)).encode())
    print(f"{Path(structgen.__file__).parents[1]}: {len(jobs)} lowerings {digest.hexdigest()}")


if __name__ == "__main__":
    main()
