"""One-process A/B of the default CPU engine's host step after the logits (#21 seam 5):
``step.sample_step`` on an ``ndarray`` (B: numpy alone, what the default engine runs since the
runner keeps ``CpuDecoder``'s logits in numpy) against the same logits as a CPU tensor (A: the
torch path the engine ran before: ``inference_mode``, ``torch.from_numpy`` bitmask, index
tensors, ``few_rows_serial``).

The packaged SmolLM2's vocabulary (49,152 logits a row); requests are stubs with greedy
params, every other one under a JSON-schema matcher at its start state (its mask cached after
the warm-up), rows drawn from N(0, 4). Each call gets a fresh copy of the same logits (the copy
is not timed); modes alternate A B / B A per repeat; medians per call. Tokens of both modes are
checked equal.

``--runner``: also the runner's side of a batch-1 decode step with the decoder's C kernels
(``decode_layers``, ``add_rms_norm``, ``int8t_mm``) doing nothing: A = main's
``ModelRunner.forward`` (``ForwardBatch.build`` as tensors, ``torch.inference_mode``, the
model's ``__call__`` dispatching to ``CpuDecoder``, ``torch.from_numpy``, ``.float()``), B =
``ModelRunner.forward_logits`` (a numpy ``ForwardBatch`` straight into ``CpuDecoder``).

``--engine``: whole greedy ``generate`` calls of one engine, batch 1 (a chat prompt, 32 tokens,
``ignore_eos``) and 8 prompts at once: A with a no-op forward hook on the model (the runner
then calls the model as main did: tensors, ``inference_mode``, tensor logits into ``step.py``),
B without (the numpy host path); alternating, medians of decode tokens/s (output tokens over
the call's wall time).

Run:  nice -n 10 env OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/host_step_ab.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import time
import types

import numpy as np

from benchmarks.support import alternating


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--runner", action="store_true")
    ap.add_argument("--engine", action="store_true")
    args = ap.parse_args()

    import torch

    import structgen
    from structgen import SamplingParams
    from structgen.fsm import compile_json_schema
    from structgen.runtime import step

    engine = structgen.Engine(prefix_cache=False)
    vocab = engine.vocab
    width = engine.loaded.model.config.vocab_size
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    grammar = compile_json_schema(schema, vocab)
    eos = frozenset({0})

    def reqs(n: int, constrained: bool):
        return [
            types.SimpleNamespace(
                params=SamplingParams(temperature=0.0),
                matcher=grammar.matcher() if constrained and i % 2 == 0 else None,
                output_token_ids=[],
                prompt_token_ids=[1],
                generator=None,
                finish=lambda *a: None,
            )
            for i in range(n)
        ]

    cases = [(1, False), (1, True), (8, False), (8, True)]
    rng = np.random.default_rng(0)
    print(f"host step A/B, one process, {args.repeats} repeats x {args.calls} calls, medians (us)")
    print("| rows | constrained | A: tensor | B: ndarray | B / A | tokens equal |")
    print("|---|---|---|---|---|---|")
    for rows, constrained in cases:
        base = (rng.standard_normal((rows, width)) * 4).astype(np.float32)
        rq = reqs(rows, constrained)
        times: dict[str, list[float]] = {"A": [], "B": []}
        tokens: dict[str, list] = {}
        for r, mode in alternating("AB", args.repeats, warm_up=True):
            for _ in range(args.calls):
                x = base.copy()
                logits = torch.from_numpy(x) if mode == "A" else x
                t0 = time.perf_counter()
                got = step.sample_step(logits, rq, eos)
                if r:
                    times[mode].append(time.perf_counter() - t0)
                tokens.setdefault(mode, got[0])
        a = statistics.median(times["A"]) * 1e6
        b = statistics.median(times["B"]) * 1e6
        same = tokens["A"] == tokens["B"]
        print(f"| {rows} | {constrained} | {a:.0f} | {b:.0f} | {b / a:.3f} | {same} |")
    if args.runner:
        runner_ab(engine, args.repeats, args.calls)
    if args.engine:
        engine_ab(engine, args.repeats)


def engine_ab(engine, repeats: int) -> None:
    """``--engine`` (module docstring)."""
    from structgen import SamplingParams

    model = engine.loaded.model
    chats = [
        [{"role": "user", "content": f"Write a short story about lighthouse number {i}."}]
        for i in range(8)
    ]
    params = SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True)
    rates: dict = {(n, m): [] for n in (1, 8) for m in "AB"}
    tokens: dict = {}
    for r, mode in alternating("AB", repeats, warm_up=True):
        handle = model.register_forward_hook(lambda *_: None) if mode == "A" else None
        try:
            for n in (1, 8):
                t0 = time.perf_counter()
                out = engine.generate(chats[:n], params)
                dt = time.perf_counter() - t0
                if r:
                    rates[n, mode].append(sum(len(o.token_ids) for o in out) / dt)
                tokens.setdefault((n, mode), [list(o.token_ids) for o in out])
        finally:
            if handle is not None:
                handle.remove()
    print(f"\nengine generate, one process, {repeats} repeats, medians (output tok/s)")
    print("| prompts | A: tensor step | B: numpy step | B / A | tokens equal |")
    print("|---|---|---|---|---|")
    for n in (1, 8):
        a = statistics.median(rates[n, "A"])
        b = statistics.median(rates[n, "B"])
        same = tokens[n, "A"] == tokens[n, "B"]
        print(f"| {n} | {a:.2f} | {b:.2f} | {b / a:.3f} | {same} |")


def runner_ab(engine, repeats: int, calls: int) -> None:
    """``--runner`` (module docstring)."""
    import torch

    from benchmarks.decoder_ab import _NoKernels
    from structgen.runtime.cpu import decode_step
    from structgen.runtime.cpu import ops as cpu_ops
    from structgen.runtime.cpu import quant as cpu_quant
    from structgen.runtime.forward_batch import ForwardBatch

    runner = engine.runner
    pages = runner.pool.alloc(4)
    step_args = ([[17]], [40], [pages])

    def before():  # main's ModelRunner.forward
        batch = ForwardBatch.build(*step_args, runner.pool.page_size, device=runner.device)
        with torch.inference_mode(), runner._backend():
            logits = runner.model(batch, runner.pool)  # a tensor, or the host path's ndarray
        return torch.as_tensor(logits).float()

    def after():
        return runner.forward_logits(*step_args)

    assert np.array_equal(before().numpy(), after())  # real kernels: the same logits
    stubs = [
        (decode_step, "_ext", ("decode_layers",)),
        (cpu_ops, "_ext", ("add_rms_norm",)),
        (cpu_quant, "_lib", ("int8t_mm",)),
    ]
    saved = [getattr(m, a) for m, a, _ in stubs]
    times: dict[str, list[float]] = {"A": [], "B": []}
    try:
        for m, a, names in stubs:
            setattr(m, a, _NoKernels(getattr(m, a), names))
        for r, mode in alternating("AB", repeats, warm_up=True):
            fn = before if mode == "A" else after
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                if r:
                    times[mode].append(time.perf_counter() - t0)
    finally:
        for (m, a, _), v in zip(stubs, saved):
            setattr(m, a, v)
        runner.pool.free(pages)
    a, b = statistics.median(times["A"]) * 1e6, statistics.median(times["B"]) * 1e6
    print(f"\nrunner side of a batch-1 decode step (C kernels stubbed), {repeats} x {calls} calls")
    print("| A: main's forward | B: forward_logits | B / A |\n|---|---|---|")
    print(f"| {a:.0f} us | {b:.0f} us | {b / a:.3f} |")


if __name__ == "__main__":
    main()
