"""Cold flexible-whitespace compile and masks of two checkouts in one process (thread CPU).

As ``compile_cold_ab.py`` (three arms loaded alike with ``cold_ab``'s loader: the
baseline twice for an A/A, this checkout as ``structgen_new``; each pass runs every arm in
a rotated order after its untimed cold-empty ``reset``), but each schema of
``data/cold_schemas.json`` is compiled with ``whitespace="flexible"`` and its instance,
spelled ``json.dumps(instance, indent=2)``, is forced token by token with a ``fill_bitmask``
before each token (``cold_ab._pass``). Reports per workload the median and least
compile + masks + advances ms of each arm, old / new and old / old2 (the A/A), and whether
every arm accepted every token.

    PYTHONPATH=. python benchmarks/ws_cold_ab.py --baseline /work/wt-NAME-base [--passes 9]
        [--only flat,nested]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402


class _Flexible(ca._StructgenOf):
    """``cold_ab``'s structgen engine compiling JSON Schemas with flexible whitespace."""

    def compile(self, schema):
        self._fresh()
        with self._own_name():
            return self.fsm.compile_json_schema(
                schema,
                self.vocab,
                strict=False,
                allow_extra_properties=True,
                whitespace="flexible",
            )

    schema = compile


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--passes", type=int, default=9)
    ap.add_argument("--only", default="", help="comma-separated names of cold_schemas.json")
    args = ap.parse_args()
    tok = bg.smollm2_tokenizer()
    ca._load_checkout("structgen_base", Path(args.baseline))
    ca._load_checkout("structgen_base2", Path(args.baseline))
    ca._load_checkout("structgen_new", ROOT)
    engines = {
        "old": _Flexible("old", "structgen_base", tok),
        "old2": _Flexible("old2", "structgen_base2", tok),
        "new": _Flexible("new", "structgen_new", tok),
    }
    cases = json.loads(bg.COLD_SCHEMAS.read_text())
    names = [n for n in args.only.split(",") if n] or list(cases)
    work = {
        n: (
            cases[n]["schema"],
            tok.encode(json.dumps(cases[n]["instance"], indent=2), add_special_tokens=False),
        )
        for n in names
    }
    gc.collect()
    gc.freeze()
    times = {(e, n): [] for e in engines for n in names}
    whole = {(e, n): True for e in engines for n in names}
    order = list(engines)
    for _ in range(args.passes):
        order = order[1:] + order[:1]
        for name, (schema, ids) in work.items():
            for e in order:
                _, total, n_ok, _ = ca._pass(engines[e], "schema", schema, ids)
                times[e, name].append(total)
                whole[e, name] &= n_ok == len(ids)
    print(
        "| workload (tokens) | old ms med / min | old2 ms med / min | new ms med / min "
        "| old / new (med) | old / old2 (med, A/A) | all tokens accepted |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in names:
        med = {e: statistics.median(times[e, name]) * 1e3 for e in engines}
        low = {e: min(times[e, name]) * 1e3 for e in engines}
        print(
            f"| {name} ({len(work[name][1])}) | {med['old']:.2f} / {low['old']:.2f} | "
            f"{med['old2']:.2f} / {low['old2']:.2f} | {med['new']:.2f} / {low['new']:.2f} | "
            f"{med['old'] / med['new']:.2f}x | {med['old'] / med['old2']:.2f}x | "
            f"{all(whole[e, name] for e in engines)} |"
        )


if __name__ == "__main__":
    main()
