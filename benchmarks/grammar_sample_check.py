"""Correctness triage of structgen on the grammar benchmark's MaskBench sample.

For every schema of ``bench_grammar.load_sample(per_subset, 6)`` (the bench's full sample
by default: 12 per subset), compiles with the bench's settings (``strict=False``,
``allow_extra_properties=True``, SmolLM2's tokenizer) and prints one line: compiled (with
the warnings, i.e. what was ignored) or the error, then every valid instance rejected (VR)
and invalid instance accepted (IA), forced token by token as the bench does. Ends with a
per-subset table; with ``--peers`` it also compiles each schema with xgrammar and
llguidance (the bench's engine classes) and lists their compiled counts per subset.
No timing is reported (see bench_grammar.py for that).

Run:  python benchmarks/grammar_sample_check.py [--per-subset 12] [--peers] [NAME ...]
      (NAME: a subset or a substring of schema file names, to check only those)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_grammar as B  # noqa: E402


def _peer_compiles(engine, schema) -> bool:
    try:
        engine.compile(schema)
        return True
    except BaseException as exc:  # peers' Rust panics are BaseExceptions
        if isinstance(exc, KeyboardInterrupt):
            raise
        return False


def _forced(grammar, tok, text: str) -> bool:
    m = grammar.matcher()
    return (
        all(m.advance(t) for t in tok.encode(text, add_special_tokens=False)) and m.is_accepting()
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-subset", type=int, default=12)
    ap.add_argument("--peers", action="store_true", help="also compile with xgrammar/llguidance")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    from structgen.fsm import Vocabulary, clear_cache, compile_json_schema

    tok = B.smollm2_tokenizer()
    vocab = Vocabulary.from_tokenizer(tok)
    peers = [cls(tok) for cls in (B.XGrammar, B.LLGuidance)] if args.peers else []
    subs: dict[str, dict] = {}
    for sub, name, schema, tests in B.load_sample(args.per_subset, 6):
        if args.names and not any(n == sub or n in name for n in args.names):
            continue
        s = subs.setdefault(sub, {"n": 0, "comp": 0, "vr": 0, "v": 0, "ia": 0, "i": 0, "peers": {}})
        s["n"] += 1
        for e in peers:
            s["peers"][e.name] = s["peers"].get(e.name, 0) + _peer_compiles(e, schema)
        clear_cache()
        t0 = time.perf_counter()
        try:
            g = compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)
        except Exception as exc:  # noqa: BLE001 - reported, as the bench counts it
            print(f"{sub:22} {name:40} ERR {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            continue
        s["comp"] += 1
        bad = []
        for valid, text in tests:
            ok = _forced(g, tok, text)
            s["v" if valid else "i"] += 1
            if ok != valid:
                s["vr" if valid else "ia"] += 1
                bad.append(("VR" if valid else "IA", text[:120]))
        print(
            f"{sub:22} {name:40} ok {time.perf_counter() - t0:.2f}s warnings={g.warnings}",
            flush=True,
        )
        for kind, text in bad:
            print(f"    {kind} {text}")
    print(f"\n{'subset':22} compiled  valid rejected  invalid accepted  peers compiled")
    for sub, s in subs.items():
        print(
            f"{sub:22} {s['comp']}/{s['n']:<7} {s['vr']}/{s['v']:<13} {s['ia']}/{s['i']:<15} "
            f"{s['peers'] or ''}"
        )


if __name__ == "__main__":
    main()
