"""Deeply nested schemas and patterns (#20): what each engine does at depth 10, 1,000 and
100,000, and how long it takes to answer (compile + first token mask, SmolLM2's vocabulary).

Cases: ``items`` chains (arrays), ``properties`` chains (objects), ``allOf`` chains, ``$ref``
chains, and a string ``pattern`` of nested groups ``((((a))))``. structgen receives the schema
as a Python dict built without recursion (as a caller holding a parsed document does; its
own JSON reading is covered by the server tests), llguidance and XGrammar receive the JSON
text (built as text: ``json.dumps`` itself recurses). Every (engine, case) runs in a fresh
process with a timeout, so a native stack overflow is reported as a crash, not the end of
the run. Outcome: ``compiled``, ``error`` (a typed error: its class and first words),
``crashed`` (a signal or an untyped exception), ``timeout``.

The target (issue #20): every structgen case answers, compiled or a clear error, in under
1 s; nothing crashes.

Run:  python benchmarks/bench_depth.py [--depths 10,1000,100000] [--timeout 60]
          [--engines structgen,llguidance,xgrammar] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

KINDS = ("arrays", "objects", "allOf", "$ref", "pattern")


def case_text(kind: str, n: int) -> str:
    """The JSON text of the ``kind`` schema nested ``n`` deep (built as text, no recursion)."""
    if kind == "arrays":
        return (
            '{"type":"array","minItems":1,"maxItems":1,"items":' * n
            + '{"type":"integer"}'
            + ("}" * n)
        )
    if kind == "objects":
        return '{"type":"object","required":["a"],"properties":{"a":' * n + (
            '{"type":"integer"}' + "}}" * n
        )
    if kind == "allOf":
        return '{"allOf":[' * n + '{"type":"array","items":{"type":"integer"}}' + "]}" * n
    if kind == "$ref":
        defs = ",".join(f'"d{i}":{{"$ref":"#/$defs/d{i + 1}"}}' for i in range(n))
        return '{"$defs":{' + defs + f',"d{n}":{{"type":"integer"}}}},"$ref":"#/$defs/d0"}}'
    if kind == "pattern":
        return json.dumps({"type": "string", "pattern": "^" + "(" * n + "a" + ")" * n + "$"})
    raise ValueError(kind)


def case_dict(kind: str, n: int) -> dict:
    """The same schema as ``case_text`` as a dict, built iteratively."""
    if kind == "arrays":
        s: dict = {"type": "integer"}
        for _ in range(n):
            s = {"type": "array", "minItems": 1, "maxItems": 1, "items": s}
        return s
    if kind == "objects":
        s = {"type": "integer"}
        for _ in range(n):
            s = {"type": "object", "required": ["a"], "properties": {"a": s}}
        return s
    if kind == "allOf":
        s = {"type": "array", "items": {"type": "integer"}}
        for _ in range(n):
            s = {"allOf": [s]}
        return s
    if kind == "$ref":
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
        defs[f"d{n}"] = {"type": "integer"}
        return {"$defs": defs, "$ref": "#/$defs/d0"}
    return json.loads(case_text(kind, n))


def one(engine_name: str, kind: str, n: int) -> dict:
    """Run one case in this process: ``{"outcome", "detail", "seconds"}``."""
    from bench_maskbench import ENGINES, smollm2_tokenizer

    engine = ENGINES[engine_name](smollm2_tokenizer())
    schema = case_dict(kind, n) if engine_name == "structgen" else case_text(kind, n)
    t0 = time.perf_counter()
    try:
        if engine_name == "xgrammar":  # its bench class json.dumps a dict; this is text
            grammar = engine.compiler.compile_json_schema(schema, strict_mode=False)
        else:
            grammar = engine.compile(schema)
        engine.first_mask(grammar)
        outcome, detail = "compiled", ""
    except BaseException as exc:  # noqa: BLE001 - peers' native panics are BaseExceptions
        typed = engine_name == "structgen" and type(exc).__module__.startswith("structgen")
        outcome = "error" if typed or engine_name != "structgen" else "crashed"
        detail = f"{type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}"
    return {"outcome": outcome, "detail": detail, "seconds": time.perf_counter() - t0}


def run_case(engine_name: str, kind: str, n: int, timeout: float) -> dict:
    """``one`` in a fresh process (a crash or hang there is an outcome, not the end)."""
    cmd = [sys.executable, __file__, "--one", engine_name, kind, str(n)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "detail": f"> {timeout:.0f} s", "seconds": None}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:90]
        return {"outcome": "crashed", "detail": f"exit {proc.returncode}: {tail}", "seconds": None}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="10,1000,100000")
    ap.add_argument("--engines", default="structgen,llguidance,xgrammar")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    ap.add_argument("--no-append", action="store_true")
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], int(args.one[2]))), flush=True)
        return
    engines = args.engines.split(",")
    rows = [
        "| case | depth | " + " | ".join(engines) + " |",
        "|---|---|" + "---|" * len(engines),
    ]
    for kind in KINDS:
        for n in (int(d) for d in args.depths.split(",")):
            cells = []
            for name in engines:
                r = run_case(name, kind, n, args.timeout)
                secs = "" if r["seconds"] is None else f", {r['seconds']:.3f} s"
                detail = f" ({r['detail']})" if r["detail"] else ""
                cells.append(f"{r['outcome']}{secs}{detail}".replace("|", "/"))
                print(kind, n, name, cells[-1], flush=True)
            rows.append(f"| {kind} | {n:,} | " + " | ".join(cells) + " |")
    text = "\n".join(
        [
            f"## bench_depth: nested schemas and patterns ({time.strftime('%Y-%m-%d %H:%M')} UTC)",
            "",
            "Command: `python benchmarks/" + " ".join([Path(__file__).name, *sys.argv[1:]]) + "`",
            "(compile + first mask, wall seconds, a fresh process per cell; SmolLM2 vocabulary)",
            "",
            *rows,
            "",
        ]
    )
    print(text)
    if not args.no_append:
        with open(args.out, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
