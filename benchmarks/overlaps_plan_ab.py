"""The overlaps pass's planning, base checkout vs this one, on recorded inputs (#23 k14).

``choose_overlaps`` plans each document on the host (``restated_numbers``,
``overlapping_pairs``, ``_candidate_jobs``) before any scoring request. This script records
the inputs of those three functions during real extractions and replays them through two
versions of ``structgen/extraction/overlaps.py``: the base checkout's file, loaded as its own
module beside this tree's package (every other module is this tree's, so only the overlaps
file differs), and this tree's. Every replayed call's result must be equal between the two
(``CandidateJob`` equality: document, key path, candidates in order, context, raw text,
span); the thread CPU of each version's replay is read per round, arms base / this / this
again (A/A), order rotated per round.

    # record (one Engine(); the contact cards of bench_extract_batch and the data sets)
    PYTHONPATH=. python benchmarks/overlaps_plan_ab.py record --out /tmp/plans.pkl \\
        [--cards 64] [--data-dir benchmarks/data/extraction ...]
    # replay
    PYTHONPATH=. python benchmarks/overlaps_plan_ab.py replay --inputs /tmp/plans.pkl \\
        --baseline /path/to/base-worktree [--rounds 5]

In the replay a call's ``prompt`` is the prompt's text as recorded (``prompt_text``'s result;
the module's ``prompt_text`` is replaced by the identity) and its ``checker`` is rebuilt from
the recorded schema, so no engine is loaded.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

FUNCS = ("restated_numbers", "overlapping_pairs", "_candidate_jobs")


def record(args: argparse.Namespace) -> None:
    """Run extractions with the three planning functions wrapped; pickle their inputs."""
    import structgen
    from structgen.extraction import overlaps

    calls: list[tuple[str, tuple]] = []
    orig = {f: getattr(overlaps, f) for f in FUNCS}

    def wrap(name):
        def wrapped(*a):
            if name == "_candidate_jobs":
                engine, checker, doc, prompt, *rest = a
                context = overlaps.prompt_text(engine, prompt)
                calls.append((name, (checker.schema, doc, context, *rest)))
            else:
                calls.append((name, a))
            return orig[name](*a)

        return wrapped

    for f in FUNCS:
        setattr(overlaps, f, wrap(f))
    engine = structgen.Engine()
    jobs: list[tuple[dict, list[str]]] = []
    if args.cards:
        from bench_extract_batch import documents

        card = ROOT / "benchmarks/data/extraction/schemas/contact_card.json"
        schema = json.loads(card.read_text())
        jobs.append((schema, documents(args.cards, 0)))
    for d in args.data_dir:
        groups: dict[str, list[str]] = collections.defaultdict(list)
        for line in (d / "documents.jsonl").read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                groups[rec["schema"]].append(rec["text"])
        for rel, texts in groups.items():
            jobs.append((json.loads((d / rel).read_text()), texts))
    for schema, texts in jobs:
        n = len(calls)
        engine.extract(schema, texts)
        print(f"{len(texts)} texts: {len(calls) - n} planning calls", flush=True)
    with open(args.out, "wb") as fh:
        pickle.dump(calls, fh)
    print(f"{len(calls)} calls -> {args.out}")


def _load_overlaps(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and typing look the module up
    spec.loader.exec_module(mod)
    mod.prompt_text = lambda engine, prompt: prompt
    return mod


def _replay(mod, calls: list, checkers: dict) -> tuple[list, float]:
    out = []
    t0 = time.thread_time()
    for name, a in calls:
        fn = getattr(mod, name)
        if name == "_candidate_jobs":
            schema, doc, context, *rest = a
            out.append(fn(None, checkers[id(schema)], doc, context, *rest))
        else:
            out.append(fn(*a))
    return out, time.thread_time() - t0


def replay(args: argparse.Namespace) -> None:
    """Replay the recorded calls through both versions; equal results, thread CPU."""
    import jsonschema

    with open(args.inputs, "rb") as fh:
        calls = pickle.load(fh)
    checkers = {}
    for name, a in calls:
        if name == "_candidate_jobs" and id(a[0]) not in checkers:
            cls = jsonschema.validators.validator_for(a[0])
            checkers[id(a[0])] = cls(a[0], format_checker=cls.FORMAT_CHECKER)
    mods = {
        "base": _load_overlaps(args.baseline / "structgen/extraction/overlaps.py", "overlaps_base"),
        "this": _load_overlaps(ROOT / "structgen/extraction/overlaps.py", "overlaps_this"),
    }
    counts = collections.Counter(name for name, _ in calls)
    print(f"{len(calls)} calls: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    ref, _ = _replay(mods["base"], calls, checkers)  # warm: imports, caches of other modules
    arms = [("base", "base"), ("this", "this"), ("this (A/A)", "this")]
    cpu: dict[str, list[float]] = {a: [] for a, _ in arms}
    for r in range(args.rounds):
        k = r % len(arms)
        for arm, tree in arms[k:] + arms[:k]:
            got, dt = _replay(mods[tree], calls, checkers)
            for (name, _), x, y in zip(calls, ref, got, strict=True):
                assert x == y, (arm, name, x, y)
            cpu[arm].append(dt)
        print(f"round {r + 1}: " + ", ".join(f"{a} {cpu[a][-1] * 1e3:.1f} ms" for a, _ in arms),
              flush=True)  # fmt: skip
    med = {a: statistics.median(v) for a, v in cpu.items()}
    print(
        f"medians (thread CPU, all calls): base {med['base'] * 1e3:.1f} ms, this "
        f"{med['this'] * 1e3:.1f} ms, A/A {med['this (A/A)'] * 1e3:.1f} ms; base / this "
        f"{med['base'] / med['this']:.2f}x, this / A/A {med['this'] / med['this (A/A)']:.3f}x"
    )
    print("results equal in every call")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--cards", type=int, default=64)
    rec.add_argument("--data-dir", type=Path, action="append", default=[])
    rep = sub.add_parser("replay")
    rep.add_argument("--inputs", type=Path, required=True)
    rep.add_argument("--baseline", type=Path, required=True)
    rep.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    record(args) if args.cmd == "record" else replay(args)


if __name__ == "__main__":
    main()
