"""End-to-end benchmark on SmolLM2-135M-Instruct: structgen vs transformers (and llama.cpp).

Measured in one run, same prompt, greedy:
  * decode tokens/s and TTFT of structgen vs transformers ``generate`` (fp32 and bf16);
  * JSON-schema-constrained vs unconstrained structgen (tokens/s, forward passes);
  * model load, cold (empty structgen cache) and warm, in fresh processes;
  * a whole ``structgen extract`` command, process start to JSON printed (warm cache);
  * llama-cpp-python on the same Q4_1 file, where it is installed.

Run:  python benchmarks/bench_e2e.py [--tokens 128] [--dtypes float32,bfloat16]
          [--out benchmarks/RESULTS.md]
Prints a table with ratios, appends it to RESULTS.md and writes a plot beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
PROMPT = [{"role": "user", "content": "Write a long story about a lighthouse keeper and a storm."}]
SCHEMA = json.loads((ROOT / "examples" / "schemas" / "invoice.json").read_text())
INVOICE_TEXT = (
    "Invoice INV-2041 for Acme GmbH: 3 x USB cable at 4.50 EUR each, 1 x keyboard at 29.90 EUR, "
    "2 x mouse pad at 7.00 EUR and 1 x monitor stand at 45.00 EUR. Total due: 102.40 EUR."
)


def bench_structgen(engine, n_tokens: int, repeats: int = 3) -> dict:
    """Greedy decode of ``n_tokens`` after PROMPT, best of ``repeats`` runs (a shared host)."""
    from structgen import SamplingParams

    params = SamplingParams(max_tokens=n_tokens, temperature=0.0, ignore_eos=True)
    engine.generate([PROMPT], SamplingParams(max_tokens=4, temperature=0.0))  # warm-up
    ttfts, rates = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = engine.generate([PROMPT], params)[0]
        total = time.perf_counter() - t0
        n = len(out.token_ids)
        ttfts.append(out.metrics.ttft_s)
        rates.append((n - 1) / (total - out.metrics.ttft_s))
    return {"ttft_s": min(ttfts), "decode_tok_s": max(rates), "tokens": n}


def bench_transformers(
    loaded, dtype: torch.dtype, n_tokens: int, prompt_ids: list[int], repeats: int = 3
) -> dict:
    """transformers ``generate`` (greedy, its default dynamic cache) on the same weights, best of
    ``repeats``.
    """
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM(loaded.config).to(dtype).eval()
    missing, _ = model.load_state_dict(loaded.model.state_dict(), strict=False)
    assert not [m for m in missing if "rotary" not in m and "lm_head" not in m], missing
    if loaded.config.tie_word_embeddings:
        model.tie_weights()
    ids = torch.tensor([prompt_ids])
    kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
    ttfts, rates = [], []
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, **kw)  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            model.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw)
            ttft = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = model.generate(ids, max_new_tokens=n_tokens, min_new_tokens=n_tokens, **kw)
            total = time.perf_counter() - t0
            n = out.shape[1] - ids.shape[1]
            ttfts.append(ttft)
            rates.append((n - 1) / max(total - ttft, 1e-9))
    return {"ttft_s": min(ttfts), "decode_tok_s": max(rates), "tokens": n}


def bench_constrained(engine) -> dict:
    from structgen import JsonSchema, SamplingParams
    from structgen.extraction import extraction_messages

    msgs = extraction_messages(SCHEMA, INVOICE_TEXT)
    params = SamplingParams(max_tokens=256, temperature=0.0)
    rows = {}
    engine.generate([msgs], params, JsonSchema(SCHEMA))  # warm-up: compile + states
    for label, constraint in (("constrained", JsonSchema(SCHEMA)), ("unconstrained", None)):
        p = params
        if constraint is None:  # same number of tokens as the constrained run
            p = SamplingParams(
                max_tokens=rows["constrained"]["tokens"], temperature=0.0, ignore_eos=True
            )
        t0 = time.perf_counter()
        out = engine.generate([msgs], p, constraint)[0]
        total = time.perf_counter() - t0
        rows[label] = {
            "tokens": len(out.token_ids),
            "tok_s": len(out.token_ids) / total,
            "forward_passes": out.metrics.num_forward_passes,
        }
    return rows


def _timed_subprocess(code: str, env: dict) -> float:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return float(proc.stdout.strip().splitlines()[-1])


def bench_load_and_cli() -> dict:
    code = (
        "import time, structgen; t=time.perf_counter(); structgen.Engine(); "
        "print(time.perf_counter()-t)"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, STRUCTGEN_CACHE_DIR=cache)
        cold = _timed_subprocess(code, env)
        warm = _timed_subprocess(code, env)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "structgen",
                "extract",
                "--schema",
                str(ROOT / "examples/schemas/person.json"),
                "--text",
                "Maria Lopez, 34, works as a nurse in Lyon.",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        cli = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr)
    return {
        "load_cold_s": cold,
        "load_warm_s": warm,
        "extract_cli_s": cli,
        "extract_output": proc.stdout.strip(),
    }


def bench_llama_cpp(n_tokens: int) -> dict | None:
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    from structgen.runtime.loader import default_model_path

    llm = Llama(model_path=str(default_model_path()), n_ctx=2048, verbose=False)
    t0 = time.perf_counter()
    out = llm.create_chat_completion(PROMPT, max_tokens=n_tokens, temperature=0.0)
    total = time.perf_counter() - t0
    n = out["usage"]["completion_tokens"]
    return {"decode_tok_s": n / total, "tokens": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args()

    from structgen import Engine

    rows: list[tuple[str, str, str, str]] = []  # (what, structgen, peer, ratio)
    decode = {}
    for dt in args.dtypes.split(","):
        engine = Engine(dtype=dt)
        sg = bench_structgen(engine, args.tokens)
        hf = bench_transformers(
            engine.loaded, engine.config.torch_dtype, args.tokens, engine.encode_prompt(PROMPT)
        )
        decode[dt] = (sg, hf)
        rows.append(
            (
                f"decode tok/s, {dt} (vs transformers)",
                f"{sg['decode_tok_s']:.1f}",
                f"{hf['decode_tok_s']:.1f}",
                f"{sg['decode_tok_s'] / hf['decode_tok_s']:.2f}x",
            )
        )
        rows.append(
            (
                f"TTFT s, {dt} (vs transformers)",
                f"{sg['ttft_s']:.3f}",
                f"{hf['ttft_s']:.3f}",
                f"{hf['ttft_s'] / sg['ttft_s']:.2f}x faster",
            )
        )
        if dt == "float32":
            cons = bench_constrained(engine)
            c, u = cons["constrained"], cons["unconstrained"]
            rows.append(
                (
                    "JSON-constrained vs unconstrained tok/s (fp32)",
                    f"{c['tok_s']:.1f}",
                    f"{u['tok_s']:.1f}",
                    f"{c['tok_s'] / u['tok_s']:.2f}",
                )
            )
            rows.append(
                (
                    "forward passes for the same tokens",
                    str(c["forward_passes"]),
                    str(u["forward_passes"]),
                    f"{c['tokens']} tokens",
                )
            )
        del engine
    lc = bench_llama_cpp(args.tokens)
    if lc is not None:
        sg = decode[args.dtypes.split(",")[0]][0]
        rows.append(
            (
                "decode tok/s vs llama.cpp (Q4_1)",
                f"{sg['decode_tok_s']:.1f}",
                f"{lc['decode_tok_s']:.1f}",
                f"{sg['decode_tok_s'] / lc['decode_tok_s']:.2f}x",
            )
        )
    lo = bench_load_and_cli()
    rows.append(("model load cold s (target < 6)", f"{lo['load_cold_s']:.2f}", "-", "-"))
    rows.append(("model load warm s (target < 1.5)", f"{lo['load_warm_s']:.2f}", "-", "-"))
    rows.append(
        ("`structgen extract` wall s, warm (target < 10)", f"{lo['extract_cli_s']:.2f}", "-", "-")
    )

    header = "| measure | structgen | peer | ratio |\n|---|---|---|---|"
    table = header + "\n" + "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    print(table)
    print("extract printed:", lo["extract_output"])
    plot = Path(args.out).with_name("bench_e2e.png")
    _plot(decode, plot)
    cmd = "python benchmarks/bench_e2e.py " + " ".join(sys.argv[1:])
    stamp = time.strftime("%Y-%m-%d")
    with open(args.out, "a", encoding="utf-8") as f:
        f.write(
            f"\n## bench_e2e ({stamp}, {os.cpu_count()} CPU cores, torch "
            f"{torch.__version__}, {torch.get_num_threads()} threads)\n\n"
            f"Command: `{cmd.strip()}`\n\n{table}\n\n![decode]({plot.name})\n"
        )


def _plot(decode: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install -e '.[bench]'): no plot")
        return
    labels = list(decode)
    sg = [decode[d][0]["decode_tok_s"] for d in labels]
    hf = [decode[d][1]["decode_tok_s"] for d in labels]
    x = range(len(labels))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([i - 0.2 for i in x], sg, width=0.4, label="structgen")
    ax.bar([i + 0.2 for i in x], hf, width=0.4, label="transformers")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("decode tokens/s (batch 1)")
    ax.set_title("SmolLM2-135M, greedy, CPU")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
