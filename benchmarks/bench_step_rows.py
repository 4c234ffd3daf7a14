"""Decode steps at 1 and 8 rows and a 256-token prefill of the default engine's model, with
llama.cpp's batch-1 decode token beside them, in one process (rounds interleaved, medians).

The packaged SmolLM2-135M Q4_1 GGUF, ``quantization="gguf"``, int8 activations (the default
engine's model), through ``PagedSequences``: a step of R sequences of one token each after a
64-token context (R <= 8: the fused decode step), and one sequence's 256-token prefill chunk.
Run it in two trees one after the other (e.g. main and a branch) to compare builds: the
llama.cpp column, the same library in both, shows the machine's drift between the processes.

    PYTHONPATH=. OMP_NUM_THREADS=2 python benchmarks/bench_step_rows.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time

import torch


def _step_timer(model, rows: int):
    """A function timing one decode step (ms) of ``rows`` sequences of ``model``."""
    from structgen.runtime.models.testing import PagedSequences

    seqs = PagedSequences(model, num_pages=1024, page_size=16)
    seqs.step({i: list(range(100 + i, 164 + i)) for i in range(rows)})
    tok = {i: [7] for i in range(rows)}

    def one() -> float:
        t0 = time.perf_counter()
        out = seqs.step(tok)
        dt = time.perf_counter() - t0
        for i in range(rows):
            tok[i] = [int(out[i].argmax())]
        return dt * 1e3

    return one


def _prefill_timer(model, tokens: int):
    """A function timing one ``tokens``-token prefill (ms) from an empty context."""
    from structgen.runtime.models.testing import PagedSequences

    ids = [100 + (7 * i) % 20000 for i in range(tokens)]

    def one() -> float:
        seqs = PagedSequences(model, num_pages=64, page_size=16)
        t0 = time.perf_counter()
        seqs.step({0: ids})
        return (time.perf_counter() - t0) * 1e3

    return one


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--per-round", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from structgen.runtime.loader import load_model
    from structgen.runtime.quantization import apply_activation_dtype

    q8 = apply_activation_dtype(load_model(None, torch.float32, "cpu", "gguf").model, "int8")
    timers = {"step, 1 row": _step_timer(q8, 1), "step, 8 rows": _step_timer(q8, 8)}
    timers["prefill, 256 tokens"] = _prefill_timer(q8, 256)
    if importlib.util.find_spec("llama_cpp") is not None:
        from bench_decode_step import _llama_cpp_timer

        timers["llama.cpp decode token"] = _llama_cpp_timer()
    times = {k: [] for k in timers}
    with torch.inference_mode():
        for _ in range(args.rounds):
            for k, fn in timers.items():
                n = 2 if k.startswith("prefill") else args.per_round
                times[k] += [fn() for _ in range(n)]
    med = {k: statistics.median(v) for k, v in times.items()}
    print("| measure | ms (median) | / step, 1 row |")
    print("|---|---:|---:|")
    for k, m in med.items():
        print(f"| {k} | {m:.2f} | {m / med['step, 1 row']:.2f} |")


if __name__ == "__main__":
    main()
