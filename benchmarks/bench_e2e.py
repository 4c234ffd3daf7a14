"""End-to-end benchmark on SmolLM2-135M-Instruct: structgen vs transformers (and llama.cpp).

Measured in one run, same prompt, greedy:
  * decode tokens/s and TTFT of structgen vs transformers ``generate`` (fp32 and bf16);
  * JSON-schema-constrained vs unconstrained structgen (tokens/s, forward passes);
  * the default ``Engine()`` vs llama.cpp (llama-cpp-python, installed by
    ``benchmarks/install_llama_cpp.sh``) on the same GGUF file and prompt ids: batch-1
    decode and TTFT (streamed, EOS banned, ``--threads`` threads), and the TTFT of a
    512-token prompt (llama-bench's pp512);
  * ``Engine()`` load in fresh processes, cold (empty structgen cache) and warm, medians of
    ``--repeats``, with llama.cpp's ``Llama(...)`` beside;
  * README's ``structgen extract`` example, process start to JSON printed (warm cache): wall
    median and maximum resident set (``/usr/bin/time -v``);
  * the warm ``Engine()`` by stage (imports, tokenizer, weights, ``prepare``, gc passes:
    ``load_breakdown.py``), wall and CPU medians of ``--repeats`` fresh processes.
Targets (issue #21): decode and pp512 >= 1.0x llama.cpp; load <= 2 s cold, <= 0.5 s warm;
extract <= 3 s wall and <= 700 MB RSS.

Run:  python benchmarks/bench_e2e.py [--tokens 128] [--dtypes float32,bfloat16] [--threads 2]
          [--repeats 5] [--sections transformers,llama_cpp,prefill,load]
          [--out benchmarks/RESULTS.md]
Prints a table with ratios, appends it to RESULTS.md and writes a plot beside it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.support import README_EXTRACT_ARGS  # noqa: E402

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
    dtype: torch.dtype, n_tokens: int, prompt_ids: list[int], repeats: int = 3
) -> dict:
    """transformers ``generate`` (greedy, its default dynamic cache) on the packaged model's
    float weights cast to ``dtype``, best of ``repeats``.
    """
    from bench_models import _hf_llama

    model = _hf_llama().to(dtype)
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


def _timed_subprocess(code: str, env: dict, *argv: str) -> float:
    """Run ``code`` (with ``argv``) in a fresh interpreter; the float its last stdout line
    prints.
    """
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=900
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return float(proc.stdout.strip().splitlines()[-1])


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


LOAD_CODE = (
    "import json, sys, time, structgen; kw=json.loads(sys.argv[1]); t=time.perf_counter(); "
    "e=structgen.Engine(**kw); print(time.perf_counter()-t)"
)
# Engine(), then its grammar vocabulary prepared (a background thread: what the first
# constrained request waits for)
READY_CODE = LOAD_CODE.replace("print(", "e.vocab; print(")
LLAMA_LOAD_CODE = (
    "import time; from llama_cpp import Llama; from structgen.runtime.loader import "
    "default_model_path; p=default_model_path(); t=time.perf_counter(); "
    "Llama(model_path=p, n_ctx=2048, n_threads={t}, n_threads_batch={t}, verbose=False); "
    "print(time.perf_counter()-t)"
)
EXTRACT_ARGS = README_EXTRACT_ARGS


def _extract_once(env: dict, quantization: str | None = None) -> tuple[float, float, str]:
    """README's ``structgen extract`` example (``--quantization`` when given) under
    ``/usr/bin/time -v``: ``(wall s, maximum resident set MB, printed JSON)``.
    """
    extra = [] if quantization is None else ["--quantization", quantization]
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, *EXTRACT_ARGS, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    rss = int(m.group(1)) / 1024 if m else float("nan")
    return wall, rss, proc.stdout.strip()


def bench_load_and_cli(
    repeats: int = 5, threads: int = 2, llama_cpp: bool = True, quantization: str | None = None
) -> dict:
    """Fresh-process load and CLI figures, medians of ``repeats`` (``quantization``: the
    ``Engine(quantization=...)`` / ``--quantization`` measured; None: the default).

    Cold: ``Engine()`` with an empty structgen cache (each repeat its own cache folder; the
    GGUF file itself is in the page cache). Warm: the cache filled; ``ready_warm_s``: warm
    ``Engine()`` then ``engine.vocab`` (the vocabulary's background preparation done: what a
    first constrained request waits for), its own processes. The CLI runs README's
    ``structgen extract`` example, warm, process start to JSON printed. llama.cpp's
    ``Llama(...)`` on the same file in a fresh process (after ``import llama_cpp``), warm.
    ``stages``: the warm ``Engine()`` by stage (``load_breakdown.breakdown``; None under a
    ``quantization``, which the breakdown does not pass).
    """
    env0 = dict(os.environ, OMP_NUM_THREADS=str(threads))
    kw = json.dumps({} if quantization is None else {"quantization": quantization})
    cold, warm, ready, cli, rss = [], [], [], [], []
    with tempfile.TemporaryDirectory() as root:
        for i in range(repeats):
            env = dict(env0, STRUCTGEN_CACHE_DIR=os.path.join(root, str(i)))
            cold.append(_timed_subprocess(LOAD_CODE, env, kw))
        env = dict(env0, STRUCTGEN_CACHE_DIR=os.path.join(root, "0"))
        for _ in range(repeats):
            warm.append(_timed_subprocess(LOAD_CODE, env, kw))
            ready.append(_timed_subprocess(READY_CODE, env, kw))
        for _ in range(repeats):
            w, r, out = _extract_once(env, quantization)
            cli.append(w)
            rss.append(r)
        stages = None
        if quantization is None:
            from load_breakdown import breakdown

            stages = breakdown(repeats, env)
    lc = []
    if llama_cpp and importlib.util.find_spec("llama_cpp") is not None:
        lc = [_timed_subprocess(LLAMA_LOAD_CODE.format(t=threads), env0) for _ in range(repeats)]
    return {
        "load_cold_s": _median(cold),
        "load_warm_s": _median(warm),
        "ready_warm_s": _median(ready),
        "extract_cli_s": _median(cli),
        "extract_rss_mb": max(rss),
        "extract_output": out,
        "llama_cpp_load_s": _median(lc) if lc else None,
        "stages": stages,
    }


def bench_llama_cpp(ids: list[int], n_tokens: int, threads: int, repeats: int = 3) -> dict:
    """llama.cpp (llama-cpp-python) on the same GGUF file and prompt ids, as bench_models
    times it: greedy, EOS banned (``logit_bias``), ``threads`` threads, streamed; TTFT from
    the first streamed token, decode tokens/s over the rest; best of ``repeats``. Also the
    in-process ``Llama(...)`` time.
    """
    from llama_cpp import Llama

    from structgen.runtime.loader import default_model_path

    t0 = time.perf_counter()
    llm = Llama(
        model_path=str(default_model_path()),
        n_ctx=2048,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    load = time.perf_counter() - t0
    ban = {llm.token_eos(): -1e9}
    list(llm.create_completion(ids, max_tokens=4, temperature=0.0, stream=True))  # warm-up
    ttfts, rates = [], []
    for _ in range(repeats):
        llm.reset()
        t0 = time.perf_counter()
        n, ttft = 0, 0.0
        for _ in llm.create_completion(
            ids, max_tokens=n_tokens, temperature=0.0, stream=True, logit_bias=ban
        ):
            n += 1
            if n == 1:
                ttft = time.perf_counter() - t0
        total = time.perf_counter() - t0
        n = min(n, n_tokens)  # the stream's last chunk only carries finish_reason
        ttfts.append(ttft)
        rates.append((n - 1) / (total - ttft))
    return {"ttft_s": min(ttfts), "decode_tok_s": max(rates), "tokens": n, "load_s": load}


def _long_prompts(tokenizer, n: int, count: int) -> list[list[int]]:
    """``count`` prompts of exactly ``n`` token ids, differing in their first token (no prefix
    cache hit between them in either system)."""
    text = " ".join(PROMPT[0]["content"] for _ in range(n))
    ids = tokenizer.encode(text)[: n - 1]
    return [[100 + i, *ids] for i in range(count)]


def bench_prefill(engine, llm_ids: list[list[int]], threads: int) -> dict:
    """TTFT of a ``len(prompt)``-token prompt (llama-bench's pp512 as one request), structgen's
    default engine vs llama.cpp, best of the prompts (each prompt runs once per system)."""
    from structgen import SamplingParams

    one = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    engine.generate([[7, *llm_ids[0][1:]]], one)  # warm-up
    sg = []
    for ids in llm_ids:
        out = engine.generate([ids], one)[0]
        sg.append(out.metrics.ttft_s)
    lc = None
    if importlib.util.find_spec("llama_cpp") is not None:
        from llama_cpp import Llama

        from structgen.runtime.loader import default_model_path

        llm = Llama(
            model_path=str(default_model_path()),
            n_ctx=2048,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        list(llm.create_completion([7, *llm_ids[0][1:]], max_tokens=1, temperature=0.0))
        times = []
        for ids in llm_ids:
            llm.reset()
            t0 = time.perf_counter()
            for _ in llm.create_completion(ids, max_tokens=1, temperature=0.0, stream=True):
                times.append(time.perf_counter() - t0)
                break
        lc = min(times)
    return {"tokens": len(llm_ids[0]), "structgen_ttft_s": min(sg), "llama_cpp_ttft_s": lc}


def _check(value: float, target: float, higher_is_better: bool) -> str:
    ok = value >= target if higher_is_better else value <= target
    return "met" if ok else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--dtypes", default="float32,bfloat16", help="transformers comparisons")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per load figure")
    ap.add_argument(
        "--sections",
        default="transformers,folders,llama_cpp,prefill,load",
        help="comma list of: transformers, folders, llama_cpp, prefill, load",
    )
    ap.add_argument(
        "--load-quantization",
        default=None,
        help="load section: Engine(quantization=...) and extract --quantization (e.g. gguf)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    torch.set_num_threads(args.threads)

    from structgen import Engine

    rows: list[tuple[str, str, str, str]] = []  # (what, structgen, peer, ratio or target)
    decode = {}
    if "transformers" in sections:
        rows += _transformers_rows(Engine, args, decode)
    if "folders" in sections:
        rows += _float_folder_rows(args)
    has_lc = importlib.util.find_spec("llama_cpp") is not None
    if {"llama_cpp", "prefill"} & sections:
        engine = Engine()  # the default configuration
        ids = engine.encode_prompt(PROMPT)
        if "llama_cpp" in sections:
            sg = bench_structgen(engine, args.tokens)
            decode["default"] = (sg, None)
            if has_lc:
                lc = bench_llama_cpp(ids, args.tokens, args.threads)
                r = sg["decode_tok_s"] / lc["decode_tok_s"]
                rows.append(
                    (
                        "decode tok/s, `Engine()` default vs llama.cpp, same file (target >= 1.0x)",
                        f"{sg['decode_tok_s']:.1f}",
                        f"{lc['decode_tok_s']:.1f}",
                        f"{r:.2f}x ({_check(r, 1.0, True)})",
                    )
                )
            else:
                rows.append(
                    (
                        "decode tok/s, `Engine()` default (llama-cpp-python not installed: "
                        "benchmarks/install_llama_cpp.sh)",
                        f"{sg['decode_tok_s']:.1f}",
                        "-",
                        "-",
                    )
                )
        if "prefill" in sections:
            pf = bench_prefill(engine, _long_prompts(engine.tokenizer, 512, 3), args.threads)
            lct = pf["llama_cpp_ttft_s"]
            rows.append(
                (
                    f"prefill TTFT s, {pf['tokens']} prompt tokens, default vs llama.cpp "
                    "(target >= 1.0x)",
                    f"{pf['structgen_ttft_s']:.3f}",
                    "-" if lct is None else f"{lct:.3f}",
                    "-"
                    if lct is None
                    else f"{lct / pf['structgen_ttft_s']:.2f}x "
                    f"({_check(lct / pf['structgen_ttft_s'], 1.0, True)})",
                )
            )
        del engine
    lo = None
    if "load" in sections:
        lo = bench_load_and_cli(args.repeats, args.threads, quantization=args.load_quantization)
        lcl = lo["llama_cpp_load_s"]
        peer = "-" if lcl is None else f"{lcl:.2f} (`Llama(...)`)"
        rows.append(
            (
                "`Engine()` load s, fresh process, cold cache (target <= 2)",
                f"{lo['load_cold_s']:.2f}",
                peer,
                _check(lo["load_cold_s"], 2.0, False),
            )
        )
        rows.append(
            (
                "`Engine()` load s, fresh process, warm cache (target <= 0.5)",
                f"{lo['load_warm_s']:.2f}",
                peer,
                _check(lo["load_warm_s"], 0.5, False),
            )
        )
        rows.append(
            (
                "`Engine()` + its vocabulary prepared (`engine.vocab`) s, warm",
                f"{lo['ready_warm_s']:.2f}",
                "-",
                "-",
            )
        )
        rows.append(
            (
                "`structgen extract` (README example) wall s, warm (target <= 3)",
                f"{lo['extract_cli_s']:.2f}",
                "-",
                _check(lo["extract_cli_s"], 3.0, False),
            )
        )
        rows.append(
            (
                "`structgen extract` max RSS MB, `/usr/bin/time -v` (target <= 700)",
                f"{lo['extract_rss_mb']:.0f}",
                "-",
                _check(lo["extract_rss_mb"], 700.0, False),
            )
        )

    header = "| measure | structgen | peer | ratio / target |\n|---|---|---|---|"
    table = header + "\n" + "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    if lo is not None and lo["stages"] is not None:
        from load_breakdown import markdown

        table += (
            "\n\nWarm `Engine()` by stage, fresh processes, medians (`load_breakdown.py`):\n\n"
            + markdown(lo["stages"])
        )
    print(table)
    if lo is not None:
        print("extract printed:", lo["extract_output"])
    plot = Path(args.out).with_name("bench_e2e.png")
    _plot({k: v for k, v in decode.items() if v[1] is not None}, plot)
    cmd = "python benchmarks/bench_e2e.py " + " ".join(sys.argv[1:])
    stamp = time.strftime("%Y-%m-%d")
    with open(args.out, "a", encoding="utf-8") as f:
        f.write(
            f"\n## bench_e2e ({stamp}, {os.cpu_count()} CPU cores, torch "
            f"{torch.__version__}, {args.threads} threads)\n\n"
            f"Command: `{cmd.strip()}`\n\n{table}\n\n![decode]({plot.name})\n"
        )


def _transformers_rows(Engine, args, decode: dict) -> list[tuple[str, str, str, str]]:
    """Decode/TTFT vs transformers per dtype, and constrained vs unconstrained (fp32)."""
    rows = []
    for dt in args.dtypes.split(","):
        engine = Engine(dtype=dt)
        sg = bench_structgen(engine, args.tokens)
        hf = bench_transformers(
            engine.config.torch_dtype, args.tokens, engine.encode_prompt(PROMPT)
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
    return rows


def write_float_folder(folder: Path, dtype: torch.dtype) -> Path:
    """Save the packaged model, dequantized, as a Hugging Face folder in ``dtype``:
    ``config.json`` (``torch_dtype`` = ``dtype``), ``model.safetensors`` and the tokenizer
    files. Returns ``folder``.
    """
    from bench_models import _hf_llama

    from structgen.runtime.loader.tokenizer import load_tokenizer

    model = _hf_llama().to(dtype)
    model.config.torch_dtype = dtype
    model.save_pretrained(str(folder), safe_serialization=True)
    load_tokenizer().save_pretrained(str(folder))
    return folder


def _decode_once(run, n_tokens: int) -> float:
    """Decode tokens/s of one greedy ``run(max_tokens)`` call: ``n_tokens`` minus a
    1-token run (the prompt's prefill and first token), over the extra time.
    """
    t0 = time.perf_counter()
    run(1)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = run(n_tokens)
    return (n - 1) / max(time.perf_counter() - t0 - first, 1e-9)


def bench_float_folders(dtypes: list[str], n_tokens: int, repeats: int) -> dict:
    """Issue #21's bf16 target and its fp32 neighbour: the packaged model dequantized and
    saved as a ``dtype`` safetensors folder, loaded by ``Engine(folder)`` in its default
    configuration and by transformers in ``dtype``; batch 1, greedy, ``n_tokens`` tokens,
    EOS banned, the same prompt ids; the systems interleaved, ``repeats`` rounds.

    Returns ``{dtype: {"structgen": [tok/s per round], "transformers": [...],
    "resolved": "dtype=..., quantization=..., activation_dtype=..."}}``.
    """
    from transformers import AutoModelForCausalLM

    from structgen import Engine, SamplingParams

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        systems = {}
        for dt in dtypes:
            folder = write_float_folder(Path(tmp) / dt, getattr(torch, dt))
            engine = Engine(str(folder))
            ids = engine.encode_prompt(PROMPT)
            hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dt))
            hf.eval()
            hf_ids = torch.tensor([ids])
            kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)

            def sg_run(n, engine=engine):
                p = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)
                return len(engine.generate([PROMPT], p)[0].token_ids)

            def hf_run(n, hf=hf, hf_ids=hf_ids, kw=kw):
                with torch.no_grad():
                    o = hf.generate(hf_ids, max_new_tokens=n, min_new_tokens=n, **kw)
                return o.shape[1] - hf_ids.shape[1]

            sg_run(4)
            hf_run(4)  # warm-up
            c = engine.config
            out[dt] = {
                "structgen": [],
                "transformers": [],
                "resolved": f"dtype={c.dtype}, quantization={c.quantization}, "
                f"activation_dtype={c.activation_dtype}",
            }
            systems[dt] = (sg_run, hf_run)
        for _ in range(repeats):
            for dt, (sg_run, hf_run) in systems.items():
                out[dt]["structgen"].append(_decode_once(sg_run, n_tokens))
                out[dt]["transformers"].append(_decode_once(hf_run, n_tokens))
    return out


def _float_folder_rows(args) -> list[tuple[str, str, str, str]]:
    """Table rows of :func:`bench_float_folders` (medians; the bf16 target >= 2.5x)."""
    res = bench_float_folders(["bfloat16", "float32"], args.tokens, args.repeats)
    rows = []
    for dt, r in res.items():
        sg, hf = _median(r["structgen"]), _median(r["transformers"])
        target = " (target >= 2.5x: " + _check(sg / hf, 2.5, True) + ")" if dt == "bfloat16" else ""
        rows.append(
            (
                f"decode tok/s, {dt} safetensors folder, `Engine(folder)` default "
                f"({r['resolved']}) vs transformers {dt}, median of {args.repeats} "
                f"(runs: {', '.join(f'{x:.0f}' for x in r['structgen'])} vs "
                f"{', '.join(f'{x:.0f}' for x in r['transformers'])})",
                f"{sg:.1f}",
                f"{hf:.1f}",
                f"{sg / hf:.2f}x{target}",
            )
        )
    return rows


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
