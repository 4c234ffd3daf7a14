"""The default model's load and first token: torch ``load_model`` vs the torch-free
``load_cpu_model`` (``CpuModel``), fresh processes, A/B interleaved.

Each round runs three fresh interpreters, the order rotating by round:

- ``host``: ``import structgen``; timed ``loader.load_cpu_model()`` (the packaged SmolLM2 as a
  ``runtime.cpu.model.CpuModel``: numpy weights from the map, no torch); then the first token:
  a prompt of ``--prompt`` token ids prefilled over numpy fp16 KV pages (``CpuModel.forward``)
  and its logits. ``"torch" in sys.modules`` is recorded after it.
- ``torch``: ``import structgen``; timed ``loader.load_model(None, torch.float32, "cpu",
  "gguf")`` and ``apply_activation_dtype(model, "int8")`` (what ``Engine()`` loads), torch
  imported inside it as in ``Engine()``; then the same prompt over a ``KVPool`` of fp16
  pages (``model.make_kv_pool``) in one ``ForwardBatch`` step.
- ``base`` (with ``--baseline DIR``): the ``torch`` child run with ``DIR`` (a checkout of main)
  first on ``PYTHONPATH``.

Timings: medians over the rounds of each child's own ``time.perf_counter`` (and process CPU
seconds, ``time.process_time``): ``load`` (after ``import structgen`` until the model is
built), ``first`` (the prompt's step), ``load+first``. Ratios host / torch from the same run.
The children's last-row logits must be equal bit for bit (both fp16 KV, int8 activations).

    nice -n 10 env PYTHONPATH=. python benchmarks/host_model_ab.py [--repeats 7]
        [--prompt 39] [--baseline /work/main]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HOST = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
import numpy as np
from structgen.runtime.loader import load_cpu_model
m = load_cpu_model().model
t1 = time.perf_counter(); c1 = time.process_time()
hidden, heads, kv_heads, d, inter = m.dims
L = m.config.num_hidden_layers
ids = [int(x) for x in sys.argv[1].split(",")]
pages = 1 + -(-len(ids) // 16)
class KV:
    page_size, dtype, device = 16, np.dtype(np.float16), "cpu"
    num_layers, num_kv_heads, head_dim, num_reserved_pages = L, kv_heads, d, pages
    k = [np.zeros((pages * 16, kv_heads, d), np.float16) for _ in range(L)]
    v = [np.zeros((pages * 16, kv_heads, d), np.float16) for _ in range(L)]
    def k_slots(self, i): return self.k[i]
    def v_slots(self, i): return self.v[i]
class Batch:
    t = len(ids)
    input_ids = np.array(ids, np.int64)
    positions = np.arange(t, dtype=np.int64)
    page_table = np.arange(1, pages, dtype=np.int64).reshape(1, -1)
    page_size = 16
    out_slots = page_table[0, positions // 16] * 16 + positions % 16
    seq_ids = np.zeros(t, np.int64)
    logits_indices = np.array([t - 1], np.int64)
logits = m.forward(Batch(), KV())
t2 = time.perf_counter(); c2 = time.process_time()
np.save(sys.argv[2], logits)
print(json.dumps({"load": t1 - t0, "load_cpu": c1 - c0, "first": t2 - t1, "first_cpu": c2 - c1,
                  "torch": "torch" in sys.modules}))
"""

TORCH = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
import numpy as np
import torch
from structgen.runtime.loader import load_model
from structgen.runtime.quantization import apply_activation_dtype
m = load_model(None, torch.float32, "cpu", quantization="gguf").model
apply_activation_dtype(m, "int8")
t1 = time.perf_counter(); c1 = time.process_time()
from structgen.runtime.forward_batch import ForwardBatch
ids = [int(x) for x in sys.argv[1].split(",")]
pages = 1 + -(-len(ids) // 16)
kv = m.make_kv_pool(pages, 16, kv_dtype=torch.float16)
got = kv.alloc(pages - 1)
batch = ForwardBatch.build([ids], [0], [got], 16)
with torch.inference_mode():
    logits = m(batch, kv)
t2 = time.perf_counter(); c2 = time.process_time()
np.save(sys.argv[2], np.asarray(logits))
print(json.dumps({"load": t1 - t0, "load_cpu": c1 - c0, "first": t2 - t1, "first_cpu": c2 - c1,
                  "torch": "torch" in sys.modules}))
"""
PRELUDE = "import structgen\n"  # before the timed part, in every child


def _child(code: str, path: Path, ids: list[int], out: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", PRELUDE + code, ",".join(map(str, ids)), out],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=path,
    )
    if run.returncode != 0:
        raise SystemExit(f"child failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--prompt", type=int, default=39, help="prompt tokens (ids, fixed)")
    ap.add_argument("--baseline", type=Path, help="a checkout of main for the torch child")
    args = ap.parse_args()
    import numpy as np

    ids = [(37 * j) % 49000 + 10 for j in range(args.prompt)]
    kinds = [("host", HOST, ROOT), ("torch", TORCH, ROOT)]
    if args.baseline:
        kinds.append(("base", TORCH, args.baseline.resolve()))
    runs: dict[str, list[dict]] = {k: [] for k, _, _ in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(2):  # warm: the tokenizer cache and the page cache filled
            for name, code, path in kinds:
                _child(code, path, ids, os.path.join(tmp, f"{name}.npy"))
        for r in range(args.repeats):
            order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]
            for name, code, path in order:
                runs[name].append(_child(code, path, ids, os.path.join(tmp, f"{name}.npy")))
        logits = {n: np.load(os.path.join(tmp, f"{n}.npy")) for n in runs}
    equal = {
        n: bool(np.array_equal(logits["host"].view(np.int32), logits[n].view(np.int32)))
        for n in runs
        if n != "host"
    }
    keys = ("load", "load_cpu", "first", "first_cpu")
    med = {n: {k: statistics.median(x[k] for x in rs) for k in keys} for n, rs in runs.items()}
    for n in runs:
        med[n]["load+first"] = statistics.median(x["load"] + x["first"] for x in runs[n])
    print(f"repeats {args.repeats}, prompt {args.prompt} tokens; medians (s), fresh processes")
    names = list(runs)
    print(f"{'':12s}" + "".join(f"{n:>10s}" for n in names) + "  host/torch")
    for k in (*keys, "load+first"):
        row = "".join(f"{med[n][k]:10.4f}" for n in names)
        print(f"{k:12s}{row}  {med['host'][k] / med['torch'][k]:9.3f}")
    if "base" in med:
        r = med["torch"]["load+first"] / med["base"]["load+first"]
        print(f"torch (this checkout) / base load+first: {r:.3f}")
    print("torch imported:", {n: any(x["torch"] for x in rs) for n, rs in runs.items()})
    print("last-row logits bit-equal to host:", equal)


if __name__ == "__main__":
    main()
