"""Host (numpy) sampling vs a baseline checkout's torch sampling: per-step cost and decode tok/s.

1. ``step``: one process. The baseline's ``structgen/runtime/sampler.py`` and
   ``logits_processing.py`` (torch on CPU) are loaded from ``--baseline`` (a worktree of main)
   under other module names, beside this checkout's (numpy on the host); each case runs what
   ``step.sample_step`` runs around them (``few_rows_serial``, ``apply_penalties_and_bias``,
   ``sample``, ``top_logprobs`` for rows that ask) on a fresh copy of ``[R, V]`` float32 logits
   (a numpy copy, timed on both sides; Gaussian, standard deviation 5 (peaked) or 1
   (flat)), A/B interleaved, medians of ``--repeats``.
2. ``engine``: fresh processes, A/B interleaved, ``PYTHONPATH`` this checkout or the
   baseline: ``Engine()`` (the default: SmolLM2 Q4_1), one warm-up, then ``generate`` of
   ``--tokens`` tokens (``ignore_eos``) for 1 and for 16 prompts with the default sampling
   (temperature 1.0, seeded), and 16 greedy prompts as the control (the same code on both
   sides); decode tok/s = generated tokens / wall seconds.

Run: ``nice -n 10 python benchmarks/bench_host_sampling.py --baseline /path/to/main-worktree
[--vocab 49152] [--repeats 30] [--engine-repeats 3] [--tokens 48]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CASES = {  # name: (SamplingParams fields, standard deviation of the Gaussian logits)
    "greedy": ({"temperature": 0.0}, 5.0),
    "temperature 0.8": ({"temperature": 0.8}, 5.0),
    "top-p 0.95": ({"temperature": 1.0, "top_p": 0.95}, 5.0),
    "top-p 0.95, flat (std 1: whole-row sort)": ({"temperature": 1.0, "top_p": 0.95}, 1.0),
    "top-k 50": ({"temperature": 1.0, "top_k": 50}, 5.0),
    "min-p 0.05": ({"temperature": 1.0, "min_p": 0.05}, 5.0),
    "seeded": ({"temperature": 1.0, "seed": 1}, 5.0),
    "penalties": ({"temperature": 1.0, "presence_penalty": 0.5, "frequency_penalty": 0.5}, 5.0),
    "logprobs 5": ({"temperature": 1.0, "logprobs": 5}, 5.0),
}


def _requests(params, history: list[int], rows: int, make_gen) -> list[SimpleNamespace]:
    """``rows`` requests with ``params``, 100 output tokens and a 20-token prompt."""
    return [
        SimpleNamespace(
            params=params,
            prompt_token_ids=history[:20],
            output_token_ids=history,
            generator=None if params.seed is None else make_gen(params.seed + r),
        )
        for r in range(rows)
    ]


def _step(sampler, processing, base, reqs):
    """What ``step.sample_step`` runs around the sampler, on a fresh copy of ``base``."""
    import torch

    logits = torch.from_numpy(base.copy())  # (torch's clone wakes its pool)
    params = reqs[0].params
    with sampler.few_rows_serial(logits):
        processing.apply_penalties_and_bias(logits, reqs)
        tokens = sampler.sample(logits, [q.params for q in reqs], [q.generator for q in reqs])
        if params.logprobs is not None:
            processing.top_logprobs(logits, tokens, [params.logprobs] * len(reqs))
    return tokens


def step_rows(baseline: Path, vocab: int, repeats: int) -> list[tuple]:
    """Rows (case, R, baseline us, this us, ratio this/baseline)."""
    import numpy as np

    from structgen.runtime import logits_processing as new_lp
    from structgen.runtime import sampler as new_s
    from structgen.runtime.sampling_params import SamplingParams

    old_s = _load(baseline / "structgen/runtime/sampler.py", "baseline_sampler")
    old_lp = _load(baseline / "structgen/runtime/logits_processing.py", "baseline_lp")
    rng = np.random.default_rng(0)
    out = []
    for rows in (1, 64):
        # std 5: peaked rows, as a language model's (the top 1,024 tokens hold most of the
        # mass); std 1: flat (top-p sorts the whole row)
        normal = rng.standard_normal((rows, vocab)).astype(np.float32)
        for case, (kw, std) in CASES.items():
            base = normal * np.float32(std)
            params = SamplingParams(**kw)
            history = rng.integers(0, vocab, 100).tolist()
            sides = {
                "old": (old_s, old_lp, _requests(params, history, rows, _torch_generator)),
                "new": (new_s, new_lp, _requests(params, history, rows, new_s.make_generator)),
            }
            times: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(2):  # warm-up
                for s, lp, rq in sides.values():
                    _step(s, lp, base, rq)
            for _ in range(repeats):
                for key, (s, lp, rq) in sides.items():
                    t = time.perf_counter()
                    _step(s, lp, base, rq)
                    times[key].append(time.perf_counter() - t)
            a, b = (statistics.median(times[k]) * 1e6 for k in ("old", "new"))
            out.append((case, rows, a, b, b / a))
    return out


def _torch_generator(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)


def engine_child(tokens: int) -> dict:
    """``Engine()``, a warm-up, then decode tok/s for 1 and 16 prompts (default sampling)."""
    import structgen

    engine = structgen.Engine()
    msgs = [
        [{"role": "user", "content": f"Write a short story about a {w} in a city."}]
        for w in ("fox", "robot", "baker", "river", "clock", "kite", "owl", "ship") * 2
    ]
    warm = structgen.SamplingParams(max_tokens=4, ignore_eos=True, seed=0)
    engine.generate(msgs[:2], warm)
    res = {}
    for n, temperature in ((1, 1.0), (16, 1.0), (16, 0.0)):
        params = structgen.SamplingParams(
            max_tokens=tokens, ignore_eos=True, seed=0, temperature=temperature
        )
        t = time.perf_counter()
        outs = engine.generate(msgs[:n], params)
        dt = time.perf_counter() - t
        name = f"tok/s, {n} prompt(s)" + (", greedy (control)" if temperature == 0 else "")
        res[name] = sum(len(o.token_ids) for o in outs) / dt
    return res


def engine_rows(baseline: Path, repeats: int, tokens: int) -> list[tuple]:
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for _ in range(repeats):
        for key, root in (("old", baseline), ("new", ROOT)):
            env = {**os.environ, "PYTHONPATH": str(root)}
            cmd = [sys.executable, str(ROOT / "benchmarks/bench_host_sampling.py")]
            cmd += ["--engine-child", "--tokens", str(tokens)]
            r = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"engine child ({key}) failed:\n{r.stderr[-3000:]}")
            runs[key].append(json.loads(r.stdout.strip().splitlines()[-1]))
    rows = []
    for k in runs["old"][0]:
        a = statistics.median(x[k] for x in runs["old"])
        b = statistics.median(x[k] for x in runs["new"])
        rows.append((k, a, b, b / a))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--engine-repeats", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--engine-child", action="store_true")
    ap.add_argument("--skip", choices=("step", "engine"))
    args = ap.parse_args()
    if args.engine_child:
        print(json.dumps(engine_child(args.tokens)))
        return
    if args.baseline is None:
        raise SystemExit("--baseline: a checkout of the code to compare against")
    if args.skip != "step":
        print(f"per-step sampling, vocab {args.vocab}, medians of {args.repeats} (us)")
        print("| case | rows | baseline (torch) | this (numpy) | this / baseline |")
        print("|---|---|---|---|---|")
        for case, rows, a, b, r in step_rows(args.baseline, args.vocab, args.repeats):
            print(f"| {case} | {rows} | {a:.0f} | {b:.0f} | {r:.2f} |")
    if args.skip != "engine":
        print(f"\nEngine() decode, {args.tokens} tokens, medians of {args.engine_repeats}")
        print("| measure | baseline | this | this / baseline |")
        print("|---|---|---|---|")
        for k, a, b, r in engine_rows(args.baseline, args.engine_repeats, args.tokens):
            print(f"| {k} | {a:.1f} | {b:.1f} | {r:.2f} |")


if __name__ == "__main__":
    main()
