"""The grammar back end of two checkouts gives the same grammars: exactness check for #22 cuts.

Both checkouts are loaded in one process (``cold_ab._load_checkout``); every schema is
compiled cold-empty by each (``cold_ab._StructgenOf``: caches and memos dropped, SmolLM2's
vocabulary, ``strict=False, allow_extra_properties=True`` as ``bench_grammar``), and the
results compared: the error (type and message) or, for a recursive schema's
``CompiledCFG``, every ``CfgGrammar`` field, each terminal's lexer (its kind and start
state), the shared lexer automaton's state terms and its arena's terms (kinds and
arguments, in id order), and the bitmask before every token of the schema's valid
instances forced through a fresh matcher (and the advance's answer); for a regex grammar,
its DFA's pattern and the same masks. Schemas: ``data/cold_schemas.json`` and the
jsonschemabench MaskBench members of ``--subsets`` (``--per-subset`` of each, in
``bench_maskbench.iter_corpus`` order; ``--refs-only``: those holding a ``$ref``).
Prints the count compared and every difference; exits 1 on one.

    PYTHONPATH=. python benchmarks/back_end_equal.py --baseline /work/wt-base
        [--per-subset 60] [--refs-only]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.bench_maskbench as bm  # noqa: E402
from benchmarks.cold_ab import _load_checkout, _StructgenOf  # noqa: E402

_CFG_FIELDS = (
    "terminals",
    "ignore",
    "lhs",
    "rhs",
    "names",
    "start",
    "definitions",
    "sources",
    "reusable",
    "seeds",
)


def _summary(eng: _StructgenOf, schema, instances: list[list[int]]) -> dict:
    """What one checkout's cold-empty compile of ``schema`` gives (comparable values)."""
    eng.reset()
    with eng._own_name():  # masks build C rows too (cold_ab's note)
        return _compiled(eng, schema, instances)


def _compiled(eng: _StructgenOf, schema, instances: list[list[int]]) -> dict:
    try:
        g = eng.compile(schema)
    except Exception as exc:  # noqa: BLE001 - the error is part of the result
        return {"error": (type(exc).__name__, str(exc))}
    out: dict = {"kind": type(g).__name__}
    cfg = getattr(g, "cfg", None)
    if cfg is not None:
        out["cfg"] = {f: getattr(cfg, f) for f in _CFG_FIELDS}
        lexers = g.dfa.lexers
        out["lexers"] = [(type(lx).__name__, getattr(lx, "initial", None)) for lx in lexers]
        shared = {id(lx.dfa): lx.dfa for lx in lexers if hasattr(lx, "dfa")}
        out["lexer_dfas"] = [
            ([d.term(s) for s in range(d.num_states)], d.arena.kind, d.arena.args)
            for d in shared.values()
        ]
    else:
        out["pattern"] = (g.source_pattern, g.definitions)
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    steps = []
    for ids in instances:
        m = g.matcher()
        for t in ids:
            m.fill_bitmask(buf, 0)
            ok = m.advance(t)
            steps.append((buf.clone(), ok))
            if not ok:
                break
        steps.append(m.is_accepting())
    out["steps"] = steps
    return out


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return bool(torch.equal(a, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _cases(args, tok) -> list[tuple[str, object, list[list[int]]]]:
    out = []
    for name, case in json.loads(bg.COLD_SCHEMAS.read_text()).items():
        text = json.dumps(case["instance"], separators=(",", ":"))
        out.append((f"cold/{name}", case["schema"], [tok.encode(text, add_special_tokens=False)]))
    subsets = args.subsets.split(",") if args.subsets else list(bm.ISSUE_480)
    for sub, fname, raw in bm.iter_corpus(subsets, args.per_subset):
        doc = json.loads(raw)
        if args.refs_only and "$ref" not in json.dumps(doc["schema"]):
            continue
        valid = [t for ok, t in bm.canonical_tests(doc) if ok][: args.instances]
        out.append(
            (
                f"{sub}/{fname}",
                doc["schema"],
                [tok.encode(t, add_special_tokens=False) for t in valid],
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--new", type=Path, default=ROOT)
    ap.add_argument("--per-subset", type=int, default=60)
    ap.add_argument("--subsets", default="", help="comma-separated (default: every subset)")
    ap.add_argument("--instances", type=int, default=2, help="valid instances forced each")
    ap.add_argument("--refs-only", action="store_true")
    args = ap.parse_args()
    tok = bg.smollm2_tokenizer()
    _load_checkout("structgen_base", args.baseline)
    _load_checkout("structgen_new", args.new)
    old = _StructgenOf("old", "structgen_base", tok)
    new = _StructgenOf("new", "structgen_new", tok)
    cases = _cases(args, tok)
    kinds: dict[str, int] = {}
    diffs = 0
    for label, schema, instances in cases:
        a, b = _summary(old, schema, instances), _summary(new, schema, instances)
        kinds[a.get("kind", "error")] = kinds.get(a.get("kind", "error"), 0) + 1
        if not _same(a, b):
            diffs += 1
            keys = [k for k in a.keys() | b.keys() if not _same(a.get(k), b.get(k))]
            print(f"DIFF {label}: {sorted(keys)}")
    steps = "instances forced through each"
    print(f"{len(cases)} schemas ({kinds}), {steps}: {diffs} differ")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
