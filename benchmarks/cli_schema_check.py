"""The CLI's schema check (``structgen.cli.inputs.load_schema``) before and after it
lowered each schema once.

Timed: the part of ``load_schema`` after its file and metaschema checks (the same in
both). ``main`` replays main's calls on this tree's code: the torch-free precheck
``JsonSchema.lower()``, then ``compile_json_schema`` (which lowers the schema again);
``branch`` is this tree's: ``lower_spec`` once, its result handed to ``compile_spec``.
Each timing is one cold check (``clear_cache`` first), the two interleaved; medians.

    PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/cli_schema_check.py --repeat 15
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import time
from pathlib import Path

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import clear_cache, compile_json_schema, compile_spec
from structgen.fsm.spec import JsonSchema, lower_spec

ROOT = Path(__file__).resolve().parent.parent


def main_sequence(schema: dict) -> None:
    """main's ``load_schema`` after its file checks: lower, then compile (lowering again)."""
    try:
        JsonSchema(schema, allow_extra_properties=False).lower()
    except UnsupportedSchemaError as exc:
        if exc.keyword != "$ref":
            raise
    compile_json_schema(schema, allow_extra_properties=False)


def branch_sequence(schema: dict) -> None:
    """This branch's ``load_schema`` after its file checks: lower once, compile that."""
    spec = JsonSchema(schema, allow_extra_properties=False)
    compile_spec(spec, None, lowered=lower_spec(spec))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    cases = {"person (examples)": json.loads((ROOT / "examples/schemas/person.json").read_text())}
    cold = json.loads((ROOT / "benchmarks/data/cold_schemas.json").read_text())
    cases.update({name: item["schema"] for name, item in cold.items()})
    print("| schema | main ms | branch ms | branch / main |")
    print("|---|---|---|---|")
    for name, schema in cases.items():
        times: dict[str, list[float]] = {"main": [], "branch": []}
        runs = {
            "main": lambda s=schema: main_sequence(s),
            "branch": lambda s=schema: branch_sequence(s),
        }
        for i in range(args.repeat):
            order = ("main", "branch") if i % 2 == 0 else ("branch", "main")
            for label in order:
                clear_cache()
                with contextlib.redirect_stderr(io.StringIO()):
                    t0 = time.perf_counter()
                    runs[label]()
                    times[label].append(time.perf_counter() - t0)
        m, b = (statistics.median(times[k]) * 1e3 for k in ("main", "branch"))
        print(f"| {name} | {m:.2f} | {b:.2f} | {b / m:.2f}x |")


if __name__ == "__main__":
    main()
