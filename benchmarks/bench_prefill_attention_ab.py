"""TTFT of one prefill through the default engine, with the fused CPU ops (paged attention among
them) of this build against another build's, interleaved in one process.

One ``Engine(dtype="float32")`` (the default packaged SmolLM2-135M), a prompt of N random tokens
prefilled with ``max_tokens=1``; each timed sample swaps ``structgen.runtime.cpu.ops._ext`` to
this tree's ``_cpuops`` or to ``--base`` (e.g. main's ``.so``), flushes the prefix cache and
generates. One thread, its CPU time (``time.thread_time``: the machine may be shared), medians
of ``--rounds`` alternating rounds; the generated token and its logprob must be identical.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_prefill_attention_ab.py \\
        --base /work/wt-p5-base/structgen/runtime/cpu/_cpuops.cpython-311-x86_64-linux-gnu.so \\
        [--tokens 128,512] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from benchmarks.support import interleaved_rounds, load_extension, medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the other build's _cpuops .so")
    ap.add_argument("--tokens", default="128,512")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    import structgen.runtime.cpu.ops as cpu_ops
    from structgen import Engine, SamplingParams

    base = load_extension(args.base, "structgen.runtime.cpu._cpuops")
    exts = {"base": base, "this": cpu_ops._ext}
    engine = Engine(dtype="float32")
    sp = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, logprobs=1)
    print("| prompt tokens | base TTFT s (CPU) | this TTFT s (CPU) | speed-up |")
    print("|---|---|---|---|")
    for n in map(int, args.tokens.split(",")):
        rng = random.Random(n)
        text = " ".join(str(rng.random()) for _ in range(n))
        ids = engine.tokenizer.encode(text, add_special_tokens=False)[:n]
        outs = {}

        def prefill(key: str, ids=ids, outs=outs) -> float:
            cpu_ops._ext = exts[key]
            engine.flush_cache()
            t0 = time.thread_time()
            out = engine.generate([ids], sp)[0]
            t = time.thread_time() - t0
            outs[key] = (out.token_ids, out.logprobs)
            return t

        times = interleaved_rounds(("base", "this"), args.rounds, prefill, warm_up=True)
        cpu_ops._ext = exts["this"]
        if outs["base"] != outs["this"]:
            raise SystemExit(f"{n} tokens: the builds generate different tokens or logprobs")
        mb, mt = medians(times).values()
        print(f"| {n} | {mb:.3f} | {mt:.3f} | {mb / mt:.2f}x |")


if __name__ == "__main__":
    main()
