"""The cost of ``not``/``oneOf``/``if`` under each whitespace setting, one checkout against
another: thread CPU of a fresh compile plus whole-document membership of a fixed set of
spellings (which builds the automaton's states the documents reach), per schema (mean of
``REPEATS`` fresh compiles).

Each round runs one process per arm, the arms alternated (A, B, A again: the A/A pair shows
the noise); a process clears the compile cache before each schema. Medians over rounds.

    python benchmarks/boolean_ops_whitespace_ab.py --a /work/wt-base --b /work/wt-new --rounds 7

Prints one line per schema and whitespace: A, B, A' seconds and the ratios B/A and A'/A.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

SCHEMAS = {
    "not-array": {"not": {"type": "array", "maxItems": 1}},
    "not-object": {
        "not": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    },
    "oneOf-arrays": {
        "oneOf": [
            {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
            {"type": "array", "items": {"type": "integer"}, "minItems": 2},
        ]
    },
    "if-then-else": {
        "if": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        "then": {"properties": {"b": {"type": "array", "items": {"type": "integer"}}}},
        "else": {"type": "array", "items": {"type": "string"}},
    },
}  # fmt: skip
REPEATS = 10  # fresh compiles per schema and process, averaged
DOCS = [
    '{"a": 1, "b": [1, 2, 3]}', "[1, 2, 3]", '["x", "y"]', "[ ]", '{ "a" : [ 1 ] }',
    '{"a":1,"b":[1,2]}', "[1,[2,[3]]]", '{"b": [], "c": {"d": null}}', "[1,2]", "{}",
]  # fmt: skip


def one_round() -> dict[str, float]:
    """Thread CPU seconds per ``schema/whitespace`` in this process's checkout."""
    import time

    from structgen.fsm import compile_json_schema
    from structgen.fsm.compiler import clear_cache

    out = {}
    for name, schema in SCHEMAS.items():
        for ws in ("compact", "flexible"):
            total = 0.0
            for _ in range(REPEATS):
                clear_cache()
                t0 = time.thread_time()
                grammar = compile_json_schema(schema, whitespace=ws, allow_extra_properties=True)
                for doc in DOCS:
                    grammar.matches(doc)
                total += time.thread_time() - t0
            out[f"{name}/{ws}"] = total / REPEATS
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", required=True, help="checkout of arm A (and A')")
    parser.add_argument("--b", required=True, help="checkout of arm B")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_round:
        print(json.dumps(one_round()))
        return
    arms = {"A": args.a, "B": args.b, "A'": args.a}
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    for _ in range(args.rounds):
        for arm, path in arms.items():
            cmd = [sys.executable, __file__, "--a", path, "--b", path, "--one-round"]
            done = subprocess.run(cmd, cwd=path, env={"PYTHONPATH": path}, capture_output=True,
                                  text=True, check=True)  # fmt: skip
            runs[arm].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{'schema/whitespace':28} {'A s':>8} {'B s':>8} {'A2 s':>8} {'B/A':>6} {'A2/A':>6}")
    for key in runs["A"][0]:
        a, b, a2 = (statistics.median(r[key] for r in runs[arm]) for arm in arms)
        print(f"{key:28} {a:8.4f} {b:8.4f} {a2:8.4f} {b / a:6.2f} {a2 / a:6.2f}")


if __name__ == "__main__":
    main()
