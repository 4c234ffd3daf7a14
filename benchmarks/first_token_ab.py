"""Same-run A/B of the default engine's start-up and first ``generate`` between two checkouts, and
a bit-for-bit check of their output: fresh processes, alternating order.

Each round runs, per checkout (``PYTHONPATH`` = its root, ``OMP_NUM_THREADS=2``, the shared warm
cache), one child: ``import structgen``; ``Engine()`` (the default: packaged SmolLM2 Q4_1,
``quantization="gguf"``, int8 activations), timed (``ready``: wall and process CPU); then a greedy
``generate`` of one chat prompt (``--tokens`` tokens, ``ignore_eos``) with the model's logits
recorded by a forward hook (``first token``: from the call to the first logits, wall and
process CPU: template, encode, prefill, and what the first forward builds; ``generate``: the
whole call). Prints a
markdown table of medians and the ratio B/A, and whether B's tokens and every step's logits
equal A's bit for bit (every round's, against A's first).

Run:  python benchmarks/first_token_ab.py A_ROOT B_ROOT [--rounds 5] [--tokens 16]
(each root a checkout with its C extensions built, e.g. a ``git worktree`` of main; caches
filled by an earlier ``Engine()``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, sys, time
w, c = time.perf_counter(), time.process_time()
import structgen
w1, c1 = time.perf_counter(), time.process_time()
engine = structgen.Engine()
w2, c2 = time.perf_counter(), time.process_time()
import numpy as np
stamps, cpus, rows = [], [], []
def hook(_m, _i, logits):
    stamps.append(time.perf_counter())
    cpus.append(time.process_time())
    rows.append(logits.detach().numpy()[-1].copy())
engine.loaded.model.register_forward_hook(hook)
messages = [{"role": "user", "content": "Name three primary colors, one per line."}]
params = structgen.SamplingParams(max_tokens=int(sys.argv[1]), temperature=0.0, ignore_eos=True)
t, c = time.perf_counter(), time.process_time()
out = engine.generate([messages], params)[0]
t_end = time.perf_counter()
np.save(sys.argv[2], np.stack(rows))
print(json.dumps({"import": w1 - w, "ready": w2 - w1, "ready_cpu": c2 - c1,
                  "first_token": stamps[0] - t, "first_token_cpu": cpus[0] - c,
                  "generate": t_end - t,
                  "tokens": list(out.token_ids)}))
"""

KEYS = ("import", "ready", "ready_cpu", "first_token", "first_token_cpu", "generate")


def _child(root: str, tokens: int, logits: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="2")
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(tokens), logits],
        cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if run.returncode != 0:
        raise SystemExit(f"child under {root} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a_root")
    ap.add_argument("b_root")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=16)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    same_tokens, same_logits = True, True
    with tempfile.TemporaryDirectory() as tmp:
        ref = None
        for r in range(args.rounds):
            order = [("A", args.a_root), ("B", args.b_root)]
            for side, root in order if r % 2 == 0 else order[::-1]:
                path = os.path.join(tmp, f"{side}{r}.npy")
                runs[side].append(_child(root, args.tokens, path))
                logits = np.load(path)
                if ref is None and side == "A":
                    ref = (runs["A"][-1]["tokens"], logits)
            for side in ("A", "B"):
                logits = np.load(os.path.join(tmp, f"{side}{r}.npy"))
                same_tokens &= runs[side][-1]["tokens"] == ref[0]
                same_logits &= logits.shape == ref[1].shape and np.array_equal(
                    logits.view(np.int32), ref[1].view(np.int32)
                )
    print(f"{args.rounds} rounds, alternating; {args.tokens} greedy tokens; medians (s)\n")
    print("| measure | A | B | B/A |\n|---|---|---|---|")
    for k in KEYS:
        a = statistics.median(x[k] for x in runs["A"])
        b = statistics.median(x[k] for x in runs["B"])
        print(f"| {k} | {a:.3f} | {b:.3f} | {b / a:.3f} |")
    a = statistics.median(x["ready"] + x["first_token"] for x in runs["A"])
    b = statistics.median(x["ready"] + x["first_token"] for x in runs["B"])
    print(f"| ready + first_token | {a:.3f} | {b:.3f} | {b / a:.3f} |")
    a = statistics.median(x["ready_cpu"] + x["first_token_cpu"] for x in runs["A"])
    b = statistics.median(x["ready_cpu"] + x["first_token_cpu"] for x in runs["B"])
    print(f"| ready + first_token, process CPU | {a:.3f} | {b:.3f} | {b / a:.3f} |")
    print(f"\ntokens equal (every run, both sides): {same_tokens}")
    print(f"logits bit-equal (every step, every run, both sides): {same_logits}")
    print("tokens:", ref[0])


if __name__ == "__main__":
    main()
