"""Run-to-run spread of the default ``Engine()`` batch-1 decode, and an A/B of the fused
decode step's barrier spin (csrc/decodestep.c, ``set_spin``) in the same process.

Each round decodes ``--tokens`` greedy tokens (EOS banned) after the same chat prompt once
per spin setting, the settings interleaved; per setting it reports the median, min and max
decode tokens/s over the rounds and every round's figure.

Run:  python benchmarks/bench_decode_spread.py [--rounds 7] [--tokens 128]
          [--spins 4000,0,40000] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch

PROMPT = [{"role": "user", "content": "Write a long story about a lighthouse keeper and a storm."}]


def _one_run(engine, n_tokens: int) -> float:
    """Decode tokens/s (1 / the request's mean time per output token after the first) of
    one greedy request of ``n_tokens`` tokens, EOS banned."""
    from structgen import SamplingParams

    params = SamplingParams(max_tokens=n_tokens, temperature=0.0, ignore_eos=True)
    return 1.0 / engine.generate([PROMPT], params)[0].metrics.tpot_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--spins", default="4000,0,40000")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from structgen import Engine, SamplingParams
    from structgen.runtime.cpu import _decodestep

    engine = Engine()
    engine.generate([PROMPT], SamplingParams(max_tokens=8, temperature=0.0))  # warm-up
    spins = [int(s) for s in args.spins.split(",")]
    res = {s: [] for s in spins}
    load0 = os.getloadavg()[0]
    for _ in range(args.rounds):
        for s in spins:
            _decodestep.set_spin(s)
            res[s].append(_one_run(engine, args.tokens))
    _decodestep.set_spin(-1)
    print(
        f"{args.rounds} rounds, {args.tokens} tokens, load average {load0:.1f} -> "
        f"{os.getloadavg()[0]:.1f}"
    )
    print("| barrier spin (pauses) | decode tok/s median | min | max | runs |")
    print("|---|---|---|---|---|")
    for s, rates in res.items():
        runs = ", ".join(f"{r:.0f}" for r in rates)
        print(
            f"| {s} | {statistics.median(rates):.1f} | {min(rates):.1f} | {max(rates):.1f} | "
            f"{runs} |"
        )


if __name__ == "__main__":
    main()
