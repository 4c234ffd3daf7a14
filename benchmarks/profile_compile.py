"""Compile time only: structgen vs llguidance vs XGrammar, schemas and grammars (CPU time).

Modes:
  * default: each schema of ``bench_grammar.load_sample(per_subset, 1)``, structgen only:
    the process time of ``compile_json_schema(schema, vocab, strict=False,
    allow_extra_properties=True)`` after ``clear_cache()`` and of the first mask, best of
    ``--repeat``; p50 / p90 / max and the slowest schemas.
  * ``--maskbench``: the MaskBench ``--sample`` set (the first 60 archive members of each
    subset in sorted name order, ``bench_maskbench.iter_corpus``), every engine of
    ``--engines`` compiled by ``bench_maskbench``'s engine classes (its scoring: structgen
    ``compile_json_schema`` defaults but ``allow_extra_properties=True`` after
    ``clear_cache()``, i.e. cold; llguidance's time includes building its matcher, where
    its compile happens; XGrammar one thread, no cache). The engines are interleaved per
    schema (A B C, A B C, ...: this host's speed drifts) and each keeps its best of
    ``--repeat`` process times. p50 / p99 over the schemas each engine compiled and over
    the schemas every engine compiled (the ratio of record), the slowest ratios to
    llguidance.
  * ``--grammars``: ``benchmarks/data/grammars/*`` and llama.cpp's grammars
    (``tests/fixtures/gbnf/*.gbnf``, rows ``fixtures/NAME``) compiled by
    ``grammar_cfg_mode``'s engines (structgen's grammar cache cleared before each compile;
    llguidance reads GBNF through ``llguidance.gbnf_to_lark``, the translation timed with
    it), interleaved, best of ``--repeat``; the ratio to llguidance, XGrammar's time on
    the GBNF files beside it.

``--profile`` adds a cProfile of one structgen pass sorted by cumulative time (with
``--names``: only those schemas / grammar files). ``--jsonl PATH`` writes the per-item
best times (ms) for comparing two trees run one after the other.

Run:  python benchmarks/profile_compile.py [--per-subset 12] [--repeat 3] [--profile]
      python benchmarks/profile_compile.py --maskbench [--engines structgen,llguidance,xgrammar]
      python benchmarks/profile_compile.py --grammars [--repeat 9]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grammar import load_sample, smollm2_tokenizer  # noqa: E402


def measure(sample, vocab, repeat: int):
    """Min over ``repeat`` passes of (compile s, first-mask s) per compiled schema."""
    from structgen.fsm import clear_cache, compile_json_schema

    best: dict[str, list[float]] = {}
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    for _ in range(repeat):
        for sub, name, schema, _ in sample:
            clear_cache()
            try:
                t0 = time.process_time()
                g = compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)
                t1 = time.process_time()
                g.matcher().fill_bitmask(buf, 0)
                t2 = time.process_time()
            except Exception:  # noqa: BLE001 - the bench skips what does not compile
                continue
            key = f"{sub}/{name}"
            old = best.get(key)
            best[key] = (
                [t1 - t0, t2 - t1] if old is None else [min(old[0], t1 - t0), min(old[1], t2 - t1)]
            )
    return best


def interleaved(items, engines: dict, repeat: int) -> dict[str, dict[str, float]]:
    """``{engine: {item name: best process seconds}}``: each item compiled by every engine
    in turn, ``repeat`` rounds, the order rotated each round (the first compile of a
    round runs measurably slower on this host); an engine that fails on an item has no
    entry for it.

    ``items`` are ``(name, payload)``; ``engines`` map a name to ``compile(payload)``.
    """
    best: dict[str, dict[str, float]] = {e: {} for e in engines}
    for name, payload in items:
        failed: set[str] = set()
        order = list(engines.items())
        for r in range(repeat):
            for eng, compile_one in order[r % len(order) :] + order[: r % len(order)]:
                if eng in failed:
                    continue
                try:
                    t0 = time.process_time()
                    compile_one(payload)
                    dt = time.process_time() - t0
                except Exception:  # noqa: BLE001 - refused or crashed: not timed
                    failed.add(eng)
                    best[eng].pop(name, None)
                    continue
                old = best[eng].get(name)
                best[eng][name] = dt if old is None else min(old, dt)
    return best


def _pct(xs, q: float) -> float:
    return float(np.percentile(xs, q)) if len(xs) else float("nan")


def report_schemas(best: dict[str, dict[str, float]], top: int) -> list[str]:
    """Markdown table lines of compile p50 / p99 per engine (all compiled and common)."""
    engines = list(best)
    common = set.intersection(*(set(v) for v in best.values())) if best else set()
    base = "llguidance" if "llguidance" in best else engines[-1]
    lines = [
        "| engine | compiled | compile p50 ms | p99 ms | common schemas | common p50 ms "
        "| common p99 ms | common p50 vs " + base + " |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ref = [best[base][k] for k in sorted(common)]
    for eng in engines:
        allv = np.array(list(best[eng].values())) * 1e3
        com = np.array([best[eng][k] for k in sorted(common)]) * 1e3
        ratio = _pct(com, 50) / _pct(np.array(ref) * 1e3, 50) if ref else float("nan")
        lines.append(
            f"| {eng} | {len(allv)} | {_pct(allv, 50):.2f} | {_pct(allv, 99):.1f} | "
            f"{len(com)} | {_pct(com, 50):.2f} | {_pct(com, 99):.1f} | {ratio:.2f}x |"
        )
    if "structgen" in best and base != "structgen" and common:
        worst = sorted(common, key=lambda k: -best["structgen"][k] / max(best[base][k], 1e-6))
        lines += ["", f"Worst structgen / {base} ratios (ms):", ""]
        for k in worst[:top]:
            s, b = best["structgen"][k] * 1e3, best[base][k] * 1e3
            lines.append(f"- {k}: {s:.2f} vs {b:.2f} ({s / max(b, 1e-3):.1f}x)")
    return lines


def run_maskbench(args) -> tuple[dict, list[str]]:
    """Interleaved compile times on the MaskBench sample (module docstring)."""
    from bench_maskbench import ENGINES, SAMPLE_PER_SUBSET, iter_corpus, subsets_on_disk
    from bench_maskbench import smollm2_tokenizer as mb_tokenizer

    tok = mb_tokenizer()
    engines = {}
    for name in [e for e in args.engines.split(",") if e]:
        try:
            engines[name] = ENGINES[name](tok).compile
        except Exception as exc:  # noqa: BLE001 - a peer not installed
            print(f"{name}: not loaded ({type(exc).__name__}: {exc})")
    names = _names(args)
    items = [
        (f"{sub}/{name}", json.loads(raw)["schema"])
        for sub, name, raw in iter_corpus(
            subsets_on_disk(), args.maskbench_per_subset or SAMPLE_PER_SUBSET
        )
        if names is None or name in names or f"{sub}/{name}" in names
    ]
    best = interleaved(items, engines, args.repeat)
    if args.profile and "structgen" in engines:
        _profile(lambda: [_quiet(engines["structgen"], p) for _, p in items])
    return best, report_schemas(best, args.top)


def run_grammars(args) -> tuple[dict, list[str]]:
    """Interleaved compile times of the grammar files (module docstring)."""
    from grammar_cfg_mode import DATA, GBNF_FIXTURES, _LLGuidanceGbnf, _Structgen, _XGrammar

    tok = smollm2_tokenizer()
    engines = []
    for cls in (_Structgen, _LLGuidanceGbnf, _XGrammar):
        try:
            engines.append(cls(tok))
        except Exception as exc:  # noqa: BLE001 - a peer not installed
            print(f"{cls.name}: not loaded ({type(exc).__name__}: {exc})")
    names = _names(args)
    paths = sorted(DATA.iterdir()) + sorted(GBNF_FIXTURES.glob("*.gbnf"))
    paths = [p for p in paths if names is None or _key(p) in names or p.name in names]
    best: dict[str, dict[str, float]] = {e.name: {} for e in engines}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        sub = interleaved(
            [(_key(path), text)],
            {e.name: (lambda t, e=e, p=path: e.compile(t, p)) for e in engines if e.supports(path)},
            args.repeat,
        )
        for eng, times in sub.items():
            best[eng].update(times)
    lines = [
        "| grammar | structgen ms | llguidance ms | structgen / llguidance | xgrammar ms |",
        "|---|---|---|---|---|",
    ]
    fmt = lambda v: "n/a" if v is None else f"{v * 1e3:.2f}"  # noqa: E731
    for path in paths:
        s = best.get("structgen", {}).get(_key(path))
        p = best.get("llguidance", {}).get(_key(path))
        x = best.get("xgrammar", {}).get(_key(path))
        ratio = f"{s / p:.2f}x" if s is not None and p else "n/a"
        lines.append(f"| {_key(path)} | {fmt(s)} | {fmt(p)} | {ratio} | {fmt(x)} |")
    if args.profile:
        sg = next(e for e in engines if e.name == "structgen")
        texts = [(p, p.read_text(encoding="utf-8")) for p in paths]
        _profile(lambda: [sg.compile(t, p) for _ in range(10) for p, t in texts])
    return best, lines


def _key(path: Path) -> str:
    """A grammar's row name: ``fixtures/c.gbnf`` for llama.cpp's, the file name otherwise."""
    return f"fixtures/{path.name}" if path.parent.name == "gbnf" else path.name


def _quiet(fn, payload) -> None:
    try:
        fn(payload)
    except Exception:  # noqa: BLE001 - the profile skips what does not compile
        pass


def _profile(fn) -> None:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


def _names(args) -> set[str] | None:
    if not args.names:
        return None
    return {n for n in args.names.split(",") if n}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-subset", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--maskbench", action="store_true", help="the MaskBench --sample set")
    ap.add_argument(
        "--maskbench-per-subset",
        type=int,
        default=0,
        help="first N per subset (0: the sample's 60)",
    )
    ap.add_argument(
        "--grammars",
        action="store_true",
        help="benchmarks/data/grammars/* and tests/fixtures/gbnf/*",
    )
    ap.add_argument("--engines", default="structgen,llguidance,xgrammar")
    ap.add_argument("--names", default="", help="comma-separated items (sub/name or file name)")
    ap.add_argument("--jsonl", type=Path, default=None, help="per-item best ms written here")
    args = ap.parse_args(argv)
    if args.maskbench or args.grammars:
        best, lines = run_grammars(args) if args.grammars else run_maskbench(args)
        print("\n".join(lines))
        if args.jsonl:
            with args.jsonl.open("w") as f:
                for eng, times in best.items():
                    for k, v in times.items():
                        f.write(json.dumps({"engine": eng, "item": k, "ms": v * 1e3}) + "\n")
        return
    from structgen.fsm import Vocabulary

    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer())
    sample = load_sample(args.per_subset, 1)
    best = measure(sample, vocab, args.repeat)
    comp = np.array([v[0] for v in best.values()]) * 1e3
    first = np.array([v[1] for v in best.values()]) * 1e3
    print(
        f"{len(best)}/{len(sample)} compiled; compile ms p50 {np.percentile(comp, 50):.2f} "
        f"p90 {np.percentile(comp, 90):.2f} max {comp.max():.1f}; first mask ms p50 "
        f"{np.percentile(first, 50):.2f} p90 {np.percentile(first, 90):.2f} max {first.max():.1f}"
    )
    for key, (c, f) in sorted(best.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"  {c * 1e3:8.1f} ms compile {f * 1e3:8.1f} ms first mask  {key}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        measure(sample, vocab, 1)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
