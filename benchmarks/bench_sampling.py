"""Per-step sampling on CPU: token-bitmask application and sampling of 1, 8 and 64 rows.

Same process, interleaved, medians of ``--repeats`` calls (only ratios within one run mean
much on a shared host):

1. applying a packed int32 token bitmask to ``[R, V]`` float32 logits: structgen's default
   (``apply_token_bitmask``, numpy on CPU), its torch reference (the previous default) and
   XGrammar's CPU kernel (``xgrammar.apply_token_bitmask_inplace``); masks are random
   (half the tokens allowed, the worst case for a branchy kernel) or blocky (a few runs);
2. ``sample`` for greedy, temperature 0.8 and temperature 1.0 + top-p 0.95 rows, inside
   ``few_rows_serial`` (the default ``sample_step`` path for <= 8 rows) and outside it
   (torch's intra-op pool); top-p over Gaussian logits with standard deviation 1 (flat: the
   top 1,024 tokens hold ~15% of the mass, so the whole row is sorted) and 5 (peaked: the
   top 1,024 hold over 95%, as a language model's next-token distribution usually does).

Run: ``python benchmarks/bench_sampling.py [--vocab 49152] [--repeats 50]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from structgen.kernels.apply_token_bitmask import apply_token_bitmask, apply_token_bitmask_ref
from structgen.runtime.sampler import few_rows_serial, sample
from structgen.runtime.sampling_params import SamplingParams


def _median_us(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


def _masks(rows: int, vocab: int, kind: str, rng: np.random.Generator) -> torch.Tensor:
    if kind == "random":
        allowed = rng.random((rows, vocab)) < 0.5
    else:
        allowed = np.zeros((rows, vocab), bool)
        allowed[:, 100:300] = True
        allowed[:, vocab - vocab // 5 :] = True
    packed = np.packbits(allowed, axis=1, bitorder="little")
    packed = np.pad(packed, ((0, 0), (0, (-packed.shape[1]) % 4)))
    return torch.from_numpy(packed.view(np.int32).copy())


def bitmask_rows(vocab: int, repeats: int) -> list[tuple]:
    """Rows (mask kind, R, structgen us, torch reference us, xgrammar us)."""
    try:
        import xgrammar as xgr
    except ImportError:  # the peer is optional
        xgr = None
    rng = np.random.default_rng(0)
    out = []
    for kind in ("random", "blocky"):
        for rows in (1, 8, 64):
            lg, bm = torch.randn(rows, vocab), _masks(rows, vocab, kind, rng)
            ours = _median_us(lambda lg=lg, bm=bm: apply_token_bitmask(lg, bm), repeats)
            ref = _median_us(
                lambda lg=lg, bm=bm: apply_token_bitmask_ref(lg, bm), max(3, repeats // 5)
            )
            peer = float("nan")
            if xgr is not None:
                peer = _median_us(
                    lambda lg=lg, bm=bm: xgr.apply_token_bitmask_inplace(lg, bm), repeats
                )
            out.append((kind, rows, ours, ref, peer))
    return out


def sample_rows(vocab: int, repeats: int) -> list[tuple]:
    """Rows (params, R, serial us, pool us)."""
    kinds = {  # name: (params, logits' standard deviation)
        "greedy": (SamplingParams(temperature=0.0), 1.0),
        "temperature 0.8": (SamplingParams(temperature=0.8), 1.0),
        "temperature 1.0, top-p 0.95, flat logits (std 1)": (
            SamplingParams(temperature=1.0, top_p=0.95),
            1.0,
        ),
        "temperature 1.0, top-p 0.95, peaked logits (std 5)": (
            SamplingParams(temperature=1.0, top_p=0.95),
            5.0,
        ),
    }
    out = []
    for name, (params, std) in kinds.items():
        for rows in (1, 8, 64):
            lg, ps, gens = torch.randn(rows, vocab) * std, [params] * rows, [None] * rows

            def serial(lg=lg, ps=ps, gens=gens):
                with few_rows_serial(lg[:1]):  # one row's logits: always the serial branch
                    sample(lg, ps, gens)

            pool = _median_us(
                lambda lg=lg, ps=ps, gens=gens: sample(lg, ps, gens), max(3, repeats // 5)
            )
            out.append((name, rows, _median_us(serial, max(3, repeats // 5)), pool))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    print(f"torch threads: {torch.get_num_threads()}, vocabulary {args.vocab}")
    head = "mask | rows | structgen us | torch ref us | xgrammar us | ref / ours | xgrammar / ours"
    print(f"\n| {head} |")
    print("|---|---|---|---|---|---|---|")
    for kind, rows, ours, ref, peer in bitmask_rows(args.vocab, args.repeats):
        figures = f"{ours:.1f} | {ref:.1f} | {peer:.1f} | {ref / ours:.2f}x | {peer / ours:.2f}x"
        print(f"| {kind} | {rows} | {figures} |")
    print("\n| sampling | rows | one thread us | intra-op pool us | pool / one thread |")
    print("|---|---|---|---|---|")
    for name, rows, ser, pool in sample_rows(args.vocab, args.repeats):
        print(f"| {name} | {rows} | {ser:.1f} | {pool:.1f} | {pool / ser:.2f}x |")


if __name__ == "__main__":
    main()
