"""The batched extraction's attention calls, recorded once and replayed through two builds of
``_cpuops.paged_attention`` in one process (#23).

``--capture FILE``: runs ``Engine().extract(contact_card, --docs cards)`` (after one untimed card)
with ``CpuDecoder.forward`` wrapped to record each forward pass's ``seq_ids``, ``positions`` and
``page_table`` (and which KV pool it ran on), and pickles the list to FILE. The default engine
splits a pass into ``decode_layers`` calls of at most 64 rows; so does the replay.

``--replay FILE --base SO``: each recorded 64-row call's attention (SmolLM2-135M's shape: 9 query
heads on 3 KV heads, head_dim 64, pages of 16; random queries and an fp16 K/V cache per pool and
per ``--layers`` layer, so the K/V stream from memory as in the job) through ``--base`` (another
build's ``_cpuops`` shared object) and this tree's, arms alternated (order reversed every other
round), one thread's CPU per arm and round over all calls and layers; medians, base / this, and
each round's ratio. Outputs are compared bit for bit. ``--base`` may be this tree's own ``.so``
(an A/A: the noise).

    PYTHONPATH=. OMP_NUM_THREADS=2 python benchmarks/attention_replay_ab.py --capture calls.pkl
    PYTHONPATH=. OMP_NUM_THREADS=1 nice -n 10 python benchmarks/attention_replay_ab.py \\
        --replay calls.pkl \\
        --base /work/wt-base/structgen/runtime/cpu/_cpuops.cpython-311-x86_64-linux-gnu.so \\
        [--layers 2] [--rounds 9]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
H, KVH, D, PS, CALL_ROWS = 9, 3, 64, 16, 64
KV_FP16 = 2  # _cpuops' KV dtype code, shifted by 8 in the dtype word


def capture(path: str, docs: int, seed: int) -> None:
    """Record the batched job's forward passes (see the module docstring) into ``path``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_extract_batch import documents

    from structgen import Engine
    from structgen.runtime.cpu import decoder

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(docs, seed)
    engine = Engine()
    engine.extract(schema, texts[0])  # untimed: compile, the schema head cached
    passes, forward = [], decoder.CpuDecoder.forward

    def recorded(self, batch, kv):
        passes.append(tuple(np.array(a) for a in (batch.seq_ids, batch.positions, batch.page_table))
                      + (id(kv),))  # fmt: skip
        return forward(self, batch, kv)

    decoder.CpuDecoder.forward = recorded
    try:
        engine.extract(schema, texts)
    finally:
        decoder.CpuDecoder.forward = forward
    with open(path, "wb") as f:
        pickle.dump(passes, f)
    print(f"{len(passes)} passes, {sum(len(p[0]) for p in passes)} rows -> {path}")


def _load_ext(path: str):
    """The ``_cpuops`` extension built at ``path``, loaded beside this tree's."""
    name = "structgen.runtime.cpu._cpuops"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    return importlib.util.module_from_spec(spec)


def _calls(passes, layers: int):
    """(queries, the pool's per-layer (K, V) caches, page table, seq ids, positions) per call."""
    rng = np.random.default_rng(0)
    num_pages = max(int(p[2].max()) for p in passes) + 1
    pools, calls = {}, []
    for seq, pos, table, pool in passes:
        if pool not in pools:
            pools[pool] = [
                tuple(
                    rng.standard_normal((num_pages * PS, KVH, D)).astype(np.float16) for _ in "kv"
                )
                for _ in range(layers)
            ]
        table = np.ascontiguousarray(table, np.int64)
        for c in range(0, len(seq), CALL_ROWS):
            s = np.ascontiguousarray(seq[c : c + CALL_ROWS], np.int64)
            p = np.ascontiguousarray(pos[c : c + CALL_ROWS], np.int64)
            q = rng.standard_normal((len(s), H * D)).astype(np.float32)
            calls.append((q, pools[pool], table, s, p))
    return calls


def _run(ext, calls, outs) -> float:
    """Thread CPU seconds of every call's attention, every layer, through ``ext``."""
    t0 = time.thread_time()
    for (q, pool, table, s, p), o in zip(calls, outs):
        for k, v in pool:
            ext.paged_attention(
                q.ctypes.data, q.shape[1], k.ctypes.data, v.ctypes.data, table.ctypes.data,
                table.shape[1], s.ctypes.data, p.ctypes.data, PS, len(s), H, KVH, D, D**-0.5, 0,
                o.ctypes.data, KV_FP16 << 8, 1,
            )  # fmt: skip
    return time.thread_time() - t0


def replay(path: str, base_path: str, layers: int, rounds: int) -> None:
    """The A/B of the module docstring over the calls recorded in ``path``."""
    from structgen.runtime.cpu import _cpuops as this

    with open(path, "rb") as f:
        calls = _calls(pickle.load(f), layers)
    arms = {"base": _load_ext(base_path), "this": this}
    outs = {a: [np.empty((len(c[3]), H * D), np.float32) for c in calls] for a in arms}
    times: dict[str, list[float]] = {a: [] for a in arms}
    for r in range(rounds + 1):
        for arm in list(arms) if r % 2 == 0 else list(arms)[::-1]:
            t = _run(arms[arm], calls, outs[arm])
            if r:  # round 0 warms up
                times[arm].append(t)
    if not all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
               for a, b in zip(outs["base"], outs["this"])):  # fmt: skip
        raise SystemExit("outputs differ between the builds")
    mb, mt = statistics.median(times["base"]), statistics.median(times["this"])
    ratios = ", ".join(f"{b / t:.3f}" for b, t in zip(times["base"], times["this"]))
    print(f"{len(calls)} calls x {layers} layers: base {mb:.3f} s, this {mt:.3f} s, "
          f"base / this {mb / mt:.3f}x (rounds: {ratios}); outputs equal")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", help="record the batched job's passes into this file")
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replay", help="a file written by --capture")
    ap.add_argument("--base", help="the other build's _cpuops .so (with --replay)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    if args.capture:
        capture(args.capture, args.docs, args.seed)
    elif args.replay and args.base:
        replay(args.replay, args.base, args.layers, args.rounds)
    else:
        ap.error("give --capture FILE, or --replay FILE --base SO")


if __name__ == "__main__":
    main()
