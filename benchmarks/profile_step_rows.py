"""Decode steps of R rows after a C-token context: time per step, fp32 against bf16 model (the
same GGUF, the KV cache and activations in the model's dtype), for a profiler to attach to.

The packaged SmolLM2-135M Q4_1 GGUF (``quantization="gguf"``, int8 activations: the default
engine's model) through ``PagedSequences``: R sequences each prefilled with C tokens, then
``--steps`` decode steps of one token per sequence (the fused decode step, one call for up to 64
rows; the lm_head and the logits included), the cases interleaved (order alternating), medians
of the calling thread's CPU time (one thread: ``torch.set_num_threads(1)``, so that is all the
step's work). ``--threads 1,2``: every step is run at each thread count in turn
(``torch.set_num_threads``) and the medians of wall time are printed too (the other threads'
work is not in the calling thread's CPU time, so at 2 threads wall time is the figure).
``--base-ext SO``: every step is also run through another build of
``structgen.runtime.cpu._decodestep`` (e.g. main's ``.so``, loaded beside this tree's) at the same
positions (each step's tokens are taken back after it, so every step of every case attends the
same C + 1 keys), its logits checked equal to this build's bit for bit, and the ratio
base / this printed (> 1: this build is faster).
``--base-head``: the base case also runs the tied lm_head as main did, the row-major int8 x Q8
kernel (``int8_matmul``: int8q8_rows) instead of this tree's int8 tile kernel (``int8t_mm``);
with it the two cases' logits differ by float summation order, so instead of equality the
rows whose argmax differs are counted (without ``--base-ext`` both cases run this tree's
``_decodestep``).
Before the timed steps the process id is written to ``--ready`` and the script sleeps 3 s, so
``perf record -p PID`` sees only decode steps:

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/profile_step_rows.py --rows 8 --context 450 \\
        [--steps 40] [--dtypes fp32,bf16] [--threads 1] [--base-ext SO] [--ready /tmp/ready]
    perf record -F 999 -g -p $(cat /tmp/ready) -- sleep 25   # in another shell
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.support import load_extension

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--context", type=int, default=450)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--dtypes", default="fp32,bf16", help=f"comma-separated, of {sorted(DTYPES)}")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts (each >= 1)")
    ap.add_argument("--base-ext", help="another build's _decodestep .so, run at the same steps")
    ap.add_argument(
        "--base-head",
        action="store_true",
        help="the base case runs the tied lm_head through the row-major int8 kernel (main's)",
    )
    ap.add_argument("--ready", help="file the process id is written to before the timed steps")
    args = ap.parse_args()
    names = args.dtypes.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    if (
        not names
        or any(n not in DTYPES for n in names)
        or args.rows < 1
        or args.steps < 2
        or any(t < 1 for t in threads)
    ):
        ap.error("--dtypes must name fp32 / bf16, --rows >= 1, --steps >= 2, --threads >= 1")

    from structgen.runtime.cpu import decode_step
    from structgen.runtime.loader import load_model
    from structgen.runtime.models.testing import PagedSequences
    from structgen.runtime.quantization.linear import apply_activation_dtype, int8_matmul

    builds = {"this": decode_step._ext}
    if args.base_ext:
        builds["base"] = load_extension(args.base_ext, "structgen.runtime.cpu._decodestep")
    elif args.base_head:
        builds["base"] = decode_step._ext
    rewind = len(builds) > 1
    torch.set_num_threads(max(threads))
    steps_kept = 1 if rewind else args.steps * len(threads)
    pages = args.rows * (args.context + steps_kept + 16) // 16 + 64
    runs = {}
    for name in names:
        model = load_model(None, DTYPES[name], "cpu", "gguf").model
        seqs = PagedSequences(apply_activation_dtype(model, "int8"), num_pages=pages, page_size=16)
        for i in range(args.rows):
            seqs.step({i: [(100 + i + j) % 1000 for j in range(args.context)]})
        runs[name] = seqs

    def rows_head(emb, x):  # main's tied head: the row-major int8 x Q8 kernel
        return int8_matmul(x, emb.qweight, emb.scales, emb.activation_dtype)

    def set_head(name: str, b: str) -> None:
        emb = runs[name].model.model.embed_tokens
        emb.__dict__.pop("as_linear", None)
        if args.base_head and b == "base":
            emb.__dict__["as_linear"] = lambda x: rows_head(emb, x)

    tok = {i: [7] for i in range(args.rows)}
    for seqs in runs.values():
        seqs.step(tok)  # warm
    if args.ready:
        Path(args.ready).write_text(str(os.getpid()))
        time.sleep(3)
    cases = [(n, t, b) for n in names for t in threads for b in builds]
    cpu: dict[tuple, list[float]] = {c: [] for c in cases}
    argmax_differs = dict.fromkeys(names, 0)
    wall: dict[tuple, list[float]] = {c: [] for c in cases}
    for r in range(args.steps):
        logits: dict[tuple, torch.Tensor] = {}
        for name, nt, b in cases if r % 2 == 0 else cases[::-1]:
            torch.set_num_threads(nt)
            decode_step._ext = builds[b]
            set_head(name, b)
            c0, w0 = time.thread_time(), time.perf_counter()
            out = runs[name].step(tok)
            cpu[(name, nt, b)].append((time.thread_time() - c0) * 1e3)
            wall[(name, nt, b)].append((time.perf_counter() - w0) * 1e3)
            if rewind:  # the next case attends the same keys (this step's K/V overwritten)
                for s in runs[name].tokens.values():
                    s.pop()
                logits[(name, nt, b)] = torch.stack([out[i] for i in range(args.rows)])
        for name, nt, b in cases:
            if b == "this":
                continue
            got, want = logits[(name, nt, b)], logits[(name, nt, "this")]
            if args.base_head:
                argmax_differs[name] += int((got.argmax(-1) != want.argmax(-1)).sum())
            elif not torch.equal(got, want):
                sys.exit(f"{name}, {nt} threads: the {b} build's logits differ from this build's")
    decode_step._ext = builds["this"]
    for name in names:
        set_head(name, "this")
    if threads == [1] and not rewind:
        med = {n: statistics.median(cpu[(n, 1, "this")]) for n in names}
        cols = "  ".join(f"{n} {med[n]:.2f} ms" for n in names)
        ratio = f"  fp32/bf16 {med['fp32'] / med['bf16']:.2f}x" if len(med) == 2 else ""
        print(f"rows {args.rows} context {args.context}: thread time per step  {cols}{ratio}")
        return
    print(f"rows {args.rows} context {args.context}, {args.steps} steps a case (medians):")
    for name, nt, b in cases:
        w, c = statistics.median(wall[(name, nt, b)]), statistics.median(cpu[(name, nt, b)])
        line = f"  {name} threads {nt} {b}: wall {w:.2f} ms, calling thread CPU {c:.2f} ms"
        if b != "this":
            w0 = statistics.median(wall[(name, nt, "this")])
            c0 = statistics.median(cpu[(name, nt, "this")])
            line += f"  (base / this: wall {w / w0:.3f}x, thread CPU {c / c0:.3f}x)"
        print(line)
    if rewind and args.base_head:
        for name in names:
            print(
                f"  {name}: rows whose argmax differs between the heads: "
                f"{argmax_differs[name]} of {args.steps * args.rows * len(threads)}"
            )
    elif rewind:
        print("  logits of every step equal bit for bit across builds")


if __name__ == "__main__":
    main()
