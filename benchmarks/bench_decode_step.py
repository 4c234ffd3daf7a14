"""The fused CPU decode step over the packaged SmolLM2 Q4_1 file, interleaved in one process.

Configurations, each a model forward of one decode token (batch 1, after a 64-token prompt),
timed in alternating rounds so that a loaded machine's drift hits all alike:
  fp32 fused        the default today: the GGUF dequantized to fp32, fused decode step
  gguf q8 fused     Q4_1/Q8_0 blocks kept (quantization="gguf"), int8 activations, fused step
  gguf q8 per-op    the same model with the fused step off (a C call per op from Python)
  gguf f32 fused    the blocks with exact float32 activations, fused step
and llama.cpp's decode token time on the same file where llama-cpp-python is installed.
With ``--baseline-ext PATH`` (another build of ``structgen.runtime.cpu._decodestep``, e.g. the
``.so`` of an older commit), the two fused configurations also run through that build
("... baseline"), in the same rounds. With ``--busy N``, N busy loops (``nice 19``) run beside
the benchmark for its duration, to show how the step degrades on a loaded machine.
Prints a markdown table of median ms per token and the ratios to llama.cpp and to fp32 fused.

Run:  PYTHONPATH=. python benchmarks/bench_decode_step.py [--threads 2] [--rounds 15]
          [--baseline-ext old/_decodestep.so] [--busy 2]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import subprocess
import sys
import time

import torch

from benchmarks.support import load_extension


def _decode_timer(model, setup=None):
    """A function timing one decode token (ms) on a fresh 64-token context of ``model``."""
    from structgen.runtime.models.testing import PagedSequences

    seqs = PagedSequences(model, num_pages=512, page_size=16)
    seqs.step({0: list(range(100, 164))})
    tok = [7]

    def one() -> float:
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        out = seqs.step({0: tok})
        dt = time.perf_counter() - t0
        tok[0] = int(out[0].argmax())
        return dt * 1e3

    return one


def _llama_cpp_timer():
    from llama_cpp import Llama

    from structgen.runtime.loader import default_model_path

    n = torch.get_num_threads()
    llm = Llama(
        str(default_model_path()), n_ctx=1024, n_threads=n, n_threads_batch=n, verbose=False
    )
    llm.eval(list(range(100, 164)))

    def one() -> float:
        t0 = time.perf_counter()
        llm.eval([7])
        return (time.perf_counter() - t0) * 1e3

    return one


@contextlib.contextmanager
def _busy_loops(n: int):
    """``n`` busy Python loops at nice 19 for the duration of the block (then killed)."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while 1: pass"], preexec_fn=lambda: os.nice(19))
        for _ in range(n)
    ]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--per-round", type=int, default=8, help="tokens per configuration per round")
    ap.add_argument("--baseline-ext", help="another build of _decodestep to time beside this one")
    ap.add_argument("--busy", type=int, default=0, help="busy loops at nice 19 during the run")
    ap.add_argument("--only-fused", action="store_true", help="skip the per-op and f32 rows")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from structgen.runtime.cpu import decode_step
    from structgen.runtime.loader import load_model
    from structgen.runtime.quantization import apply_activation_dtype

    fp32 = load_model(None, torch.float32, "cpu").model
    q8 = apply_activation_dtype(load_model(None, torch.float32, "cpu", "gguf").model, "int8")
    f32 = apply_activation_dtype(load_model(None, torch.float32, "cpu", "gguf").model, "float32")
    ext = decode_step._ext
    base = None
    if args.baseline_ext:
        base = load_extension(args.baseline_ext, "structgen.runtime.cpu._decodestep")

    def on():
        decode_step.set_enabled(True)
        decode_step._ext = ext

    def on_base():
        decode_step.set_enabled(True)
        decode_step._ext = base

    def off():
        decode_step.set_enabled(False)

    timers = {"fp32 fused": _decode_timer(fp32, on)}
    if base is not None:
        timers["fp32 fused baseline"] = _decode_timer(fp32, on_base)
    timers["gguf q8 fused"] = _decode_timer(q8, on)
    if base is not None:
        timers["gguf q8 fused baseline"] = _decode_timer(q8, on_base)
    if not args.only_fused:
        timers["gguf q8 per-op"] = _decode_timer(q8, off)
        timers["gguf f32 fused"] = _decode_timer(f32, on)
    if importlib.util.find_spec("llama_cpp") is not None:
        timers["llama.cpp"] = _llama_cpp_timer()
    times = {k: [] for k in timers}
    rounds = {k: [] for k in timers}  # per round: the median of that round
    with _busy_loops(args.busy):
        for r in range(args.rounds):
            for k, fn in timers.items():
                got = [fn() for _ in range(args.per_round)]
                times[k] += got
                rounds[k].append(statistics.median(got))
            on()
            _table(times, rounds, args, f"after round {r + 1}")


def _table(times: dict, rounds: dict, args, note: str) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    ref = med.get("llama.cpp")
    print(
        f"torch {torch.__version__}, {args.threads} threads, {args.busy} busy loops, {note}, "
        f"{args.per_round} per round"
    )
    low = {k: min(v) for k, v in times.items()}
    print("| configuration | ms / token (median) | tok/s | x llama.cpp | x fp32 fused | best ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for k, m in med.items():
        vs = f"{ref / m:.2f}" if ref else "n/a"
        row = f"| {k} | {m:.2f} | {1e3 / m:.1f} | {vs} | {med['fp32 fused'] / m:.2f} |"
        print(f"{row} {low[k]:.2f} |")
    for k in med:
        if k.endswith(" baseline"):
            new = k[: -len(" baseline")]
            paired = statistics.median(b / n for b, n in zip(rounds[k], rounds[new]))
            print(
                f"{new}: baseline / this build = {med[k] / med[new]:.2f} (medians), "
                f"{paired:.2f} (median of per-round ratios), {low[k] / low[new]:.2f} (best)"
            )
    print(flush=True)


if __name__ == "__main__":
    main()
