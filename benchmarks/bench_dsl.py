"""Template-heavy extraction (12 fixed keys): structgen templates + jump-forward vs without,
and vs transformers + xgrammar (a per-token grammar library), on SmolLM2-135M, CPU, greedy.

Rows, all measured in this run on the same prompt (chat template, the record text):

* ``template, jump-forward on``: ``structgen.template`` (12 keys, typed holes) compiled
  into ONE regex/FSM; fixed text is appended by jump-forward, only holes are sampled.
* ``template, jump-forward off``: the same template on ``Engine(jump_forward=False)``:
  every fixed token is decoded (masked to the one allowed token).
* ``templates off (12 gen calls), jump-forward on``: the same fields written as a
  program of 12 ``gen(regex=...)`` calls with the fixed keys appended by the program
  (one request per hole, the prompt re-sent each time and served by the radix cache).
* ``transformers + xgrammar``: ``LlamaForCausalLM`` with the same weights, a greedy
  KV-cached loop with xgrammar's token bitmask on every step, the template's regex
  compiled by ``xgrammar.GrammarCompiler.compile_regex`` (same healed prompt and regex
  as the first row).

Reports the median end-to-end latency of ``--repeats`` runs (after a warm-up round; the
rows take turns, so a change in machine load hits all of them; radix cache flushed
before each structgen run), forward passes per fill, generated tokens, ratios against
the first row, whether the values agree, and writes a plot.

Run:  python benchmarks/bench_dsl.py [--repeats 3] [--out benchmarks/RESULTS.md] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
TEXT = (
    "Invoice INV-2041 from Acme GmbH, Berlin, dated 2024-03-15, to Maria Lopez (Lyon). "
    "3 USB cables and 1 keyboard, total 43 EUR, paid by card, shipped by DHL, priority high."
)
FIELDS = [  # (key, hole spec); the template and the 12-gen program are both built from it
    ("invoice_number", "number:regex=INV-[0-9]{4}"),
    ("vendor_name", "vendor"),
    ("vendor_city", "vendor_city:regex=[A-Z][a-z]+"),
    ("invoice_date", "date:regex=[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    ("customer_name", "customer"),
    ("customer_city", "customer_city:regex=[A-Z][a-z]+"),
    ("number_of_items", "items:int"),
    ("total_amount", "total:int"),
    ("currency_code", "currency:choice=EUR|USD|GBP"),
    ("payment_method", "payment:choice=card|cash|transfer"),
    ("shipping_carrier", "carrier:choice=DHL|UPS|FedEx"),
    ("priority_level", "priority:choice=low|normal|high"),
]
TEMPLATE = "".join(f"{key}: {{{spec}}}\n" for key, spec in FIELDS)
PROMPT = [{"role": "user", "content": f"Fill in the record for this text:\n{TEXT}"}]
MAX_CHARS = 30


class Runner:
    """One row: ``run()`` does one fill (after ``before()``), ``summary(result)`` gives
    ``{"passes", "tokens", "values"}``."""

    def __init__(self, run, summary, before=None) -> None:
        self.run, self.summary, self.before = run, summary, before


def measure(runners: dict[str, Runner], repeats: int) -> dict[str, dict]:
    """Warm every row up once, then time the rows round-robin ``repeats`` times (so a
    change of machine load hits every row alike); median seconds per row."""
    from tqdm.auto import tqdm

    times: dict[str, list[float]] = {k: [] for k in runners}
    last: dict[str, object] = {}
    bar = tqdm(total=len(runners) * (repeats + 1), desc="bench_dsl")
    for rep in range(repeats + 1):
        for label, r in runners.items():
            if r.before is not None:
                r.before()
            t0 = time.perf_counter()
            last[label] = r.run()
            if rep > 0:  # round 0 is the warm-up (grammar compiles, caches)
                times[label].append(time.perf_counter() - t0)
            bar.update()
    bar.close()
    return {
        k: {"latency_s": statistics.median(times[k]), **runners[k].summary(last[k])}
        for k in runners
    }


def template_runner(engine, tpl) -> Runner:
    def summary(res) -> dict:
        m = res.output.metrics
        return {
            "passes": m.num_forward_passes,
            "tokens": m.num_generated_tokens,
            "values": dict(res),
        }

    return Runner(lambda: tpl.run(prompt=PROMPT, backend=engine), summary, engine.flush_cache)


def gen_program():
    """The same extraction as 12 gen calls (templates off): one request per hole, each
    gen's regex the hole's pattern followed by the newline that ends it."""
    import structgen
    from structgen import assistant, gen, user
    from structgen.lang.program import template

    holes = template(TEMPLATE, max_chars=MAX_CHARS).holes
    keys = [f"{key}: " for key, _ in FIELDS[1:]] + [""]

    @structgen.function
    def extract(s):
        s += user(PROMPT[0]["content"])
        body = f"{FIELDS[0][0]}: "
        for hole, key in zip(holes, keys):
            body = (
                body
                + gen(hole.name, regex=f"(?:{hole.pattern(chr(10), MAX_CHARS)})\\n", max_tokens=40)
                + key
            )
        s += assistant(body)

    return extract, holes


def gen_calls_runner(engine) -> Runner:
    prog, holes = gen_program()

    def summary(st) -> dict:
        outs = list(st.outputs.values())
        return {
            "passes": sum(o.metrics.num_forward_passes for o in outs),
            "tokens": sum(o.metrics.num_generated_tokens for o in outs),
            "values": {h.name: h.convert(st[h.name][:-1]) for h in holes},
        }

    return Runner(lambda: prog.run(backend=engine), summary, engine.flush_cache)


def healed_prompt_and_pattern(engine, tpl) -> tuple[list[int], tuple[str, str]]:
    """The prompt ids, regex and healed text of the first row (template prefix in the prompt)."""
    from structgen.fsm.spec import Regex
    from structgen.lang.backend import as_backend
    from structgen.lang.healing import heal

    b = as_backend(engine)
    h = heal(b, b.chat_ids(PROMPT) + b.encode(tpl.prefix))
    return h.prompt_ids, (h.constraint(Regex(tpl.pattern)).lower().text(), h.removed)


def transformers_xgrammar_runner(engine, tpl) -> Runner:
    """Greedy KV-cached transformers loop with xgrammar's bitmask on every step."""
    import xgrammar as xgr
    from bench_maskbench import smollm2_tokenizer
    from bench_models import _hf_llama

    from structgen.runtime.loader import load_model

    loaded = engine.loaded
    # the float weights (the engine's own may be quantized: EngineConfig quantization "auto")
    model = _hf_llama(load_model(None, torch.float32, "cpu"))
    tok = smollm2_tokenizer()  # the same tokenizer as a transformers one, which xgrammar takes
    ids, (pattern, removed) = healed_prompt_and_pattern(engine, tpl)
    info = xgr.TokenizerInfo.from_huggingface(
        tok, vocab_size=loaded.config.vocab_size, stop_token_ids=list(loaded.eos_token_ids)
    )
    # structgen writes control characters as \xHH; xgrammar's regex parser reads more
    # than two hex digits after \x ("\x0ac" became U+0AC), so give it \u00HH
    xgr_pattern = re.sub(r"\\x([0-9a-fA-F]{2})", r"\\u00\1", pattern)
    compiled = xgr.GrammarCompiler(info).compile_regex(xgr_pattern)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)

    def run() -> tuple[list[int], int]:
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        out, passes, past = [], 0, None
        x = torch.tensor([ids])
        with torch.no_grad():
            for _ in range(400):
                r = model(input_ids=x, past_key_values=past, use_cache=True)
                passes += 1
                past = r.past_key_values
                logits = r.logits[:, -1, :].float()
                matcher.fill_next_token_bitmask(bitmask)
                xgr.apply_token_bitmask_inplace(logits, bitmask)
                t = int(logits.argmax(-1))
                if t in loaded.eos_token_ids or not matcher.accept_token(t):
                    break
                out.append(t)
                if matcher.is_terminated():
                    break
                x = torch.tensor([[t]])
        return out, passes

    def summary(result) -> dict:
        out, passes = result
        text = tok.decode(out)
        text = text[len(removed) :] if text.startswith(removed) else text
        try:
            values = dict(tpl.parse(text))
        except Exception as exc:  # noqa: BLE001 - reported in the table, not fatal
            values = {"unparsed": text, "error": str(exc)}
        return {"passes": passes, "tokens": len(out), "values": values}

    return Runner(run, summary)


def plot(rows: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, key, title in (
        (axes[0], "latency_s", "latency per fill (s)"),
        (axes[1], "passes", "forward passes per fill"),
    ):
        ax.barh(labels, [rows[k][key] for k in labels], color=["C0", "C1", "C2", "C3"])
        ax.set_title(title)
        ax.invert_yaxis()
    axes[1].set_yticklabels([])
    fig.suptitle("bench_dsl: 12-key template extraction, SmolLM2-135M, CPU, greedy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()

    import structgen

    tpl = structgen.template(TEMPLATE, max_chars=MAX_CHARS)
    engine = structgen.Engine(dtype="float32")
    engine_off = structgen.Engine(dtype="float32", jump_forward=False)
    rows = measure(
        {
            "template, jump-forward on": template_runner(engine, tpl),
            "template, jump-forward off": template_runner(engine_off, tpl),
            "templates off (12 gen calls), jump-forward on": gen_calls_runner(engine),
            "transformers + xgrammar": transformers_xgrammar_runner(engine, tpl),
        },
        args.repeats,
    )
    order = [
        "template, jump-forward on",
        "template, jump-forward off",
        "templates off (12 gen calls), jump-forward on",
        "transformers + xgrammar",
    ]
    rows = {k: rows[k] for k in order}
    base = rows[order[0]]
    load = os.getloadavg()
    threads = os.environ.get("OMP_NUM_THREADS")
    omp = f"OMP_NUM_THREADS={threads} " if threads else ""
    lines = [
        "",
        f"## bench_dsl: 12-key template extraction ({time.strftime('%Y-%m-%d')}, "
        f"SmolLM2-135M fp32, CPU, torch {torch.__version__}, {torch.get_num_threads()} threads)",
        "",
        f"Command: `{omp}python benchmarks/bench_dsl.py --repeats {args.repeats}` "
        "(greedy, median of repeats after a warm-up round, rows interleaved). Load average "
        f"at the end: {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} on 2 cores (shared machine: absolute times are noisy, the ratios "
        "from one run are what count).",
        "",
        "| setting | latency (s) | vs template+jf | forward passes | generated tokens | same "
        "values |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in rows.items():
        lines.append(
            f"| {label} | {r['latency_s']:.2f} | {r['latency_s'] / base['latency_s']:.2f}x"
            f" | {r['passes']} | {r['tokens']} | {r['values'] == base['values']} |"
        )
    lines += ["", f"Values (template, jump-forward on): `{base['values']}`", ""]
    for label, r in rows.items():
        if r["values"] != base["values"]:
            lines += [f"Values ({label}): `{r['values']}`", ""]
    lines += ["![bench_dsl](bench_dsl.png)", ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        plot(rows, ROOT / "benchmarks" / "bench_dsl.png")
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
