"""Where `Engine()` start-up spends its seconds and resident megabytes (issue #21).

Two measurements, in one process each:
  * ``--stages``: resident set (``VmRSS``) and its peak (``ru_maxrss``) after ``import torch``,
    ``import structgen``, the GGUF state dict, model construction, weight assignment,
    ``Engine()`` and README's extraction (JSON-schema constrained generate);
  * ``--dequant``: the GGUF state dict (float32 and bfloat16) built with csrc/kquant.c vs the
    torch path it replaced (the extension switched off), interleaved, best of ``--repeats``:
    wall and process CPU seconds.

Run:  PYTHONPATH=. python benchmarks/profile_load.py --stages [--quantization gguf]
      PYTHONPATH=. python benchmarks/profile_load.py --dequant [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rss() -> str:
    cur = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                cur = int(line.split()[1]) // 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return f"rss {cur} MB, peak {peak} MB"


def stages(dtype: str, quantization: str | None) -> None:
    t0 = time.perf_counter()
    import torch  # noqa: F401

    print(f"import torch: {_rss()}", flush=True)
    import structgen
    import structgen.runtime.loader.gguf_loader as gl

    print(f"import structgen: {_rss()}", flush=True)
    state_dict, assign = gl.gguf_state_dict, gl.assign_weights

    def traced_state_dict(*a, **k):
        out = state_dict(*a, **k)
        print(f"GGUF state dict built: {_rss()}", flush=True)
        return out

    def traced_assign(*a, **k):
        print(f"model constructed: {_rss()}", flush=True)
        out = assign(*a, **k)
        print(f"weights assigned: {_rss()}", flush=True)
        return out

    gl.gguf_state_dict, gl.assign_weights = traced_state_dict, traced_assign
    engine = structgen.Engine(dtype=dtype, quantization=quantization)
    print(f"Engine(): {_rss()}  ({time.perf_counter() - t0:.1f} s since start)", flush=True)
    from structgen import JsonSchema, SamplingParams
    from structgen.extraction import extraction_messages

    schema = json.loads((ROOT / "examples/schemas/person.json").read_text())
    msgs = extraction_messages(schema, "Maria Lopez, 34, works as a nurse in Lyon.")
    engine.generate([msgs], SamplingParams(max_tokens=100, temperature=0.0), JsonSchema(schema))
    print(f"extraction generated: {_rss()}", flush=True)
    print(engine.memory_report())


def dequant(repeats: int) -> None:
    import torch

    from structgen.runtime.loader import default_model_path
    from structgen.runtime.loader import dequant as dq
    from structgen.runtime.loader.gguf_file import GGUFFile
    from structgen.runtime.loader.gguf_loader import gguf_config, gguf_state_dict

    kquant = dq._kquant
    g = GGUFFile(default_model_path(), skip_arrays_over=4096)
    config = gguf_config(g)
    best: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):
        for label, ext in (("torch path (before)", None), ("csrc/kquant.c", kquant)):
            for dt in (torch.float32, torch.bfloat16):
                dq._kquant = ext
                t, c = time.perf_counter(), time.process_time()
                state, _ = gguf_state_dict(g, config, dt)
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                del state
                b = best.setdefault((label, str(dt)), [float("inf"), float("inf")])
                b[0], b[1] = min(b[0], wall), min(b[1], cpu)
    dq._kquant = kquant
    print("| state dict | dtype | wall s (best) | CPU s (best) |\n|---|---|---|---|")
    for (label, dt), (wall, cpu) in best.items():
        print(f"| {label} | {dt} | {wall:.2f} | {cpu:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--dequant", action="store_true")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--quantization", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.stages:
        stages(args.dtype, args.quantization)
    if args.dequant:
        dequant(args.repeats)


if __name__ == "__main__":
    main()
