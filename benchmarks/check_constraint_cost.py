"""Per-gen cost of ``backend.check_constraint`` (session 33, j15): thread CPU time per call,
medians over alternated rounds, with an A/A arm (the no-op twice).

Run: ``PYTHONPATH=. python benchmarks/check_constraint_cost.py``
"""

from __future__ import annotations

import statistics
import time

from structgen.fsm import compile_regex
from structgen.fsm.spec import Choice, Concatenation, Regex
from structgen.lang.backend import TokenizerBackend
from structgen.lang.openai_backend import OpenAIBackend

TERMS = [
    None,
    Regex("[a-z]+"),
    Concatenation((Choice([" "]), Regex("[0-9]+"))),
    compile_regex("[a-z]+"),
]


def ns_per_call(check, calls: int = 20000) -> float:
    """Thread CPU nanoseconds per ``check(term)``, over ``calls`` passes of TERMS."""
    t0 = time.thread_time()
    for _ in range(calls):
        for term in TERMS:
            check(term)
    return (time.thread_time() - t0) / (calls * len(TERMS)) * 1e9


def main(rounds: int = 15) -> None:
    local = TokenizerBackend.__new__(TokenizerBackend)  # no tokenizer needed to check
    remote = OpenAIBackend.__new__(OpenAIBackend)
    arms = {
        "A: no-op (EngineBackend)": local.check_constraint,
        "A': no-op again (A/A)": local.check_constraint,
        "B: OpenAIBackend, non-copy constraints": remote.check_constraint,
    }
    times: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, check in arms.items():
            times[name].append(ns_per_call(check))
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.0f} ns/call")


if __name__ == "__main__":
    main()
