"""The MaskBench sample's slowest cold masks, each with where in its instance it fell.

Every member of ``bench_grammar --sample``'s set (``--sample N``: the first N per subset) is
compiled cold-empty (cold_ab's engine: every memo and table an earlier schema built dropped,
untimed) and its first valid instance forced token by token; each ``fill_bitmask`` is timed
with ``time.thread_time``. With ``--baseline DIR`` the checkout there (loaded as
``structgen_base``) runs each schema too, the two interleaved (order alternated per schema),
so the pooled figures compare in one process; ``--passes N`` keeps each engine's
least-CPU pass per schema (load only adds time).

Prints the pooled p99 per engine, then the ``--top`` slowest masks of this checkout: schema,
token position, the instance's last bytes before the mask, the DFA rows and states the
mask built, and the state's kind (``AND/NOT``: its term holds an intersection or a
complement; ``regex``; ``cfg``: a grammar automaton), from one more pass of this checkout
that records them (that work between the masks stays out of the timed passes); before them,
that pass's masks over 1 ms counted per kind and place (``first``: the document's first
mask; ``key``: right after ``{"`` or ``,"``, an object's key; ``other``).

    PYTHONPATH=. python benchmarks/sample_p99.py [--tokenizer smollm2|bpe150k] [--sample 60]
        [--sample-only a,b] [--baseline DIR] [--passes 1] [--top 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402


def _dfa_facts(m) -> tuple[int, int, str]:
    """(rows built, states, kind) of a matcher's automaton: kind ``AND/NOT`` where the
    current state's term holds an intersection / complement, ``regex`` else, ``cfg`` for a
    grammar automaton; -1s where it has no row count."""
    dfa = getattr(m, "_dfa", None)
    rows = getattr(dfa, "num_rows_built", None)
    if rows is None:
        return -1, -1, "?"
    arena = getattr(dfa, "arena", None)
    if arena is None:
        return int(rows), int(dfa.num_states), "cfg"
    return (
        int(rows),
        int(dfa.num_states),
        "AND/NOT" if arena.has_boolean(dfa.term(m.state)) else "regex",
    )


def _run(eng, spec, ids, tok, detail: bool):
    """Per token: (seconds, rows built, states added, text before); ``None`` if refused."""
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    eng.reset()
    try:
        g = eng.compile(spec)
    except Exception:
        return None
    m = eng.matcher(g)
    out = []
    done: list[int] = []
    for t in ids:
        r0, s0, boolean = _dfa_facts(m) if detail else (0, 0, "")
        a = time.thread_time()
        eng.mask(m, buf)
        b = time.thread_time()
        if detail:
            r1, s1, _ = _dfa_facts(m)
            before = tok.decode(done[-12:]) if done else ""
            out.append((b - a, r1 - r0, s1 - s0, before[-24:], boolean))
        else:
            out.append((b - a,))
        if not eng.accept(m, t):
            return None
        done.append(t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", choices=["smollm2", "bpe150k"], default="smollm2")
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--sample-only", default="")
    ap.add_argument("--baseline", type=Path, default=None)
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument(
        "--passes", type=int, default=1, help="per engine and schema: the least-CPU pass kept"
    )
    ap.add_argument("--json", type=Path, default=None, help="write the masks' records here")
    args = ap.parse_args()
    tok = bg.bpe_150k_tokenizer() if args.tokenizer == "bpe150k" else bg.smollm2_tokenizer()
    engines = [ca._StructgenOf("new", "structgen", tok)]
    if args.baseline:
        ca._load_checkout("structgen_base", args.baseline)
        engines.insert(0, ca._StructgenOf("old", "structgen_base", tok))
    keep = [k for k in args.sample_only.split(",") if k]
    work = [w for w in ca._workloads(tok, {"none"}, args.sample, keep)]
    gc.collect()
    gc.freeze()
    res: dict[str, dict[str, list]] = {e.name: {} for e in engines}
    detailed: dict[str, list] = {}
    t_start = time.time()
    for i, (label, _kind, spec, ids) in enumerate(work):
        for p in range(args.passes):
            order = engines if (i + p) % 2 == 0 else engines[::-1]
            for eng in order:
                r = _run(eng, spec, ids, tok, detail=False)
                old = res[eng.name].get(label)
                if r is not None and (old is None or sum(x[0] for x in r) < sum(x[0] for x in old)):
                    res[eng.name][label] = r
        if args.top and label in res["new"]:  # the listing's own pass (its work untimed
            # between the masks would disturb the timed passes above)
            detailed[label] = _run(engines[-1], spec, ids, tok, detail=True)
        if i % 100 == 0:
            print(f"# {i}/{len(work)} {time.time() - t_start:.0f}s", file=sys.stderr, flush=True)
    common = [w[0] for w in work if all(w[0] in res[e.name] for e in engines)]
    print(f"{len(common)} of {len(work)} schemas accepted by every engine ({args.tokenizer})")
    print("| engine | median of per-schema mean us | pooled p99 us | tokens > 1 ms |")
    print("|---|---|---|---|")
    for e in engines:
        pooled = np.array([r[0] for lb in common for r in res[e.name][lb]]) * 1e6
        means = [np.mean([r[0] for r in res[e.name][lb]]) * 1e6 for lb in common]
        print(
            f"| {e.name} | {np.median(means):.1f} | {np.percentile(pooled, 99):.0f} | "
            f"{int((pooled > 1000).sum())} of {len(pooled)} |"
        )
    for e in engines:  # where each engine's masks over 1 ms are
        over = {lb: sum(r[0] > 1e-3 for r in res[e.name][lb]) for lb in common}
        top = sorted(((n, lb) for lb, n in over.items() if n), reverse=True)[:12]
        print(
            f"{e.name}'s masks > 1 ms by schema: "
            + ", ".join(f"{lb.split('---')[-1]} {n}" for n, lb in top)
        )
    if keep:  # the chosen schemas one by one
        print(
            "\n| schema (tokens) | "
            + " | ".join(f"{e.name} mean / p99 us, > 1 ms" for e in engines)
            + " |"
        )
        print("|---" * (len(engines) + 1) + "|")
        for lb in common:
            cells = []
            for e in engines:
                xs = np.array([r[0] for r in res[e.name][lb]]) * 1e6
                cells.append(
                    f"{xs.mean():.0f} / {np.percentile(xs, 99):.0f}, {int((xs > 1000).sum())}"
                )
            print(f"| {lb.split('---')[-1]} ({len(xs)}) | " + " | ".join(cells) + " |")
    recs = [
        (r[0] * 1e6, lb, pos, r[1], r[2], r[3], r[4])
        for lb in common
        for pos, r in enumerate(detailed.get(lb) or ())
    ]
    recs.sort(reverse=True)
    if recs:  # the listing pass's masks over 1 ms by the state's kind, and where they fall
        print("\n| kind | where | masks > 1 ms | their CPU ms |")
        print("|---|---|---|---|")
        groups: dict[tuple[str, str], list[float]] = {}
        for us, _lb, pos, _rows, _states, before, kind in recs:
            if us > 1000:
                where = "first" if pos == 0 else "key" if before.endswith(('{"', ',"')) else "other"
                groups.setdefault((kind, where), []).append(us)
        for (kind, where), xs in sorted(groups.items(), key=lambda g: -sum(g[1])):
            print(f"| {kind} | {where} | {len(xs)} | {sum(xs) / 1e3:.1f} |")
    print("\n| us | schema | token | rows built | states added | kind | text before |")
    print("|---|---|---|---|---|---|---|")
    for us, lb, pos, rows, states, before, boolean in recs[: args.top]:
        print(f"| {us:.0f} | {lb} | {pos} | {rows} | {states} | {boolean} | {before!r} |")
    if args.json:  # every mask of this checkout; per schema and engine, the masks' CPU (s)
        sums = {lb: {e.name: sum(r[0] for r in res[e.name][lb]) for e in engines} for lb in common}
        args.json.write_text(json.dumps({"masks": recs, "schema_seconds": sums}))


if __name__ == "__main__":
    main()
