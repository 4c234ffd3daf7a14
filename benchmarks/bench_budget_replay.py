"""Token-budget mask cost without the model: replay real extraction outputs through fresh
budgeted matchers, the current ``fsm/index/budget.py`` against a baseline copy of it and
against no budget, interleaved in one process (#23).

Each document is extracted once (``Engine.extract``, greedy, default ``max_tokens``) while
the grammar spec and the tokens the generation matcher accepted are recorded. Then, per
repeat and per variant in turn, the grammar cache is cleared, the spec compiled afresh
(untimed; a fresh automaton, as a new document gets) and the tokens replayed:
``fill_bitmask`` then ``advance`` per step (timed). Variants: ``new`` (this tree's budget),
``base`` (``--baseline FILE``, a ``budget.py`` of another commit, imported beside it and
put behind ``Matcher``), ``none`` (``max_tokens=None``: the unbudgeted masks alone).

    git show main:structgen/fsm/index/budget.py > /tmp/budget_base.py
    OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_budget_replay.py \\
        --baseline /tmp/budget_base.py --docs medical_note-05 --cards 4 --repeats 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "benchmarks" / "data" / "extraction"


def load_baseline(path: Path):
    """The module at ``path`` (a ``budget.py``) imported as a sibling of ``fsm.index.budget``."""
    name = "structgen.fsm.index._budget_baseline"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def capture(engine, schema: dict, text: str) -> tuple[object, list[int], int]:
    """``(spec, tokens, max_tokens)`` of the generation matcher of one ``extract`` call:
    the budgeted matcher that accepted the most tokens (rollbacks undone)."""
    from structgen.fsm import compiler, matcher

    made: list[tuple[object, object]] = []
    tokens: dict[int, list[int]] = defaultdict(list)
    orig_matcher, orig_advance = compiler.CompiledGrammar.matcher, matcher.Matcher.advance
    orig_rollback = matcher.Matcher.rollback

    def make(self, max_tokens=None):
        m = orig_matcher(self, max_tokens)
        made.append((self.spec, m))
        return m

    def advance(self, token_id):
        ok = orig_advance(self, token_id)
        if ok:
            tokens[id(self)].append(int(token_id))
        return ok

    def rollback(self, n):
        k = max(0, min(int(n), self.num_accepted_tokens))
        if k:
            del tokens[id(self)][-k:]
        orig_rollback(self, n)

    compiler.CompiledGrammar.matcher = make
    matcher.Matcher.advance, matcher.Matcher.rollback = advance, rollback
    try:
        engine.extract(schema, text)
    finally:
        compiler.CompiledGrammar.matcher = orig_matcher
        matcher.Matcher.advance, matcher.Matcher.rollback = orig_advance, orig_rollback
    spec, m = max(
        ((s, m) for s, m in made if m.max_tokens is not None), key=lambda p: len(tokens[id(p[1])])
    )
    return spec, tokens[id(m)], m.max_tokens


def replay(spec, vocab, tokens: list[int], max_tokens: int | None) -> float:
    """Seconds of ``fill_bitmask`` + ``advance`` over ``tokens`` on a freshly compiled grammar."""
    import torch

    from structgen.fsm import clear_cache

    clear_cache()
    grammar = spec.compile(vocab)
    m = grammar.matcher(max_tokens=max_tokens)
    mask = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    t = time.perf_counter()
    for tok in tokens:
        m.fill_bitmask(mask, 0)
        if not (int(mask[0, tok >> 5]) >> (tok & 31)) & 1 or not m.advance(tok):
            raise SystemExit(f"replay: token {tok} refused after {m.num_accepted_tokens} tokens")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, default=None, help="a budget.py to compare with")
    ap.add_argument("--docs", nargs="*", default=["medical_note-05"], help="dev-set ids")
    ap.add_argument("--cards", type=int, default=4, help="contact cards of bench_extract_batch")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from benchmarks.bench_extract_batch import documents
    from structgen import Engine
    from structgen.fsm import matcher
    from structgen.fsm.index import budget

    lines = (DATA / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    dev = {d["id"]: d for d in map(json.loads, filter(str.strip, lines))}
    cases = []
    for doc_id in args.docs:
        schema = json.loads((DATA / dev[doc_id]["schema"]).read_text(encoding="utf-8"))
        cases.append((doc_id, schema, dev[doc_id]["text"]))
    card = json.loads((DATA / "schemas" / "contact_card.json").read_text(encoding="utf-8"))
    cases += [(f"card-{i}", card, t) for i, t in enumerate(documents(args.cards))]
    engine = Engine()
    recorded = [(name, *capture(engine, schema, text)) for name, schema, text in cases]
    base = load_baseline(args.baseline) if args.baseline else None
    variants = ["new", "none"] + (["base"] if base else [])
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _ in range(args.repeats):
        for name, spec, tokens, max_tokens in recorded:
            for v in variants:
                matcher.budget_for = (
                    (base or budget).budget_for if v == "base" else budget.budget_for
                )
                limit = None if v == "none" else max_tokens
                times[(name, v)].append(replay(spec, engine.vocab, tokens, limit))
    matcher.budget_for = budget.budget_for
    head = " | ".join(f"{v} ms/token" for v in variants)
    print(f"| document | tokens | {head} | new / none |" + (" base / new |" if base else ""))
    print("|---" * (3 + len(variants) + bool(base)) + "|")
    for name, _, tokens, _ in recorded:
        med = {v: statistics.median(times[(name, v)]) for v in variants}
        cells = " | ".join(f"{1e3 * med[v] / len(tokens):.2f}" for v in variants)
        ratio = f" {med['base'] / med['new']:.1f}x |" if base else ""
        print(f"| {name} | {len(tokens)} | {cells} | {med['new'] / med['none']:.2f} |{ratio}")
    print(f"\nmedians of {args.repeats} repeats, variants interleaved")


if __name__ == "__main__":
    main()
