"""A JSON Schema compile's front end (schema -> regex text or grammar rules) of two checkouts.

Times, per schema of data/cold_schemas.json, what the compile does before any automaton:
the cache key (``JsonSchema.cache_key``), the lowering (``spec.lower_spec``: depth and
metaschema checks, ``$ref`` index, conversion) and, for a schema whose ``$ref`` recurses,
the rules read back (``schema_rules.rules_grammar``). No vocabulary. The baseline is loaded
twice (an A/A) and this checkout once, each as its own package (``cold_ab._load_checkout``);
every round runs the arms in a rotated order, each after its package's
``clear_cache(memos=True)`` and the front end of ``warm_up_closed_rules``' schema (untimed:
the front end's part of cold-empty's state, ``Vocabulary.prepare``'s warm-up), timed with
``time.thread_time``.
Reports the median and least microseconds per arm, old / new and old / old2 (the A/A).

    PYTHONPATH=. python benchmarks/front_end_ab.py --baseline /work/wt-base
        [--rounds 2001] [--only recursive,nested]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402


def _front_end(pkg: str, schema, allow_extra: bool):
    """``pkg``'s front end for ``schema`` as one call."""
    spec_mod = importlib.import_module(f"{pkg}.fsm.spec")
    rules_mod = importlib.import_module(f"{pkg}.fsm.grammar.schema_rules")
    ids = importlib.import_module(f"{pkg}.fsm.json_schema.ids")

    def run():
        spec = spec_mod.JsonSchema(schema, strict=False, allow_extra_properties=allow_extra)
        with ids.schema_depth_checked(spec.schema):
            spec.cache_key()
            low = spec_mod.lower_spec(spec, max_convert_seconds=10.0)
            if isinstance(low, rules_mod.SchemaRules):
                rules_mod.rules_grammar(
                    low.pattern,
                    list(low.definitions),
                    set(low.rules),
                    None,
                    low.any_rule,
                    low.reusable,
                )

    return run


def _arm(pkg: str, schema):
    """``pkg``'s fsm package, the front-end half of its closed rules' warm-up (the
    ``_closed_expr`` memo ``warm_up_closed_rules`` fills; no grammar compiled), and its
    front end for ``schema`` (bench_grammar's options)."""
    fsm = importlib.import_module(f"{pkg}.fsm")
    rules_mod = importlib.import_module(f"{pkg}.fsm.grammar.schema_rules")
    warm_up = _front_end(pkg, rules_mod._WARM_UP_SCHEMA, True)
    return fsm, warm_up, _front_end(pkg, schema, True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--new", default=str(ROOT), help="the checkout to compare (default: this)")
    ap.add_argument("--rounds", type=int, default=2001)
    ap.add_argument("--only", default="recursive,nested")
    args = ap.parse_args()
    ca._load_checkout("structgen_base", Path(args.baseline))
    ca._load_checkout("structgen_base2", Path(args.baseline))
    ca._load_checkout("structgen_new", Path(args.new))
    pkgs = {"old": "structgen_base", "old2": "structgen_base2", "new": "structgen_new"}
    cases = json.loads(bg.COLD_SCHEMAS.read_text())
    names = [n for n in args.only.split(",") if n]
    arms = {(e, n): _arm(p, cases[n]["schema"]) for e, p in pkgs.items() for n in names}
    for _fsm, _warm_up, run in arms.values():  # imports and first-call work, untimed
        run()
    gc.collect()
    gc.freeze()
    times = {key: [] for key in arms}
    order = list(pkgs)
    for _ in range(args.rounds):
        order = order[1:] + order[:1]
        for name in names:
            for e in order:
                fsm, warm_up, run = arms[e, name]
                fsm.clear_cache(memos=True)
                warm_up()  # the front end's part of prepare's warm-up, as cold-empty has it
                t0 = time.thread_time()
                run()
                times[e, name].append(time.thread_time() - t0)
    print(
        "| schema | old us med / min | old2 us med / min | new us med / min "
        "| old / new (med) | old / old2 (med, A/A) |"
    )
    print("|---|---|---|---|---|---|")
    for name in names:
        med = {e: statistics.median(times[e, name]) * 1e6 for e in pkgs}
        low = {e: min(times[e, name]) * 1e6 for e in pkgs}
        print(
            f"| {name} | {med['old']:.1f} / {low['old']:.1f} | {med['old2']:.1f} / "
            f"{low['old2']:.1f} | {med['new']:.1f} / {low['new']:.1f} | "
            f"{med['old'] / med['new']:.2f}x | {med['old'] / med['old2']:.2f}x |"
        )


if __name__ == "__main__":
    main()
