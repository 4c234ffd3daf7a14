"""Hash of the masks of every per-document copy grammar along its actual output: equal hashes
between two trees mean their copy grammars give the same masks where extraction went, and
the same outputs (#23, the per-document compile).

Documents: the extraction dev set (each under its schema, as ``extract`` generates) and
``--cards`` contact cards (``bench_extract_batch.documents``). Each is extracted (one batched
``extract`` call per schema, default settings, ``return_details``); its grammar is compiled as
``extractor._extract_part`` does (``_compiled``, ``_fit_budget`` at 512 tokens); the output's
bytes are then walked on a fresh budgeted matcher, at each step the longest allowed token
that the rest of the output starts with, hashing every mask; then a seeded random walk of
``--walk`` tokens from the start, masks hashed too.

Run:  PYTHONPATH=TREE python benchmarks/copy_mask_hash.py [--cards 200] [--walk 40]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cards", type=int, default=200)
    ap.add_argument("--walk", type=int, default=40)
    args = ap.parse_args()
    saved = list(sys.path)
    from bench_extract_batch import documents  # it puts its own tree first on sys.path

    sys.path[:] = saved
    import numpy as np
    import torch

    import structgen
    from structgen import Engine
    from structgen.extraction import extractor
    from structgen.extraction.copy import copy_constraint
    from structgen.fsm.spec import schema_for

    data = HERE / "data/extraction"
    by_schema: dict[str, list[str]] = defaultdict(list)
    schemas: dict[str, dict] = {}
    for line in (data / "documents.jsonl").read_text().splitlines():
        doc = json.loads(line)
        schemas[doc["schema"]] = schema_for(json.loads((data / doc["schema"]).read_text()))
        by_schema[doc["schema"]].append(doc["text"])
    card = "schemas/contact_card.json"
    schemas.setdefault(card, schema_for(json.loads((data / card).read_text())))
    by_schema[card] += documents(args.cards, 0)
    engine = Engine()
    vocab = engine.vocab
    tokens = [bytes(b) for b in vocab.token_bytes]
    eos = vocab.eos_token_ids
    mask = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    digest, outputs, steps = hashlib.sha256(), hashlib.sha256(), 0

    def allowed(matcher) -> np.ndarray:
        mask.zero_()
        matcher.fill_bitmask(mask, 0)
        digest.update(mask.numpy().tobytes())
        bits = np.unpackbits(mask[0].numpy().view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: vocab.vocab_size])

    for name, texts in by_schema.items():
        sd = schemas[name]
        results = extractor.extract(engine, sd, texts, errors="return", return_details=True)
        for i, (text, res) in enumerate(zip(texts, results)):
            raw = getattr(res, "raw_text", None) or ""
            outputs.update(repr((name, i, raw)).encode())
            plan, grammar = extractor._compiled(copy_constraint(sd, text, None), sd, vocab)
            plan, grammar = extractor._fit_budget(plan, grammar, sd, vocab, 512)
            digest.update(repr(plan.copied_fields).encode())
            m, rest = grammar.matcher(max_tokens=512), raw.encode()
            while rest:
                ids = [
                    t for t in allowed(m).tolist() if t not in eos and rest.startswith(tokens[t])
                ]
                if not ids:
                    digest.update(b"stuck")
                    break
                t = max(ids, key=lambda t: len(tokens[t]))
                assert m.advance(t)
                rest, steps = rest[len(tokens[t]) :], steps + 1
            rng, m = random.Random(i), grammar.matcher(max_tokens=512)
            for _ in range(args.walk):
                ids = [t for t in allowed(m).tolist() if t not in eos]
                if not ids or m.is_terminated():
                    break
                assert m.advance(rng.choice(ids))
                steps += 1
    root = Path(structgen.__file__).parents[1]
    print(f"{root}: {sum(map(len, by_schema.values()))} documents, {steps} steps; "
          f"outputs {outputs.hexdigest()[:16]} masks {digest.hexdigest()[:16]}")  # fmt: skip


if __name__ == "__main__":
    main()
