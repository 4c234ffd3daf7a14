"""Jump-forward planning's thread CPU per contact card (#23).

``plan_jump_forward`` (``Matcher.forced_bytes`` included) at every step of a seeded random
token walk (up to 150 steps) on the copy grammar of each of N contact cards
(``bench_extract_batch.documents``), over SmolLM2's tokenizer (encoding as the engine's
``encode_text`` does); plans are applied as the engine applies them. Prints thread CPU
per card and a hash of every plan (equal hashes: equal plans, for A/Bs of two trees).
Usage: ``PYTHONPATH=. python benchmarks/bench_jump_forward_plan.py 12``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import structgen
    from benchmarks.bench_extract_batch import documents
    from benchmarks.support import planned_walk, smollm2_tokenizer
    from structgen.extraction.copy import copy_constraint
    from structgen.fsm import Vocabulary
    from structgen.fsm.compiler import compile_spec
    from structgen.fsm.jump_forward import plan_jump_forward

    tok = smollm2_tokenizer()
    vocab = Vocabulary.from_tokenizer(tok)

    encode = functools.partial(tok.encode, add_special_tokens=False)  # Engine.encode_text

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(int(sys.argv[1]) if len(sys.argv) > 1 else 12, 0)
    digest, total, steps, jumps = hashlib.sha256(), 0.0, 0, 0
    rng = random.Random(1)

    def timed_plan(*args):
        nonlocal total
        t0 = time.thread_time()
        plan = plan_jump_forward(*args)
        total += time.thread_time() - t0
        return plan

    for text in texts:
        m = compile_spec(copy_constraint(schema, text).spec, vocab).matcher()
        for plan in planned_walk(m, encode, vocab, rng, 150, timed_plan):
            steps += 1
            jumps += bool(plan)
            digest.update(repr((plan.num_drop, plan.append)).encode())
    tree = Path(structgen.__file__).resolve().parents[1].name
    print(
        json.dumps(
            {
                "tree": tree,
                "per_card_ms": round(1000 * total / len(texts), 3),
                "steps": steps,
                "jumps": jumps,
                "plans_hash": digest.hexdigest()[:16],
            }
        )
    )


if __name__ == "__main__":
    main()
