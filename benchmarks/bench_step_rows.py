"""Decode steps at 1 and 8 rows and a 256-token prefill of the default engine's model, with
llama.cpp's batch-1 decode token beside them, in one process (rounds interleaved, medians).

The packaged SmolLM2-135M Q4_1 GGUF, ``quantization="gguf"``, int8 activations (the default
engine's model), through ``PagedSequences``: a step of R sequences of one token each after a
64-token context (R <= 8: the fused decode step), and one sequence's 256-token prefill chunk.
Run it in two trees one after the other (e.g. main and a branch) to compare builds: the
llama.cpp column, the same library in both, shows the machine's drift between the processes.
With ``--ab-rows`` the same measures also run, interleaved in the same rounds, on a second copy
of the model whose int4 weights are turned back into the "rows" layout (``QuantLinear._untile``,
projections fused again): the int4 kernel before the tile layout (``csrc/qkernel_rows.h``, the
same code as before it), so the A/B is within one process.

    PYTHONPATH=.:benchmarks OMP_NUM_THREADS=2 python benchmarks/bench_step_rows.py \
        [--rounds 7] [--ab-rows]
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


def _rows_layout(model):
    """``model`` with every int4 "tiles" weight turned into the "rows" layout, fused again."""
    from structgen.runtime.quantization.linear import QuantLinear

    for mod in model.modules():
        if isinstance(mod, QuantLinear) and mod.int4_layout == "tiles":
            mod._untile()
    model.fuse_projections()
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--per-round", type=int, default=8)
    ap.add_argument("--ab-rows", action="store_true", help="also the rows-layout kernel")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from structgen.runtime.loader import load_model
    from structgen.runtime.quantization import apply_activation_dtype

    q8 = apply_activation_dtype(load_model(None, torch.float32, "cpu", "gguf").model, "int8")
    models = {"": q8}
    if args.ab_rows:
        models[" (rows layout)"] = _rows_layout(
            apply_activation_dtype(load_model(None, torch.float32, "cpu", "gguf").model, "int8")
        )
    timers = {}
    for name, model in models.items():
        timers["step, 1 row" + name] = _step_timer(model, 1)
        timers["step, 8 rows" + name] = _step_timer(model, 8)
    for name, model in models.items():
        timers["prefill, 256 tokens" + name] = _prefill_timer(model, 256)
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
    print("| measure | ms (median) | / step, 1 row | rows layout / this (time) |")
    print("|---|---:|---:|---:|")
    for k, m in med.items():
        other = med.get(k + " (rows layout)")
        ab = f"{other / m:.2f}x" if other else ""
        print(f"| {k} | {m:.2f} | {m / med['step, 1 row']:.2f} | {ab} |")


if __name__ == "__main__":
    main()
