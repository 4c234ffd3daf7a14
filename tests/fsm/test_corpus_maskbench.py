"""MaskBench sample (JSONSchemaBench, ../shared/corpora): a fixed, seeded sample of every
small subset. Hard rule: no invalid instance is ever accepted and nothing but a typed
error escapes the compiler. Ratchet: per subset, the number of schemas compiled may only
grow and the number of valid instances rejected may only shrink (committed baseline in
``tests/fsm/data/maskbench_sample_baseline.json``; regenerate with
``STRUCTGEN_WRITE_BASELINE=1`` after an improvement)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from benchmarks.corpus import CORPORA, outcome

pytestmark = pytest.mark.slow

PLAIN = CORPORA / "jsonschemabench" / "plain"
BASELINE = Path(__file__).parent / "data" / "maskbench_sample_baseline.json"
PER_SUBSET = 4


def _subsets() -> list[str]:
    return sorted(p.name for p in PLAIN.iterdir()) if PLAIN.is_dir() else []


def _run_subset(subset: str) -> dict:
    files = sorted((PLAIN / subset).glob("*.json"))
    pick = random.Random(0).sample(files, min(PER_SUBSET, len(files)))
    compiled = rejected = accepted = 0
    bad = []
    for f in pick:
        doc = json.loads(f.read_text(encoding="utf-8"))
        reason, r, a = outcome(doc["schema"], [(t["data"], t["valid"]) for t in doc["tests"]])
        # every refusal counts against the ratchet, a budget's too: the time budgets are
        # CPU seconds of the compiling thread (structgen/fsm/deadline.py), not wall time,
        # so a loaded machine does not spend them
        compiled += not reason.startswith("compile")
        rejected += r
        accepted += a
        if a:
            bad.append(f"{f.name}: {reason}")
    return {
        "compiled": compiled,
        "rejected_valid": rejected,
        "accepted_invalid": accepted,
        "sampled": len(pick),
        "bad": bad,
    }


@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
def test_maskbench_sample_ratchet():
    results = {s: _run_subset(s) for s in _subsets()}
    if os.environ.get("STRUCTGEN_WRITE_BASELINE"):
        BASELINE.write_text(
            json.dumps(
                {s: {k: v for k, v in r.items() if k != "bad"} for s, r in results.items()},
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )
    baseline = json.loads(BASELINE.read_text())
    problems = []
    for subset, r in results.items():
        if r["accepted_invalid"]:
            problems.append(f"{subset}: accepts invalid instances: {r['bad']}")
        b = baseline.get(subset)
        if b is None:
            continue
        if r["compiled"] < b["compiled"]:
            problems.append(f"{subset}: compiled {r['compiled']} < baseline {b['compiled']}")
        if r["rejected_valid"] > b["rejected_valid"]:
            problems.append(
                f"{subset}: rejects {r['rejected_valid']} valid > baseline {b['rejected_valid']}"
            )
    assert not problems, "\n".join(problems)
