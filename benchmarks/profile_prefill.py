"""Where one prefill of the default engine spends its time, per kernel call and matmul shape.

Wraps ``structgen.runtime.cpu.quant.int4_mm`` / ``int8_mm`` and the fused ops of
``structgen.runtime.cpu.ops`` with wall-clock timers, prefills a prompt of N random tokens once
to warm up and once timed (``max_tokens=1``), and prints each call site's total, share of the
TTFT and call count; "other" is the rest (Python, embedding, sampling).

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/profile_prefill.py 256 [--threads 1]
"""

import collections
import random
import sys
import time

import torch

import structgen.runtime.cpu.ops as O
import structgen.runtime.cpu.quant as Q
from structgen import Engine, SamplingParams

T = collections.defaultdict(float)
C = collections.Counter()


def wrap(mod, name, key):
    """Replace mod.name by a wrapper adding its wall time to T[key(args)] (seconds)."""
    f = getattr(mod, name)

    def w(*a, **k):
        t = time.perf_counter()
        r = f(*a, **k)
        kk = key(a)
        T[kk] += time.perf_counter() - t
        C[kk] += 1
        return r

    setattr(mod, name, w)


for n in ("int4_mm", "int8_mm"):
    wrap(Q, n, lambda a, n=n: f"{n} M={a[0].shape[0]} N={a[1].shape[0]} K={a[0].shape[1]}")
for n in ("add_rms_norm", "rope_store_kv", "paged_attention", "silu_mul"):
    wrap(O, n, lambda a, n=n: n)
THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
torch.set_num_threads(THREADS)
e = Engine(dtype="float32")
NT = int(sys.argv[1])
rng = random.Random(0)
ids = e.tokenizer.encode(" ".join(str(rng.random()) for _ in range(NT)), add_special_tokens=False)[
    :NT
]
sp = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
e.generate([ids], sp)
T.clear()
C.clear()
e.flush_cache()
t = time.perf_counter()
e.generate([ids], sp)
tot = time.perf_counter() - t
print("tokens", len(ids), "ttft", round(tot, 3))
for k, v in sorted(T.items(), key=lambda kv: -kv[1]):
    print(f"{v:8.3f}s {100 * v / tot:5.1f}% x{C[k]:4d} {k}")
print(f"{tot - sum(T.values()):8.3f}s other")
