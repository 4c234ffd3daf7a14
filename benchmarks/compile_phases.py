"""Where a cold-empty compile of the five schemas of data/cold_schemas.json spends its time.

Per schema, the mean thread CPU (ms) of bench_grammar's cold-empty compile over ``--repeat``
compiles (after one unmeasured; each after ``Structgen.reset``, untimed), and of its phases,
each timed by wrapping the function that does it: the JSON Schema conversion to regex text
(``JsonSchema.lower``, and the converter's walk ``JsonSchemaConverter.convert_root`` inside
it or in rules mode), the regex texts lowered to terms (``regex_to_dfa``'s ``lower``;
``SharedDefinitions.lower`` for a grammar's lexers), the eager rows (``ByteDFA.explore``),
and for a schema whose ``$ref`` recurses the rules read back from regex text
(``regex_expr``), the grammar's lowering (``lower_grammar``), its lexers (``_lexers``) and
its Earley tables (``EarleyCharts``). Phases nest where their functions do (a grammar's
lexers lower regex texts), so they need not add up to the total. Run it from each checkout
for a before / after.

    PYTHONPATH=. python benchmarks/compile_phases.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import collections
import json
import time

import benchmarks.bench_grammar as bg
import structgen.fsm.grammar.compile as grammar_compile
import structgen.fsm.grammar.schema_rules as schema_rules
import structgen.fsm.json_schema.convert as convert
import structgen.fsm.regex.dfa as dfa
import structgen.fsm.regex.lazy_dfa as lazy_dfa
import structgen.fsm.regex.parse as parse
import structgen.fsm.spec as spec

PHASES = [  # (owner, attribute, label)
    (spec.JsonSchema, "lower", "conversion"),
    (convert.JsonSchemaConverter, "convert_root", "of which convert_root"),
    (dfa, "lower", "regex lowering"),
    (lazy_dfa.ByteDFA, "explore", "eager rows"),
    (schema_rules, "regex_expr", "rules read back"),
    (grammar_compile, "lower_grammar", "grammar lowering"),
    (grammar_compile, "_lexers", "lexers"),
    (parse.SharedDefinitions, "lower", "lexers' regex lowering"),
    (grammar_compile, "EarleyCharts", "Earley tables"),
]


def _timed(spent: dict, label: str, fn):
    def wrapper(*args, **kwargs):
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - t0

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    spent: dict[str, float] = collections.defaultdict(float)
    for owner, name, label in PHASES:
        setattr(owner, name, _timed(spent, label, getattr(owner, name)))
    eng = bg.Structgen(bg.smollm2_tokenizer())
    labels = [label for _, _, label in PHASES]
    print("| schema | compile ms | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 2) + "|")
    for name, case in json.loads(bg.COLD_SCHEMAS.read_text()).items():
        eng.compile(case["schema"])
        spent.clear()
        total = 0.0
        for _ in range(args.repeat):
            eng.reset()  # cold-empty: the process as setup left it (untimed)
            t0 = time.thread_time()
            eng.compile(case["schema"])
            total += time.thread_time() - t0
        cells = [f"{spent[k] / args.repeat * 1e3:.2f}" if k in spent else "-" for k in labels]
        print(f"| {name} | {total / args.repeat * 1e3:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
