"""benchmarks/gpu_bench.py --smoke runs end to end on CPU under the Triton interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_bench_smoke():
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_bench.py"), "--smoke"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("decode attn", "extend attn", "rms_norm", "rotary", "store_kv", "token bitmask",
                 "quant_matmul w4a16", "fused_moe", "decode step estimate"):  # fmt: skip
        assert name in proc.stdout
