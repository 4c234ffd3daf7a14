"""A decode step of rows behind one cached prefix, this build's fused step against another's.

The packaged SmolLM2-135M (GGUF blocks, int8 activations: ``quantization="gguf"``): ``--rows``
sequences share a ``--prefix``-token prompt prefix (its pages cached once and forked into every
page table, as the radix cache holds a batched extraction's schema), then each its own suffix of
``--suffix A,B`` tokens (row r: A + 37 r mod (B - A + 1)). Each timed sample is one decode step of
all rows through ``decode_step._ext`` of this tree or of ``--base`` (another build of
``structgen.runtime.cpu._decodestep``), the same token at the same positions each time (the rows'
caches rolled back after the step). Logits of the two builds are checked equal bit for bit. The
calling thread's CPU time with ``--threads 1`` (wall time otherwise), medians of ``--rounds``
alternating rounds; base / this is the speed-up.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_shared_prefix_step_ab.py \\
        --base /work/wt-a8-base/structgen/runtime/cpu/_decodestep.cpython-311-x86_64-linux-gnu.so \\
        [--rows 8,64] [--prefix 320] [--suffix 50,100] [--threads 1] [--rounds 9]
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.support import interleaved_rounds, load_extension, medians


def _sequences(model, rows: int, prefix: int, suffix: tuple[int, int]):
    """PagedSequences of ``rows`` sequences behind one shared prefix, each with its own suffix."""
    from structgen.runtime.models.testing import PagedSequences

    seqs = PagedSequences(model, num_pages=rows * 16 + 64, page_size=16)
    head = [(7 * j) % 4000 + 100 for j in range(prefix // 16 * 16)]  # whole pages
    seqs.step({0: head})
    for s in range(1, rows):
        seqs.tokens[s], seqs.pages[s] = list(head), list(seqs.pages[0])
    lo, hi = suffix
    for s in range(0, rows, 8):  # suffixes in steps of 8 sequences (the per-op path)
        seqs.step(
            {
                r: [(13 * r + j) % 4000 + 100 for j in range(lo + 37 * r % (hi - lo + 1))]
                for r in range(s, min(s + 8, rows))
            }
        )
    return seqs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the other build's _decodestep .so")
    ap.add_argument("--rows", default="8,64")
    ap.add_argument("--prefix", type=int, default=320)
    ap.add_argument("--suffix", default="50,100")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from structgen.runtime.cpu import decode_step
    from structgen.runtime.loader import load_model
    from structgen.runtime.quantization import apply_activation_dtype

    model = apply_activation_dtype(load_model(None, torch.float32, "cpu", "gguf").model, "int8")
    base = load_extension(args.base, "structgen.runtime.cpu._decodestep")
    exts = {"b": base, "n": decode_step._ext}
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    suffix = tuple(map(int, args.suffix.split(",")))
    print(f"| rows | prefix | suffix | base ms | this ms | speed-up |  ({args.threads} threads)")
    print("|---|---|---|---|---|---|")
    for rows in map(int, args.rows.split(",")):
        seqs = _sequences(model, rows, args.prefix, suffix)
        lengths = {s: len(t) for s, t in seqs.tokens.items()}
        step = {s: [42 + s] for s in range(rows)}
        logits = {}

        def decode(key: str, seqs=seqs, lengths=lengths, step=step, rows=rows, logits=logits):
            decode_step._ext = exts[key]
            t0 = clock()
            out = seqs.step(step)
            t = (clock() - t0) * 1e3
            for s, n in lengths.items():
                del seqs.tokens[s][n:]
            logits[key] = torch.stack([out[s] for s in range(rows)])
            return t

        times = interleaved_rounds("bn", args.rounds, decode, warm_up=True)
        decode_step._ext = exts["n"]
        if not torch.equal(logits["b"], logits["n"]):
            raise SystemExit(f"{rows} rows: logits differ between the builds")
        mb, mn = medians(times).values()
        print(f"| {rows} | {args.prefix} | {args.suffix} | {mb:.1f} | {mn:.1f} | {mb / mn:.2f}x |")


if __name__ == "__main__":
    main()
