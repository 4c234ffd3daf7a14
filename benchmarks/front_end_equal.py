"""Front-end equality of two checkouts over every corpus schema document.

For each document of jsonschemabench (plain), the JSON-Schema-Test-Suite (every draft,
``tests/**/*.json``, optional ones included) and the five cold schemas, compares the
baseline's and this checkout's: ``ids.check_schema_depth`` and ``schema_has_ref`` (value
or error type and message), ``check.check_schema`` (verdict, message and pointer; this
checkout both with and without the measured ``depth``), ``RefIndex`` (the rewritten
document as JSON, each copied subschema's origin in walk order, the reference table's
pointers and targets, resources, anchors, dynamic anchors, ``legacy``, ``draft``) and,
with ``--lower``, ``spec.lower_spec`` of ``JsonSchema(doc)`` (pattern, definitions,
warnings or the error). Prints the counts and the first differences; exits 1 on any.

    PYTHONPATH=. python benchmarks/front_end_equal.py --baseline /work/wt-base [--lower]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402

CORPORA = ROOT.parent / "shared" / "corpora"


def documents() -> list[tuple[str, object]]:
    """(name, schema document) for every corpus document."""
    out = [(f"cold/{n}", c["schema"]) for n, c in json.loads(bg.COLD_SCHEMAS.read_text()).items()]
    for path in sorted((CORPORA / "jsonschemabench" / "plain").rglob("*.json")):
        out.append((str(path), json.loads(path.read_text())["schema"]))
    for path in sorted((CORPORA / "json-schema-test-suite" / "tests").rglob("*.json")):
        for i, group in enumerate(json.loads(path.read_text())):
            out.append((f"{path}#{i}", group["schema"]))
    return out


def _outcome(fn, *args, **kw):
    try:
        return ("ok", fn(*args, **kw))
    except Exception as exc:  # compared by type name and message
        return ("err", type(exc).__name__, str(exc), getattr(exc, "pointer", None))


def _origins(root, origin) -> list:
    """Each dict of the rewritten document (walk order) with the origin recorded for it."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.append(origin.get(id(node)))
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return out


def _ref_index(pkg: str, doc):
    ids = importlib.import_module(f"{pkg}.fsm.json_schema.ids")
    try:
        r = ids.RefIndex(doc)
    except Exception as exc:
        return ("err", type(exc).__name__, str(exc))
    return (
        json.dumps(r.root, default=repr),
        _origins(r.root, r.origin),
        sorted(r._table),
        [json.dumps(r._table[k], default=repr) for k in sorted(r._table)],
        r._resources,
        sorted(r._anchors.items()),
        r._dynamic,
        r.legacy,
        r.draft[0].__name__,
        r.draft[1],
        r._embedded,
    )


def _front(pkg: str, doc, lower: bool, depth_arg: bool) -> dict:
    ids = importlib.import_module(f"{pkg}.fsm.json_schema.ids")
    check = importlib.import_module(f"{pkg}.fsm.json_schema.check")
    out = {
        "depth": _outcome(ids.check_schema_depth, doc),
        "has_ref": _outcome(ids.schema_has_ref, doc),
    }
    if isinstance(doc, dict):
        out["check"] = _outcome(check.check_schema, doc)
        if depth_arg and out["depth"][0] == "ok":
            out["check_depth"] = _outcome(check.check_schema, doc, depth=out["depth"][1])
        if out["depth"][0] == "ok":
            out["refs"] = _ref_index(pkg, doc)
    if lower:
        spec = importlib.import_module(f"{pkg}.fsm.spec")
        out["lower"] = _outcome(
            lambda: _lowered(spec.lower_spec(spec.JsonSchema(doc), max_convert_seconds=5.0))
        )
    return out


def _lowered(low) -> tuple:
    return (
        type(low).__name__,
        low.pattern,
        tuple(low.definitions),
        tuple(getattr(low, "warnings", ())),
        tuple(sorted(getattr(low, "rules", ()))),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--new", default=str(ROOT))
    ap.add_argument("--lower", action="store_true")
    args = ap.parse_args()
    ca._load_checkout("structgen_base", Path(args.baseline))
    ca._load_checkout("structgen_new", Path(args.new))
    docs = documents()
    diffs = 0
    for name, doc in docs:
        old = _front("structgen_base", doc, args.lower, False)
        new = _front("structgen_new", doc, args.lower, True)
        if "check_depth" in new:
            new["check_depth"] = new.pop("check_depth")
            if new["check_depth"] != old["check"]:
                diffs += 1
                print("DIFF check(depth=)", name, old["check"], new["check_depth"])
            del new["check_depth"]
        for key in old:
            if old[key] != new.get(key):
                diffs += 1
                if diffs <= 20:
                    print("DIFF", key, name, str(old[key])[:300], str(new.get(key))[:300])
    print(f"{len(docs)} documents, {diffs} differences")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
