"""benchmarks/gpu_bench.py --smoke runs end to end on CPU under the Triton interpreter.

The smoke run is not a timing: it launches every Triton kernel the GPU run times and
asserts each output equals its baseline (SDPA, eager torch, the torch reference), then
decodes greedily through structgen's ModelRunner (the Triton attention path, eager and
the padded CUDA-graph batch) and transformers, asserting identical tokens.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_bench_smoke(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    png = tmp_path / "gpu_bench.png"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_bench.py"), "--smoke", "--plot", str(png)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("decode attn", "extend attn", "rms_norm", "rotary", "store_kv", "token bitmask",
                 "quant_matmul w8a16", "quant_matmul w4a16", "fused_moe",
                 "end-to-end greedy decode"):  # fmt: skip
        assert name in proc.stdout, name
    e2e = [line for line in proc.stdout.splitlines() if "sequences identical to HF" in line]
    assert len(e2e) == 2 and "1/1" in e2e[0] and "2/2" in e2e[1], proc.stdout[-1500:]
    assert png.stat().st_size > 0


def test_gpu_bench_smoke_catches_a_wrong_kernel():
    # the smoke run must fail when a kernel disagrees with its baseline
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import torch
        from gpu_bench import agree

        x = torch.zeros(3)
        agree("same", x, x.clone(), torch.device("cpu"))
        try:
            agree("differs", x, x + 1, torch.device("cpu"))
        except AssertionError as exc:
            assert "differs" in str(exc)
        else:
            raise AssertionError("agree() accepted different outputs")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
