"""The 128-tool compile (request body to first mask ready) of the Qwen/Hermes format
built as a StructuralTag (``tool_call_constraint`` today) against the same constraint
built as one Regex spec (the construction before it), interleaved in one process.

Vocabularies: SmolLM2's (49k tokens, ``<tool_call>`` is characters) and SmolLM2's with
``<tool_call>`` and ``</tool_call>`` added as special tokens (as Qwen2.5 has them; only
the StructuralTag lets the model write them as those tokens). Cold: every structgen
cache cleared; warm: the same body again. Prints a markdown table with the ratios.

Command: ``OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_tools_tag.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_tools  # noqa: E402
from bench_grammar import smollm2_tokenizer  # noqa: E402 - benchmarks.support's


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from structgen.fsm.index.vocabulary import Vocabulary
    from structgen.tools import constraint

    tok = smollm2_tokenizer()
    plain = Vocabulary.from_tokenizer(tok)
    tok.add_special_tokens({"additional_special_tokens": ["<tool_call>", "</tool_call>"]})
    tagged = Vocabulary.from_tokenizer(tok)
    big = bench_tools.tool_sets(bench_tools.bfcl_tools(), [128], seed=3)[0]
    qwen = bench_tools.QWEN.read_text()
    as_tag = constraint._build_tag

    def as_regex(fmt, keys, mode, many):
        return constraint._build(fmt, keys, mode, many)

    rows = []
    for vname, vocab in (("SmolLM2 (49k)", plain), ("SmolLM2 + tag tokens", tagged)):
        for choice in ("auto", "required"):
            body = json.dumps(
                {
                    "model": "m",
                    "messages": [{"role": "user", "content": "hi"}],
                    "tools": big,
                    "tool_choice": choice,
                }
            ).encode()
            times = {"regex": ([], []), "structural_tag": ([], [])}
            bench_tools.compile_once(body, qwen, vocab)  # the token trie: once a process
            for _ in range(args.repeats):
                for name, build in (("regex", as_regex), ("structural_tag", as_tag)):
                    constraint._build_tag = as_tag
                    bench_tools.clear_caches()
                    constraint._build_tag = build
                    cold, warm = times[name]
                    cold.append(bench_tools.compile_once(body, qwen, vocab))
                    warm.append(bench_tools.compile_once(body, qwen, vocab))
            constraint._build_tag = as_tag
            med = {k: (statistics.median(c), statistics.median(w)) for k, (c, w) in times.items()}
            rows.append((vname, choice, med))
            print(vname, choice, med, flush=True)
    print()
    print(
        "| vocabulary | tool_choice | regex cold s | tag cold s | tag/regex cold "
        "| regex warm ms | tag warm ms | tag/regex warm |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for vname, choice, med in rows:
        (rc, rw), (tc, tw) = med["regex"], med["structural_tag"]
        print(
            f"| {vname} | {choice} | {rc:.3f} | {tc:.3f} | {tc / rc:.2f} "
            f"| {rw * 1000:.2f} | {tw * 1000:.2f} | {tw / rw:.2f} |"
        )


if __name__ == "__main__":
    main()
