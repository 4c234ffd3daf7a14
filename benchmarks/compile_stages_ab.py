"""The compile stages of a recursive schema in two structgen checkouts, in one process.

Each stage of ``compile_spec``'s path for a schema compiled as grammar rules is timed on
its own (thread CPU, ``time.thread_time``), over the same inputs for both checkouts (the
baseline loaded as ``structgen_base``, as ``cold_ab.py`` does), passes interleaved and the
order alternated each pass; medians. Stages: ``lower_spec`` (schema -> ``SchemaRules``),
``rules_grammar`` (-> ``GrammarDef``), ``lower_grammar`` (-> ``CfgGrammar``), ``_lexers``
(the terminals' lexers), ``EarleyCharts``, the whole compile (the compile caches emptied
first, the per-process memos kept; no masks), the cold-empty compile (cold_ab's: ``reset``
first, untimed, so the memos are dropped and ``prepare``'s warm-up run again), and the cold
masks: the schema's compact instance forced token by token through a fresh compile (compile
untimed; ``fill_bitmask`` and ``advance``). A schema that compiles to a regex (``--schema
nested``) has ``lower_spec`` and the last three only.

    PYTHONPATH=. python benchmarks/compile_stages_ab.py --baseline /work/main [--passes 201]
        [--schema recursive]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
from benchmarks.cold_ab import _load_checkout, _StructgenOf  # noqa: E402
from benchmarks.support import alternating  # noqa: E402


def _stages(eng: _StructgenOf, schema, ids: list[int]) -> dict:
    """Stage name -> a no-argument callable running that stage of ``eng``'s package on
    ``schema`` (its inputs built once here); one that returns a float returns its own
    thread-CPU seconds (the cold masks: their compile is not timed)."""
    pkg = eng.fsm.__name__.split(".")[0]
    spec_mod = importlib.import_module(f"{pkg}.fsm.spec")
    rules_mod = importlib.import_module(f"{pkg}.fsm.grammar.schema_rules")
    lower_mod = importlib.import_module(f"{pkg}.fsm.grammar.lower")
    compile_mod = importlib.import_module(f"{pkg}.fsm.grammar.compile")
    earley_mod = importlib.import_module(f"{pkg}.fsm.grammar.earley")
    deadline_mod = importlib.import_module(f"{pkg}.fsm.deadline")
    spec = spec_mod.JsonSchema(schema, strict=False, allow_extra_properties=True)
    rules = spec_mod.lower_spec(spec)
    buf = torch.zeros((1, eng.words), dtype=torch.int32)

    def masks_stage() -> float:
        m = eng.compile(schema).matcher()
        t0 = time.thread_time()
        for t in ids:
            m.fill_bitmask(buf, 0)
            if not m.advance(t):
                raise SystemExit("the instance was refused")
        return time.thread_time() - t0

    def cold_compile_stage() -> float:
        eng.reset()  # untimed: memos dropped, prepare's warm-up (cold_ab's cold-empty)
        t0 = time.thread_time()
        eng.compile(schema)
        return time.thread_time() - t0

    common = {
        "whole compile": lambda: eng.compile(schema),
        "cold-empty compile": cold_compile_stage,
        "cold masks + advances": masks_stage,
    }
    if not isinstance(rules, rules_mod.SchemaRules):  # a regex: no grammar stages
        return {"lower_spec": lambda: spec_mod.lower_spec(spec), **common}
    args = (rules.pattern, list(rules.definitions), set(rules.rules), None)
    gdef = rules_mod.rules_grammar(*args, rules.any_rule, rules.reusable)
    cfg = lower_mod.lower_grammar(gdef, deadline_mod.Deadline(10))
    with eng._own_name():
        lexers = compile_mod._lexers(cfg, 200_000, deadline_mod.Deadline(10))
    nullable = {t for t, d in enumerate(lexers) if d.is_accepting(d.initial)}

    def lexers_stage():
        compile_mod._lexers(cfg, 200_000, deadline_mod.Deadline(10))

    def charts_stage():
        with eng._own_name():
            earley_mod.EarleyCharts(cfg, nullable)

    return {
        "lower_spec": lambda: spec_mod.lower_spec(
            spec_mod.JsonSchema(schema, strict=False, allow_extra_properties=True)
        ),
        "rules_grammar": lambda: rules_mod.rules_grammar(*args, rules.any_rule, rules.reusable),
        "lower_grammar": lambda: lower_mod.lower_grammar(gdef, deadline_mod.Deadline(10)),
        "_lexers": lexers_stage,
        "EarleyCharts": charts_stage,
        **common,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--passes", type=int, default=201)
    ap.add_argument("--schema", default="recursive", help="a name in data/cold_schemas.json")
    args = ap.parse_args()
    _load_checkout("structgen_base", args.baseline)
    tok = bg.smollm2_tokenizer()
    engines = [_StructgenOf("old", "structgen_base", tok), _StructgenOf("new", "structgen", tok)]
    case = json.loads(bg.COLD_SCHEMAS.read_text())[args.schema]
    schema = case["schema"]
    text = json.dumps(case["instance"], separators=(",", ":"))
    ids = tok.encode(text, add_special_tokens=False)
    stages = {e.name: _stages(e, schema, ids) for e in engines}
    times = {e.name: {s: [] for s in stages[e.name]} for e in engines}
    for _ in range(5):  # warm: per-process stores filled, as after a first request
        for e in engines:
            for run in stages[e.name].values():
                run()
    gc.collect()
    gc.freeze()
    for _, e in alternating(engines, args.passes):
        for name, run in stages[e.name].items():
            t0 = time.thread_time()
            own = run()
            took = time.thread_time() - t0
            times[e.name][name].append(own if isinstance(own, float) else took)
    print("| stage | old us | new us | old / new |")
    print("|---|---|---|---|")
    for name in stages["new"]:
        old = statistics.median(times["old"][name]) * 1e6
        new = statistics.median(times["new"][name]) * 1e6
        print(f"| {name} | {old:.1f} | {new:.1f} | {old / new:.3f}x |")


if __name__ == "__main__":
    main()
