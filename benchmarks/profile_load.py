"""Where `Engine()` start-up spends its seconds and resident megabytes (issue #21).

Two measurements, in one process each:
  * ``--stages``: resident set (``VmRSS``) and its peak (``ru_maxrss``) after ``import torch``,
    ``import structgen``, the GGUF state dict, model construction, weight assignment,
    ``Engine()`` and README's extraction (JSON-schema constrained generate);
  * ``--dequant``: the GGUF state dict (float32 and bfloat16) built with csrc/kquant.c vs the
    torch path it replaced (the extension switched off), interleaved, best of ``--repeats``:
    wall and process CPU seconds.

  * ``--compare DIR``: fresh processes alternating between this tree and the tree in ``DIR``
    (e.g. a ``git archive`` of the base with its built extensions copied in), each timing
    ``import structgen`` and then ``Engine()`` (warm caches), default and
    ``quantization="gguf"`` + int8 activations, and README's ``structgen extract`` under
    ``/usr/bin/time``: medians of wall, process CPU (user + sys) and maximum resident set.

Run:  PYTHONPATH=. python benchmarks/profile_load.py --stages [--quantization gguf]
      PYTHONPATH=. python benchmarks/profile_load.py --dequant [--repeats 3]
      python benchmarks/profile_load.py --compare /tmp/base [--repeats 5]
          [--configs default,gguf,"gguf + int8"] [--extract-quantization gguf]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.support import README_EXTRACT_ARGS  # noqa: E402


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


_ENGINE_CODE = """
import json, resource, sys, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t0, c0 = time.perf_counter(), cpu()
import structgen
t1, c1 = time.perf_counter(), cpu()
kw = json.loads(sys.argv[1])
structgen.Engine(**kw)
t2, c2 = time.perf_counter(), cpu()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps([t1 - t0, c1 - c0, t2 - t1, c2 - c1, rss]))
"""
_EXTRACT = README_EXTRACT_ARGS
# README's extract with Engine(quantization=...) in trees whose CLI may lack --quantization
_EXTRACT_QUANTIZED = """
import sys
from structgen import cli
from structgen.runtime import engine
cli._engine = lambda args: engine.Engine(args.model, quantization=sys.argv[1])
sys.exit(cli.main(sys.argv[2:]))
"""
_CONFIGS = {
    "default": {},
    "gguf": {"quantization": "gguf"},
    "gguf + int8": {"quantization": "gguf", "activation_dtype": "int8"},
}


def compare(
    base: str,
    repeats: int,
    configs: list[str] | None = None,
    extract_quantization: str | None = None,
) -> None:
    """Fresh processes alternating between ``base`` and this tree (see the module docstring);
    ``configs``: names of ``_CONFIGS`` (None: default and gguf + int8);
    ``extract_quantization``: run the extract with ``Engine(quantization=...)``.
    """
    import os
    import re
    import statistics
    import subprocess
    import sys

    trees = {"base": base, "this tree": str(ROOT)}
    configs = {n: _CONFIGS[n] for n in (configs or ["default", "gguf + int8"])}
    extract = (
        _EXTRACT
        if extract_quantization is None
        else ["-c", _EXTRACT_QUANTIZED, extract_quantization, *_EXTRACT[2:]]
    )
    rows: dict[tuple, list[list[float]]] = {}
    for tree in trees.values():  # fill each tree's caches (tokenizer, vocabulary) once
        env = dict(os.environ, PYTHONPATH=tree)
        subprocess.run([sys.executable, "-c", _ENGINE_CODE, "{}"], env=env, check=True, cwd=tree)
    for _ in range(repeats):
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=tree)
            for name, kw in configs.items():
                out = subprocess.run(
                    [sys.executable, "-c", _ENGINE_CODE, json.dumps(kw)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=tree,
                )
                rows.setdefault((label, name), []).append(json.loads(out.stdout.splitlines()[-1]))
                print(label, name, rows[label, name][-1], flush=True)
            t = time.perf_counter()
            out = subprocess.run(
                ["/usr/bin/time", "-f", "TIME %U %S %M", sys.executable, *extract],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                cwd=tree,
            )
            wall = time.perf_counter() - t
            user, sys_, rss = re.search(r"TIME (\S+) (\S+) (\d+)", out.stderr).groups()
            rows.setdefault((label, "extract"), []).append(
                [wall, float(user) + float(sys_), int(rss) / 1024]
            )
            print(label, "extract", rows[label, "extract"][-1], flush=True)
    med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
    print(
        "| tree | Engine() config | import structgen wall / CPU s | Engine() wall / CPU s | "
        "max RSS MB |\n|---|---|---|---|---|"
    )
    for (label, name), m in med.items():
        if name != "extract":
            print(
                f"| {label} | {name} | {m[0]:.2f} / {m[1]:.2f} | {m[2]:.2f} / {m[3]:.2f} "
                f"| {m[4]:.0f} |"
            )
    print("\n| tree | `structgen extract` wall s | CPU s | max RSS MB |\n|---|---|---|---|")
    for (label, name), m in med.items():
        if name == "extract":
            print(f"| {label} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--dequant", action="store_true")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--quantization", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare", metavar="DIR", default=None)
    ap.add_argument(
        "--configs", default=None, help=f"--compare: comma list of {', '.join(_CONFIGS)}"
    )
    ap.add_argument(
        "--extract-quantization", default=None, help="--compare: Engine(quantization=) of extract"
    )
    args = ap.parse_args()
    if args.compare:
        names = None if args.configs is None else args.configs.split(",")
        compare(args.compare, args.repeats, names, args.extract_quantization)
    if args.stages:
        stages(args.dtype, args.quantization)
    if args.dequant:
        dequant(args.repeats)


if __name__ == "__main__":
    main()
