"""Decode steps of R rows after a C-token context: thread time per step, fp32 against bf16 model
(the same GGUF, the KV cache and activations in the model's dtype), for a profiler to attach to.

The packaged SmolLM2-135M Q4_1 GGUF (``quantization="gguf"``, int8 activations: the default
engine's model) through ``PagedSequences``: R sequences each prefilled with C tokens, then
``--steps`` decode steps of one token per sequence (R <= 8: the fused decode step; more: the
per-op path), the two models' steps interleaved (order alternating), medians of the calling
thread's CPU time (one thread: ``torch.set_num_threads(1)``, so that is all the step's work).
Before the timed steps the process id is written to ``--ready`` and the script sleeps 3 s, so
``perf record -p PID`` sees only decode steps:

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/profile_step_rows.py --rows 8 --context 450 \\
        [--steps 40] [--dtypes fp32,bf16] [--ready /tmp/ready]
    perf record -F 999 -g -p $(cat /tmp/ready) -- sleep 25   # in another shell
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--context", type=int, default=450)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--dtypes", default="fp32,bf16", help=f"comma-separated, of {sorted(DTYPES)}")
    ap.add_argument("--ready", help="file the process id is written to before the timed steps")
    args = ap.parse_args()
    names = args.dtypes.split(",")
    if not names or any(n not in DTYPES for n in names) or args.rows < 1 or args.steps < 2:
        ap.error("--dtypes must name fp32 / bf16, --rows >= 1, --steps >= 2")

    from structgen.runtime.loader import load_model
    from structgen.runtime.models.testing import PagedSequences
    from structgen.runtime.quantization.linear import apply_activation_dtype

    torch.set_num_threads(1)
    pages = args.rows * (args.context + args.steps + 16) // 16 + 64
    runs = {}
    for name in names:
        model = load_model(None, DTYPES[name], "cpu", "gguf").model
        seqs = PagedSequences(apply_activation_dtype(model, "int8"), num_pages=pages, page_size=16)
        for i in range(args.rows):
            seqs.step({i: [(100 + i + j) % 1000 for j in range(args.context)]})
        runs[name] = seqs
    tok = {i: [7] for i in range(args.rows)}
    for seqs in runs.values():
        seqs.step(tok)  # warm
    if args.ready:
        Path(args.ready).write_text(str(os.getpid()))
        time.sleep(3)
    ms: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.steps):
        for name in names if r % 2 == 0 else names[::-1]:
            c0 = time.thread_time()
            runs[name].step(tok)
            ms[name].append((time.thread_time() - c0) * 1e3)
    med = {n: statistics.median(v) for n, v in ms.items()}
    cols = "  ".join(f"{n} {med[n]:.2f} ms" for n in names)
    ratio = f"  fp32/bf16 {med['fp32'] / med['bf16']:.2f}x" if len(med) == 2 else ""
    print(f"rows {args.rows} context {args.context}: thread time per step  {cols}{ratio}")


if __name__ == "__main__":
    main()
