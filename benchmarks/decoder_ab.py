"""Same-run A/B of the default engine's generate speed between two checkouts (``CpuDecoder``,
seam 4 of docs/torch_free_cpu.md, against main).

Each round runs one fresh child per checkout (``PYTHONPATH`` = its root, ``OMP_NUM_THREADS=2``),
the order reversed every other round. A child builds ``Engine(dtype="float32",
prefix_cache=False)`` (the packaged SmolLM2 Q4_1, int8 activations), warms up, then measures:

- ``decode``: batch-1 greedy decode (``ignore_eos``) of ``--decode-tokens`` tokens after a short
  chat prompt: seconds between consecutive steps (``ModelRunner.execute`` calls), median; tokens/s.
- ``ttft_512``: ``generate`` of one token after a 512-token prompt (one prefill chunk), wall,
  median of ``--ttft-repeats``.
- ``runtime_8``: ``bench_runtime.py``'s workload 1 with 8 requests (prompts U[100, 800] tokens,
  outputs U[50, 300], seed 0, greedy, ``ignore_eos``): output tokens/s of one ``generate``.

The checkouts' greedy tokens must be equal (their logits are equal bit for bit): checked and
printed. Prints a markdown table of the medians over rounds and the ratio B/A.

Run:  nice -n 10 python benchmarks/decoder_ab.py A_ROOT B_ROOT [--rounds 4]
(each root a checkout with its C extensions built, e.g. a ``git worktree`` of main).

``--forward [--repeats N]`` (this checkout only, one process): ``DecoderForCausalLM.forward`` of
the packaged model over one KV pool, with ``CpuDecoder`` (B) and with the dispatch before it (A:
``cpu_decoder`` patched to None: the fused ``DecodeStepPlan`` for steps of at most 64 rows a
sequence, the per-op path above), alternating A B / B A per repeat over the same steps: a
512-token prompt chunk, then a batch-1 decode step behind it (both rewrite the same KV slots each
call). Median seconds per forward, the ratio B/A, and whether the logits are equal bit for bit.
``--host-overhead [--repeats N]``: the same decode step with its C kernels stubbed (host side).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time


def child(decode_tokens: int, ttft_repeats: int) -> dict:
    """One checkout's measurements (module docstring), run in a fresh process."""
    sys.path.insert(0, os.path.join(os.environ["PYTHONPATH"], "benchmarks"))
    from bench_runtime import _random_prompt_ids

    import structgen
    from structgen import SamplingParams

    engine = structgen.Engine(dtype="float32", prefix_cache=False)
    chat = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    engine.generate([chat], SamplingParams(max_tokens=4, temperature=0.0))  # warm-up
    stamps: list[float] = []
    execute = engine.runner.execute  # each step's start (the model's forward hook does not
    # fire where the runner calls the host decoder itself); consecutive starts: a whole step

    def stamped(*args, **kwargs):
        stamps.append(time.perf_counter())
        return execute(*args, **kwargs)

    engine.runner.execute = stamped
    params = SamplingParams(max_tokens=decode_tokens, temperature=0.0, ignore_eos=True)
    decode_out = list(engine.generate([chat], params)[0].token_ids)
    del engine.runner.execute
    steps = [b - a for a, b in zip(stamps[1:], stamps[2:])]  # decode steps (not the prefill)
    rng = random.Random(1)
    long_prompt = _random_prompt_ids(engine, rng, 512)
    assert len(long_prompt) == 512, len(long_prompt)
    ttft, first = [], []
    for _ in range(ttft_repeats):
        t0 = time.perf_counter()
        first.append(engine.generate([long_prompt], SamplingParams(max_tokens=1, temperature=0.0)))
        ttft.append(time.perf_counter() - t0)
    rng = random.Random(0)  # bench_runtime.workload_throughput's requests, n = 8
    prompts = [_random_prompt_ids(engine, rng, rng.randint(100, 800)) for _ in range(8)]
    outs = [rng.randint(50, 300) for _ in range(8)]
    params8 = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in outs]
    t0 = time.perf_counter()
    res = engine.generate(prompts, params8)
    dt = time.perf_counter() - t0
    return {
        "decode_tok_s": 1.0 / statistics.median(steps),
        "ttft_512_s": statistics.median(ttft),
        "runtime_8_tok_s": sum(len(r.token_ids) for r in res) / dt,
        "tokens": [
            decode_out,
            [list(r[0].token_ids) for r in first],
            [list(r.token_ids) for r in res],
        ],
    }


def forward_ab(repeats: int) -> None:
    """The in-process A/B of ``--forward`` (module docstring)."""
    import torch

    import structgen
    from benchmarks.support import alternating
    from structgen.runtime.forward_batch import ForwardBatch
    from structgen.runtime.models import decoder as model_decoder

    engine = structgen.Engine(dtype="float32", prefix_cache=False)
    model = engine.loaded.model
    kv = model.make_kv_pool(40, 16)
    pages = kv.alloc(33)
    rng = random.Random(1)
    prompt = [rng.randrange(10, 49000) for _ in range(512)]
    steps = {
        "prefill_512": ForwardBatch.build([prompt], [0], [pages], 16),
        "decode_b1": ForwardBatch.build([[prompt[7]]], [512], [pages], 16),
    }
    real = model_decoder.cpu_decoder
    times: dict = {(k, m): [] for k in steps for m in "AB"}
    logits: dict = {}
    # round 0: warm-up (plans, tile tables), not timed
    for r, mode in alternating("AB", repeats, warm_up=True):
        model_decoder.cpu_decoder = real if mode == "B" else (lambda *a: None)
        try:
            for name, batch in steps.items():
                for _ in range(1 if name == "prefill_512" else 5):
                    t0 = time.perf_counter()
                    out = model(batch, kv)
                    if r:
                        times[name, mode].append(time.perf_counter() - t0)
                # a tensor, or the host path's ndarray
                logits.setdefault((name, mode), torch.as_tensor(out).clone())
        finally:
            model_decoder.cpu_decoder = real
    print(f"forward A/B in one process, {repeats} repeats, medians (s per forward)")
    print("| step | A: before | B: CpuDecoder | B / A | logits equal |\n|---|---|---|---|---|")
    for name in steps:
        a = statistics.median(times[name, "A"])
        b = statistics.median(times[name, "B"])
        same = torch.equal(logits[name, "A"], logits[name, "B"])
        print(f"| {name} | {a:.4f} | {b:.4f} | {b / a:.3f} | {same} |")


class _NoKernels:
    """An extension module whose ``names`` do nothing (``--host-overhead``)."""

    def __init__(self, real, names: tuple[str, ...]) -> None:
        self._real, self._names = real, names

    def __getattr__(self, name: str):
        return (lambda *a: None) if name in self._names else getattr(self._real, name)


def host_overhead(repeats: int) -> None:
    """``--host-overhead``: the batch-1 decode step of ``--forward`` with its C kernels
    (``decode_layers``, ``add_rms_norm``, ``int8t_mm``) doing nothing: the host-side time of a
    step, A (the dispatch before ``CpuDecoder``) vs B, alternating, medians.
    """
    import structgen
    from benchmarks.support import alternating
    from structgen.runtime.cpu import decode_step
    from structgen.runtime.cpu import ops as cpu_ops
    from structgen.runtime.cpu import quant as cpu_quant
    from structgen.runtime.forward_batch import ForwardBatch
    from structgen.runtime.models import decoder as model_decoder

    engine = structgen.Engine(dtype="float32", prefix_cache=False)
    model = engine.loaded.model
    kv = model.make_kv_pool(40, 16)
    pages = kv.alloc(33)
    batch = ForwardBatch.build([[17]], [512], [pages], 16)
    real = model_decoder.cpu_decoder
    model(batch, kv)  # plans and tile tables built with the real kernels
    with_a = model_decoder.cpu_decoder = lambda *a: None
    model(batch, kv)
    model_decoder.cpu_decoder = real
    stubs = [
        (decode_step, "_ext", ("decode_layers",)),
        (cpu_ops, "_ext", ("add_rms_norm",)),
        (cpu_quant, "_lib", ("int8t_mm",)),
    ]
    saved = [getattr(m, a) for m, a, _ in stubs]
    times: dict = {"A": [], "B": []}
    try:
        for m, a, names in stubs:
            setattr(m, a, _NoKernels(getattr(m, a), names))
        for _, mode in alternating("AB", repeats):
            model_decoder.cpu_decoder = real if mode == "B" else with_a
            for _ in range(50):
                t0 = time.perf_counter()
                model(batch, kv)
                times[mode].append(time.perf_counter() - t0)
    finally:
        model_decoder.cpu_decoder = real
        for (m, a, _), v in zip(stubs, saved):
            setattr(m, a, v)
    a, b = statistics.median(times["A"]), statistics.median(times["B"])
    print(f"host side of a batch-1 decode forward (C kernels stubbed), {repeats} x 50 calls a mode")
    print(
        f"| A: before | B: CpuDecoder | B / A |\n|---|---|---|\n| {a * 1e6:.0f} us | "
        f"{b * 1e6:.0f} us | {b / a:.3f} |"
    )


def _run(root: str, args) -> dict:
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="2")
    cmd = [sys.executable, os.path.abspath(__file__), "--child"]
    cmd += ["--decode-tokens", str(args.decode_tokens), "--ttft-repeats", str(args.ttft_repeats)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, cwd=root)
    if run.returncode != 0:
        raise SystemExit(f"child under {root} failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a_root", nargs="?")
    ap.add_argument("b_root", nargs="?")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--ttft-repeats", type=int, default=3)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--forward", action="store_true")
    ap.add_argument("--host-overhead", action="store_true")
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    if args.host_overhead:
        host_overhead(args.repeats)
        return
    if args.forward:
        forward_ab(args.repeats)
        return
    if args.child:
        print(json.dumps(child(args.decode_tokens, args.ttft_repeats)))
        return
    if not (args.a_root and args.b_root) or args.rounds < 1:
        ap.error("need A_ROOT and B_ROOT, and --rounds >= 1")
    from benchmarks.support import alternating  # here: a child runs under the other checkout

    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for r, name in alternating("AB", args.rounds):
        runs[name].append(_run(args.a_root if name == "A" else args.b_root, args))
        got = {k: round(v, 4) for k, v in runs[name][-1].items() if k != "tokens"}
        print(f"round {r + 1}/{args.rounds} {name}: {got}", flush=True)
    same = all(a["tokens"] == b["tokens"] for a in runs["A"] for b in runs["B"])
    print(f"\nA = {args.a_root}, B = {args.b_root}; {args.rounds} rounds, medians")
    print("| measure | A | B | B / A |\n|---|---|---|---|")
    for key in ("decode_tok_s", "ttft_512_s", "runtime_8_tok_s"):
        a = statistics.median(x[key] for x in runs["A"])
        b = statistics.median(x[key] for x in runs["B"])
        print(f"| {key} | {a:.4g} | {b:.4g} | {b / a:.3f} |")
    print(f"greedy tokens equal across checkouts and rounds: {same}")
    for key in ("decode_tok_s", "ttft_512_s", "runtime_8_tok_s"):
        print(
            key,
            "A:",
            [round(x[key], 4) for x in runs["A"]],
            "B:",
            [round(x[key], 4) for x in runs["B"]],
        )


if __name__ == "__main__":
    main()
