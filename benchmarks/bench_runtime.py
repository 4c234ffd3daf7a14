"""Runtime benchmark on SmolLM2-135M (CPU): batching, prefix cache, multi-turn, batch-1, KV waste.

Measured in one run, against the baselines named in each table:
  1. throughput (output tokens/s), N requests, prompts U[100, 800] tokens, outputs
     U[50, 300] (seeded, ignore_eos): structgen continuous batching vs transformers
     ``generate`` (one padded batch, its default dynamic cache) vs structgen batch-1
     (measured on the first ``--batch1-sample`` requests and reported per token);
  2. shared prefix: 32 requests sharing a ~1,000-token system prompt, sent one after
     the other: mean TTFT of requests 2..32 with the radix cache on vs off;
  3. multi-turn chat: 8 conversations x 5 turns: prompt tokens computed, cache on vs off;
  4. batch-1 decode tokens/s, structgen vs transformers, fp32 and bf16, and a profile
     of one structgen decode step (top operators by self CPU time);
  5. KV memory at the peak of workload 1: bytes holding live tokens / bytes allocated,
     vs a static batch x max_len allocation.

Run:  python benchmarks/bench_runtime.py [--quick] [--requests N] [--workloads 1,2,3,4]
          [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_e2e import PROMPT, bench_structgen, bench_transformers  # noqa: E402

from structgen import Engine, SamplingParams  # noqa: E402
from structgen.errors import ConfigError  # noqa: E402

WORDS = (
    "the model reads pages of text and the cache keeps what was computed before so that "
    "requests sharing a prefix start faster while the scheduler batches them"
).split()


def _random_prompt_ids(engine: Engine, rng: random.Random, n_tokens: int) -> list[int]:
    text = " ".join(rng.choice(WORDS) for _ in range(n_tokens * 2))
    return engine.tokenizer.encode(text, add_special_tokens=False)[:n_tokens]


def alternate_runs(runs: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Call each of ``runs`` ``repeats`` times, interleaved so that every one sees the same load.

    The order reverses every other round (A B, B A, A B, ...), so a load that drifts during
    the benchmark weighs on each run alike.

    Args:
        runs: name -> a callable returning one measurement (here tokens/s, a float).
        repeats: rounds, >= 1.

    Returns:
        name -> the ``repeats`` measurements in the order they were taken.

    Raises:
        ConfigError: ``repeats`` < 1 or no runs.
    """
    if repeats < 1 or not runs:
        raise ConfigError(
            f"alternate_runs: need repeats >= 1 and at least one run, got repeats={repeats}, "
            f"runs={list(runs)}"
        )
    out: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(runs[name]())
            print(f"round {r + 1}/{repeats} {name}: {out[name][-1]:.2f}", flush=True)
    return out


def workload_throughput(
    engine: Engine, n: int, batch1_sample: int, seed: int = 0, repeats: int = 1
) -> dict:
    """Workload 1: structgen's continuous batching vs transformers' batched ``generate``.

    With ``repeats`` > 1 the two engines alternate (``alternate_runs``) on the same requests
    and the reported rates are medians; structgen's prefix cache is flushed before each run.
    Returns rates in output tokens/s; ``*_runs`` hold every run's rate in the order taken.
    """
    rng = random.Random(seed)
    prompts = [_random_prompt_ids(engine, rng, rng.randint(100, 800)) for _ in range(n)]
    outs = [rng.randint(50, 300) for _ in range(n)]
    params = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in outs]
    kv_peaks: list[float] = []
    hf_model = []

    def structgen_run() -> float:
        engine.flush_cache()
        peak = _track_kv_peak(engine)
        t0 = time.perf_counter()
        res = engine.generate(prompts, params, use_tqdm=True)
        dt = time.perf_counter() - t0
        kv_peaks.append(peak.stop())
        return sum(len(r.token_ids) for r in res) / dt

    def transformers_run() -> float:
        if not hf_model:
            from bench_models import _hf_llama

            hf_model.append(_hf_llama())  # float weights: the engine's may be quantized
        return _transformers_throughput(hf_model[0], prompts, outs)

    rates = alternate_runs({"structgen": structgen_run, "transformers": transformers_run}, repeats)
    # structgen batch-1 on a sample
    b1_tokens, b1_time = 0, 0.0
    for p, sp in zip(prompts[:batch1_sample], params[:batch1_sample]):
        engine.flush_cache()
        t0 = time.perf_counter()
        b1_tokens += len(engine.generate([p], sp)[0].token_ids)
        b1_time += time.perf_counter() - t0
    max_len = max(len(p) + m for p, m in zip(prompts, outs))
    static_live = sum(len(p) + m for p, m in zip(prompts, outs)) / (n * max_len)
    return {
        "structgen_tps": statistics.median(rates["structgen"]),
        "batch1_tps": b1_tokens / b1_time if b1_time else float("nan"),
        "hf_tps": statistics.median(rates["transformers"]),
        "structgen_runs": rates["structgen"],
        "hf_runs": rates["transformers"],
        "kv_live_fraction": kv_peaks[0],
        "static_live_fraction": static_live,
        "n": n,
        "output_tokens": sum(outs),
    }


class _track_kv_peak:
    """Wraps engine.step to record live-token / allocated-slot ratio at peak allocation."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.best = engine, (0, 1.0)
        self._orig = engine.step

        def step():
            out = self._orig()
            running = engine.scheduler.running
            pages = sum(len(r.page_table) for r in running)
            if pages > self.best[0]:
                live = sum(r.num_computed_tokens for r in running)
                self.best = (pages, live / (pages * engine.pool.page_size))
            return out

        engine.step = step

    def stop(self) -> float:
        self.engine.step = self._orig
        return self.best[1]


def _transformers_throughput(model, prompts: list[list[int]], outs: list[int]) -> float:
    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):  # left padding
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    m = max(outs)
    t0 = time.perf_counter()
    with torch.no_grad():
        model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=m,
            min_new_tokens=m,
            do_sample=False,
            pad_token_id=0,
        )
    dt = time.perf_counter() - t0
    return sum(outs) / dt  # useful tokens only: padding rows past their length are waste


def workload_shared_prefix(engine_factory, n: int = 32) -> dict:
    rng = random.Random(1)
    res = {}
    for cache in (True, False):
        engine = engine_factory(prefix_cache=cache)
        system = _random_prompt_ids(engine, random.Random(7), 1000)
        qs = [_random_prompt_ids(engine, rng, 20) for _ in range(n)]
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        ttfts = []
        for q in qs:
            out = engine.generate([system + q], params)[0]
            ttfts.append(out.metrics.ttft_s)
        res[cache] = sum(ttfts[1:]) / (n - 1)
        del engine
    return {"ttft_cache_s": res[True], "ttft_nocache_s": res[False]}


def workload_multi_turn(engine_factory, convs: int = 8, turns: int = 5) -> dict:
    res = {}
    for cache in (True, False):
        engine = engine_factory(prefix_cache=cache)
        rng = random.Random(2)
        histories = [
            [{"role": "system", "content": "You are a helpful assistant."}] for _ in range(convs)
        ]
        computed = total = 0
        params = SamplingParams(max_tokens=24, temperature=0.0)
        for _ in range(turns):
            for h in histories:
                h.append(
                    {"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(12))}
                )
            outs = engine.generate([list(h) for h in histories], params)
            for h, o in zip(histories, outs):
                h.append({"role": "assistant", "content": o.text})
                total += o.metrics.num_prompt_tokens
                computed += o.metrics.num_prompt_tokens - o.metrics.cached_tokens
        res[cache] = (computed, total)
    return {
        "computed_cache": res[True][0],
        "computed_nocache": res[False][0],
        "prompt_tokens": res[True][1],
    }


def profile_decode(engine: Engine, steps: int = 32) -> str:
    """Where a batch-1 decode step's time goes: cProfile over ``steps`` engine steps after the
    prefill, by own time per call site (the C kernels appear as their built-in functions:
    ``decode_layers`` is every decoder layer of the fused step, ``dense_mm`` the output head).

    (torch.profiler sees only torch ops, not the C extensions, and charges the time it cannot
    place to whichever torch op comes next: its table no longer says where a step goes.)
    """
    import cProfile
    import pstats

    params = SamplingParams(max_tokens=steps + 1, temperature=0.0, ignore_eos=True)
    engine.generate(["warm up"], SamplingParams(max_tokens=4, temperature=0.0))
    (req,) = engine._make_requests(PROMPT, params, None)
    engine.add_request(req)
    engine.step()  # the prefill, not profiled
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    while not req.status.is_finished:
        engine.step()
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (cc, nc, tottime, cumtime, callers)
    rows = sorted(((v[2], v[1], k) for k, v in stats.items()), reverse=True)[:10]
    total = sum(v[2] for v in stats.values())
    out = [
        f"{steps} decode steps, {1000 * wall / steps:.1f} ms per step under cProfile "
        f"(its own overhead included); own time per function:",
        "",
        "| function | calls per step | ms per step | share |",
        "|---|---|---|---|",
    ]
    for tot, calls, (file, line, name) in rows:
        where = name if file == "~" else f"{Path(file).name}:{line} {name}"
        out.append(
            f"| `{where}` | {calls / steps:.1f} | {1000 * tot / steps:.2f} | "
            f"{100 * tot / total:.0f}% |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 requests, shorter runs")
    ap.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests of workload 1 (default 64, 16 with --quick; #21 also targets 8)",
    )
    ap.add_argument("--batch1-sample", type=int, default=4)
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="workload 1: runs per engine, structgen and transformers alternating; medians",
    )
    ap.add_argument(
        "--workloads",
        default="1,2,3,4",
        help="comma-separated workloads to run (5, KV memory, comes with 1)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args()
    n = args.requests if args.requests is not None else (16 if args.quick else 64)
    if n < 1:
        ap.error(f"--requests must be >= 1, got {n}")
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    todo = {int(w) for w in args.workloads.split(",")}

    def factory(**kw):
        return Engine(dtype="float32", **kw)

    rows = []
    if 1 in todo:
        rows += _throughput_rows(factory, n, args.batch1_sample, args.repeats)
    if 2 in todo:
        sp = workload_shared_prefix(factory, 8 if args.quick else 32)
        rows.append(
            (
                "2. shared-prefix TTFT s, req 2..N (cache on vs off)",
                f"{sp['ttft_cache_s']:.3f}",
                f"{sp['ttft_nocache_s']:.3f}",
                f"{sp['ttft_nocache_s'] / sp['ttft_cache_s']:.1f}x lower",
            )
        )
    if 3 in todo:
        mt = workload_multi_turn(factory, 4 if args.quick else 8, 3 if args.quick else 5)
        rows.append(
            (
                "3. multi-turn prompt tokens computed (cache on vs off)",
                str(mt["computed_cache"]),
                str(mt["computed_nocache"]),
                f"{mt['computed_nocache'] / max(1, mt['computed_cache']):.1f}x fewer",
            )
        )
    prof = ""
    if 4 in todo:
        prof = _decode_rows(rows)
    table = "| measure | structgen | baseline | ratio |\n|---|---|---|---|\n" + "\n".join(
        f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows
    )
    print(table)
    print(prof)
    suffix = "" if todo >= {1, 2, 3, 4} else "_w" + "".join(str(w) for w in sorted(todo))
    plot_name = f"bench_runtime{suffix}.png"  # a partial run does not overwrite the full plot
    _plot(rows, Path(args.out).with_name(plot_name))
    with open(args.out, "a", encoding="utf-8") as f:
        f.write(
            f"\n## bench_runtime ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU cores, "
            f"torch {torch.__version__})\n\nCommand: `python benchmarks/bench_runtime.py "
            f"{' '.join(sys.argv[1:])}`\n\n{table}\n\n![runtime]({plot_name})\n\n"
            + (f"Profile of batch-1 decode (bf16):\n\n{prof}\n" if prof else "")
        )


def _throughput_rows(
    factory, n: int, batch1_sample: int, repeats: int = 1
) -> list[tuple[str, str, str, str]]:
    """Rows of workloads 1 (throughput) and 5 (KV memory at its peak)."""
    engine = factory()
    tp = workload_throughput(engine, n, batch1_sample, repeats=repeats)
    if repeats > 1:
        pairs = zip(tp["structgen_runs"], tp["hf_runs"])
        print(
            "workload 1 runs, structgen / transformers tok/s in the order taken: "
            + ", ".join(f"{a:.1f} / {b:.1f}" for a, b in pairs)
        )
    return [
        (
            f"1. throughput tok/s, {n} req (vs transformers batched)",
            f"{tp['structgen_tps']:.1f}",
            f"{tp['hf_tps']:.1f}",
            f"{tp['structgen_tps'] / tp['hf_tps']:.2f}x",
        ),
        (
            "1. throughput tok/s (vs structgen batch-1)",
            f"{tp['structgen_tps']:.1f}",
            f"{tp['batch1_tps']:.1f}",
            f"{tp['structgen_tps'] / tp['batch1_tps']:.2f}x",
        ),
        (
            "5. KV live/allocated at peak (vs static batch x max_len)",
            f"{tp['kv_live_fraction']:.3f}",
            f"{tp['static_live_fraction']:.3f}",
            f"waste {1 - tp['kv_live_fraction']:.1%} vs {1 - tp['static_live_fraction']:.1%}",
        ),
    ]


def _decode_rows(rows: list) -> str:
    """Append workload 4's rows (batch-1 decode, fp32 and bf16) to ``rows``; the bf16 profile
    table.
    """
    prof = ""
    for dt in ("float32", "bfloat16"):
        engine = Engine(dtype=dt)
        sg = bench_structgen(engine, 64)
        hf = bench_transformers(engine.config.torch_dtype, 64, engine.encode_prompt(PROMPT))
        rows.append(
            (
                f"4. batch-1 decode tok/s {dt} (vs transformers)",
                f"{sg['decode_tok_s']:.1f}",
                f"{hf['decode_tok_s']:.1f}",
                f"{sg['decode_tok_s'] / hf['decode_tok_s']:.2f}x",
            )
        )
        if dt == "bfloat16":
            prof = profile_decode(engine)
        del engine
    return prof


def _plot(rows, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    labels, ratios = [], []
    for a, _, _, d in rows:
        try:
            ratios.append(float(d.split("x")[0]))
            labels.append(a.split(" (")[0])
        except ValueError:
            continue
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(labels, ratios)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xlabel("structgen advantage (x, higher is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
