"""Per-position greedy margins of candidate prompts for README's Python API example.

README's ``engine.generate`` example must print the same text on every build: a greedy answer
whose top-2 tokens sit on a near-tie flips with any float32 summation-order change of the
int8-activation path (benchmarks/RESULTS.md, "#21: the 8-row int4 tail re-examined"). This
runs README's call (the packaged model, its sentence regex, ``max_tokens=24``, greedy) on
each candidate chat question, all in one batch (the default path is batch invariant), and
prints per generated position the logprob margin between the top-2 tokens the constraint
allows (``inf`` where one token is allowed or the text is forced). A candidate fit for README
keeps its text and a margin >= 1.0 at every position on every build and activation dtype.

    PYTHONPATH=<tree> OMP_NUM_THREADS=2 python benchmarks/greedy_margins.py [--activation-dtype
        float32] [--json out.json]
    python benchmarks/greedy_margins.py --compare main.json branch.json fp32.json
"""

from __future__ import annotations

import argparse
import json
import math

QUESTIONS = [
    "What is the capital of France?",
    "What is the capital of Japan?",
    "What is the capital of Italy?",
    "Who wrote Romeo and Juliet?",
    "Who painted the Mona Lisa?",
    "What is the largest planet in our solar system?",
    "Which planet is known as the Red Planet?",
    "What colour is the sky on a clear day?",
    "What is the chemical symbol for gold?",
    "What is the largest ocean on Earth?",
    "What language is spoken in Brazil?",
    "What is the tallest mountain in the world?",
]
SENTENCE = r"[A-Z][a-z]*( [A-Za-z]+){0,8}\."  # README's regex


def margins(logprobs: list[dict[int, float]]) -> list[float]:
    """Top-1 minus top-2 logprob per position (``inf`` where only one token is listed)."""
    out = []
    for d in logprobs:
        top = sorted(d.values(), reverse=True)
        out.append(top[0] - top[1] if len(top) > 1 and math.isfinite(top[1]) else math.inf)
    return out


def run(activation_dtype: str) -> dict[str, dict]:
    """``{question: {"text", "margins"}}`` for README's call on every question, one batch."""
    import structgen

    engine = structgen.Engine(activation_dtype=activation_dtype)
    params = structgen.SamplingParams(max_tokens=24, temperature=0.0, logprobs=2)
    prompts = [[{"role": "user", "content": q}] for q in QUESTIONS]
    outs = engine.generate(prompts, params, structgen.Regex(SENTENCE))
    return {q: {"text": o.text, "margins": margins(o.logprobs)} for q, o in zip(QUESTIONS, outs)}


def show(name: str, result: dict[str, dict]) -> None:
    """Print one run: per question its minimum margin, text and per-position margins."""
    print(f"## {name}")
    print("| question | min margin | text | margins |")
    print("|---|---|---|---|")
    for q, r in result.items():
        m = " ".join(f"{x:.2f}" for x in r["margins"])
        print(f"| {q} | {min(r['margins']):.2f} | {r['text']!r} | {m} |")


def compare(paths: list[str]) -> None:
    """Per question: the same text on every run, and the smallest margin over all runs."""
    runs = [json.load(open(p)) for p in paths]
    print("| question | same text | min margin per run | text |")
    print("|---|---|---|---|")
    for q in runs[0]:
        texts = {r[q]["text"] for r in runs}
        mins = " / ".join(f"{min(r[q]['margins']):.2f}" for r in runs)
        print(f"| {q} | {len(texts) == 1} | {mins} | {' / '.join(map(repr, texts))} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--activation-dtype", default="auto", choices=["auto", "int8", "float32"])
    ap.add_argument("--json", help="write the run's {question: {text, margins}} here")
    ap.add_argument("--compare", nargs="+", help="JSON files of earlier runs: compare them")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare)
        return
    result = run(args.activation_dtype)
    show(f"activation_dtype={args.activation_dtype}", result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
