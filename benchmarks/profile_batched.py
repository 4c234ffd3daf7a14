"""Where a batched run's prefill goes: the step layout and each kernel's CPU per prompt token.

Two parts, both on the default engine (``Engine(dtype="float32")``: GGUF Q4_1 weights, int8
activations) and both in thread CPU time of the calling thread (which does its share of every
OpenMP region), because wall time on a shared machine measures the load, not the work:

1. ``layout``: ``bench_runtime.py --workloads 1``'s requests (same seed, prompts U[100, 800],
   outputs U[50, 300]); per engine step that computes prompt tokens, the scheduled chunks,
   how many are prefill tokens and how many decode rows;
2. ``prefill``: N random 512-token prompts prefilled together (``max_tokens=1``) against one
   alone, interleaved; per prompt token, the calling thread's CPU in each wrapped kernel
   (``int4_mm``/``int8_mm``: every matmul, lm_head included; the fused C ops) and in all.

    PYTHONPATH=. OMP_NUM_THREADS=2 python benchmarks/profile_batched.py [--requests 8]
        [--together 4] [--rounds 2] [--parts layout,prefill]
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_runtime import _random_prompt_ids  # noqa: E402

import structgen.runtime.cpu.ops as cpu_ops  # noqa: E402
import structgen.runtime.cpu.quant as quant  # noqa: E402
from structgen import Engine, SamplingParams  # noqa: E402

CPU = collections.defaultdict(float)  # kernel name -> calling thread's CPU seconds


def _wrap(module, name: str) -> None:
    """Replace ``module.name`` by a wrapper adding its thread CPU time to ``CPU[name]``."""
    fn = getattr(module, name)

    def timed(*args, **kwargs):
        t0 = time.thread_time()
        out = fn(*args, **kwargs)
        CPU[name] += time.thread_time() - t0
        return out

    setattr(module, name, timed)


def layout(engine: Engine, n: int) -> None:
    """Print the chunks of every step that computes prompt tokens, for workload 1's requests."""
    rng = random.Random(0)  # bench_runtime.workload_throughput's draw
    prompts = [_random_prompt_ids(engine, rng, rng.randint(100, 800)) for _ in range(n)]
    outs = [rng.randint(50, 300) for _ in range(n)]
    params = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in outs]
    print(f"prompt tokens {[len(p) for p in prompts]} = {sum(map(len, prompts))}; outputs {outs}")
    steps: list[list[tuple[int, bool]]] = []
    schedule = engine.scheduler.schedule

    def logged():
        out = schedule()
        steps.append(
            [(num, r.num_computed_tokens < len(r.prompt_token_ids)) for r, num in out.scheduled]
        )
        return out

    engine.flush_cache()
    engine.scheduler.schedule = logged
    try:
        engine.generate(prompts, params)
    finally:
        del engine.scheduler.schedule
    for i, chunks in enumerate(steps):
        pre = sum(num for num, is_prompt in chunks if is_prompt)
        if pre:
            rows = sum(1 for _, is_prompt in chunks if not is_prompt)
            print(
                f"step {i}: {len(chunks)} requests, {pre} prefill tokens, {rows} decode rows, "
                f"chunks {[num for num, _ in chunks]}"
            )
    print(f"{len(steps)} steps in all")


def prefill(engine: Engine, together: int, rounds: int) -> None:
    """Print the calling thread's CPU per prompt token: ``together`` prompts in one step vs one."""
    rng = random.Random(1)
    prompts = [_random_prompt_ids(engine, rng, 512) for _ in range(together)]
    one = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    engine.generate(prompts[:1], one)  # warm up
    for r in range(rounds):
        for k in [1, together] if r % 2 == 0 else [together, 1]:
            engine.flush_cache()
            CPU.clear()
            t0 = time.thread_time()
            engine.generate(prompts[:k], one)
            ms = 1e3 / (512 * k)
            total = (time.thread_time() - t0) * ms
            parts = ", ".join(
                f"{n} {v * ms:.3f}" for n, v in sorted(CPU.items(), key=lambda x: -x[1])
            )
            print(f"round {r + 1} {k}x512: {total:.3f} ms/token in all; {parts}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=8, help="workload 1's requests (layout)")
    ap.add_argument("--together", type=int, default=4, help="512-token prompts in one step")
    ap.add_argument("--rounds", type=int, default=2, help="prefill rounds, order alternating")
    ap.add_argument("--parts", default="layout,prefill")
    args = ap.parse_args()
    for name in ("int4_mm", "int8_mm"):
        _wrap(quant, name)
    for name in ("add_rms_norm", "rope_store_kv", "paged_attention", "silu_mul"):
        _wrap(cpu_ops, name)
    engine = Engine(dtype="float32")
    print(f"torch threads {torch.get_num_threads()}")
    parts = set(args.parts.split(","))
    if "layout" in parts:
        layout(engine, args.requests)
    if "prefill" in parts:
        prefill(engine, args.together, args.rounds)


if __name__ == "__main__":
    main()
