"""JSON whitespace lowering, this checkout against a baseline: regex texts and accepted spellings.

For every ``--every``-th schema file of ``jsonschemabench/plain`` (sorted by path), each arm
(a subprocess importing the checkout's ``structgen``) records:

* a hash of ``json_schema_to_shared(schema, whitespace=...)`` (pattern and definitions) under
  ``"compact"`` and under ``"flexible"``;
* whether ``compile_json_schema(schema, whitespace="flexible", allow_extra_properties=True)``
  matches each valid instance of the file, canonical (``benchmarks.corpus.canonical``) and
  spelled three ways: compact, with ``", "``/``": "`` separators, and indented by 2.

Printed: schemas compared, compact texts that differ (a compact grammar must not change),
flexible texts that differ, and spellings whose acceptance differs between the arms.

Usage: ``python benchmarks/ws_runs_ab.py --baseline /work/wt-NAME-base [--every 20]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _arm(every: int) -> dict:
    """This process's ``structgen`` (from ``sys.path``) over the sample; JSON-ready results."""
    import jsonschema

    from benchmarks.corpus import CORPORA, canonical
    from structgen.errors import StructgenError
    from structgen.fsm import compile_json_schema
    from structgen.fsm.json_schema import json_schema_to_shared

    files = sorted((CORPORA / "jsonschemabench" / "plain").rglob("*.json"))[::every]
    out = {}
    for path in files:
        doc = json.loads(path.read_text())
        schema = doc["schema"]
        row: dict = {}
        for ws in ("compact", "flexible"):
            try:
                shared = json_schema_to_shared(schema, whitespace=ws, strict=False)
                row[ws] = hashlib.sha1(repr(shared).encode()).hexdigest()
            except (StructgenError, RecursionError) as exc:
                row[ws] = "error: " + type(exc).__name__
        try:
            grammar = compile_json_schema(
                schema, whitespace="flexible", strict=False, allow_extra_properties=True
            )
        except StructgenError as exc:
            row["spellings"] = "error: " + type(exc).__name__
            out[str(path.relative_to(CORPORA))] = row
            continue
        spelled = []
        for test in doc.get("tests", []):
            value = test["data"]
            try:
                cls = jsonschema.validators.validator_for(schema)
                if not test.get("valid") or not cls(schema).is_valid(value):
                    continue
            except Exception:  # noqa: BLE001 (a schema jsonschema cannot read: not a case)
                continue
            value = canonical(value, schema, schema)
            for seps, indent in [((",", ":"), None), ((", ", ": "), None), ((",", ": "), 2)]:
                text = json.dumps(value, separators=seps, indent=indent, ensure_ascii=False)
                spelled.append(bool(grammar.matches(text)))
        row["spellings"] = spelled
        out[str(path.relative_to(CORPORA))] = row
    return out


def _run_arm(checkout: Path, every: int) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{checkout}{os.pathsep}{ROOT}")
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        "from benchmarks.ws_runs_ab import _arm; print(json.dumps(_arm(int(sys.argv[3]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(checkout), str(ROOT), str(every)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="baseline checkout root")
    parser.add_argument("--every", type=int, default=20, help="take every k-th schema file")
    args = parser.parse_args()
    old, new = _run_arm(args.baseline, args.every), _run_arm(ROOT, args.every)
    assert old.keys() == new.keys()
    compact = [k for k in new if old[k]["compact"] != new[k]["compact"]]
    flexible = [k for k in new if old[k]["flexible"] != new[k]["flexible"]]
    spellings = accepted = differ = 0
    differ_at = []
    for k in new:
        a, b = old[k]["spellings"], new[k]["spellings"]
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                differ_at.append(k)
            continue
        spellings += len(b)
        accepted += sum(b)
        d = sum(x != y for x, y in zip(a, b))
        differ += d
        if d:
            differ_at.append(k)
    print(f"schemas {len(new)} (every {args.every}th of jsonschemabench/plain)")
    print(f"compact texts differing: {len(compact)} {compact[:5]}")
    print(f"flexible texts differing: {len(flexible)}")
    print(f"flexible spellings: {spellings}, accepted by this checkout {accepted}, ", end="")
    print(f"acceptance differing: {differ} in {len(differ_at)} schemas {differ_at[:5]}")


if __name__ == "__main__":
    main()
