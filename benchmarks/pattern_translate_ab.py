"""A/B of the JSON ``pattern`` translation (#20): ``pattern_to_string_body`` of a baseline
checkout (its ``structgen/fsm/json_schema/pattern.py``, recursive over ``re``'s tree) against
this checkout's (explicit stack; ``plain_tree`` past ``RE_MAX_NESTING``), interleaved in one
process over every ``pattern`` of the MaskBench plain corpora. Reports median per-call
microseconds of each and their ratio, and counts the patterns whose two texts are equal,
or differ but parse (``re``'s parser, which inlines plain non-capturing groups) to the same
tree: the same language (the stack translation drops groups around a lone group).

Run:  python benchmarks/pattern_translate_ab.py --baseline /work/main [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from benchmarks.corpus import CORPORA  # noqa: E402
from structgen.fsm.json_schema import pattern as new  # noqa: E402
from structgen.fsm.regex.parse import sre_parse  # noqa: E402


def _baseline(path: Path):
    spec = importlib.util.spec_from_file_location(
        "structgen.fsm.json_schema._pattern_baseline",
        path / "structgen" / "fsm" / "json_schema" / "pattern.py",
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _patterns() -> list[str]:
    out: dict[str, None] = {}
    for f in sorted((CORPORA / "jsonschemabench" / "plain").glob("*/*.json")):
        stack = [json.loads(f.read_text(encoding="utf-8"))["schema"]]
        while stack:
            cur = stack.pop()
            if isinstance(cur, dict):
                if isinstance(cur.get("pattern"), str):
                    out[cur["pattern"]] = None
                stack.extend(cur.values())
            elif isinstance(cur, list):
                stack.extend(cur)
    return list(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    old = _baseline(args.baseline)
    pats = []
    for p in _patterns():
        try:
            a = old.pattern_to_string_body(p, "")
            b = new.pattern_to_string_body(p, "")
        except Exception:  # noqa: BLE001 - refused by either: not timed
            continue
        pats.append((p, a == b or str(sre_parse.parse(a)) == str(sre_parse.parse(b))))
    per = {"baseline": [], "new": []}
    for _ in range(args.rounds):
        for name, mod in (
            (("baseline", old), ("new", new))
            if _ % 2 == 0
            else (
                ("new", new),
                ("baseline", old),
            )
        ):
            t = time.perf_counter()
            for p, _same in pats:
                mod.pattern_to_string_body(p, "")
            per[name].append((time.perf_counter() - t) / len(pats) * 1e6)
    a, b = statistics.median(per["baseline"]), statistics.median(per["new"])
    same = sum(s for _, s in pats)
    print(f"patterns translated by both: {len(pats)}, same text or same re tree: {same}")
    print("| translation | median us/pattern |")
    print("|---|---|")
    print(f"| baseline ({args.baseline}) | {a:.1f} |")
    print(f"| this checkout | {b:.1f} |")
    print(f"| ratio new/baseline | {b / a:.2f} |")


if __name__ == "__main__":
    main()
