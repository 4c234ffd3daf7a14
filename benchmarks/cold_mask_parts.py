"""Where a grammar schema's cold masks go, mask by mask, and how many of them repeat.

A schema of ``data/cold_schemas.json`` that compiles to grammar rules (``recursive``) is
compiled as cold_ab's cold-empty structgen does (``reset`` first, untimed), and its compact
instance forced token by token; each ``fill_bitmask`` is timed (thread CPU) with its parts:
``lexical_key`` (``GrammarAutomaton.lexical_key``: the head key of a configuration inside
one lexeme), the C token-trie walk (the extension's ``walk`` call, less the callbacks it
makes), the C row builder's Python callbacks (``_c_lexer_row``, ``_c_lexer_flags``,
``_c_node``) and the rest (the Python of ``Matcher`` / ``TokenIndex`` around them). The
wrappers add ~0.3 us a call, so the parts are indicative; medians per mask over the passes.

Then, from one pass: the configurations masked, how many distinct tuples of lexer states
(the configuration's lexemes without their chart nodes) and accepting flags they have, and
how many configurations share their tuple's mask (an upper bound on the walks a mask keyed
by lexer states alone could skip: such a key is not exact in general, a token that ends a
lexeme continues in the parse of its node).

    PYTHONPATH=. python benchmarks/cold_mask_parts.py [--passes 25] [--schema recursive]
        [--tokenizer smollm2|bpe150k]
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
from benchmarks.cold_ab import _StructgenOf  # noqa: E402
from structgen.fsm.grammar import automaton as automaton_mod  # noqa: E402
from structgen.fsm.index import trie as trie_mod  # noqa: E402

_CALLBACKS = ("_c_lexer_row", "_c_lexer_flags", "_c_node")
_PARTS = ("total", "lexical_key", "C walk", "callbacks", "rest")


class _Timed:
    """Thread-CPU nanoseconds per label, summed until ``clear``."""

    def __init__(self) -> None:
        self.ns: collections.Counter = collections.Counter()

    def clear(self) -> None:
        self.ns.clear()

    def wrap(self, owner, name: str, label: str) -> None:
        """Replace ``owner.name`` (a function attribute) by a timed call of it."""
        fn = getattr(owner, name)

        def timed(*args, **kwargs):
            t0 = time.thread_time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ns[label] += time.thread_time_ns() - t0

        setattr(owner, name, timed)


class _TimedWalks:
    """The C walk module seen through ``trie._c``, its ``walk`` timed (other names kept)."""

    def __init__(self, ext, timed: _Timed) -> None:
        self._ext, self._timed = ext, timed

    def __getattr__(self, name: str):
        return getattr(self._ext, name)

    def walk(self, *args):
        t0 = time.thread_time_ns()
        try:
            return self._ext.walk(*args)
        finally:
            self._timed.ns["walk"] += time.thread_time_ns() - t0


def _pass(eng, schema, ids, buf, timed: _Timed) -> list[dict]:
    """One cold pass: per mask, its parts in nanoseconds."""
    eng.reset()
    matcher = eng.compile(schema).matcher()
    out = []
    for t in ids:
        timed.clear()
        t0 = time.thread_time_ns()
        matcher.fill_bitmask(buf, 0)
        total = time.thread_time_ns() - t0
        ns = timed.ns
        callbacks = sum(ns[c] for c in _CALLBACKS)
        part = {
            "total": total,
            "lexical_key": ns["lexical_key"],
            "C walk": ns["walk"] - callbacks,
            "callbacks": callbacks,
        }
        part["rest"] = total - ns["walk"] - ns["lexical_key"]
        out.append(part)
        if not matcher.advance(t):
            raise SystemExit("the instance was refused")
    return out


def _repeats(eng, schema, ids, buf) -> list[str]:
    """Lines: the configurations masked, their lexer-state tuples, the masks they share."""
    eng.reset()
    matcher = eng.compile(schema).matcher()
    dfa = matcher._dfa
    seen: dict[int, tuple] = {}
    for t in ids:
        state = matcher.state
        matcher.fill_bitmask(buf, 0)
        if state not in seen:
            lexemes = dfa.lexemes(state)
            states = tuple(sorted((dfa._group[u], s) for u, _, s in lexemes))
            key = (states, dfa.is_accepting(state))
            seen[state] = (key, buf.numpy().tobytes())
        matcher.advance(t)
    groups = collections.defaultdict(list)
    for key, mask in seen.values():
        groups[key].append(mask)
    shared = sum(len(masks) - len(set(masks)) for masks in groups.values())
    states = {s for key in groups for _, s in key[0]}
    return [
        f"configurations masked: {len(seen)}; distinct (lexer states, accepting): "
        f"{len(groups)}; distinct lexer states: {len(states)}",
        f"configurations whose mask equals an earlier one of the same lexer states: {shared}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=25)
    ap.add_argument("--schema", default="recursive", help="a name in data/cold_schemas.json")
    ap.add_argument("--tokenizer", choices=("smollm2", "bpe150k"), default="smollm2")
    args = ap.parse_args()
    tok = bg.smollm2_tokenizer() if args.tokenizer == "smollm2" else bg.bpe_150k_tokenizer()
    eng = _StructgenOf("new", "structgen", tok)
    case = json.loads(bg.COLD_SCHEMAS.read_text())[args.schema]
    schema = case["schema"]
    ids = tok.encode(json.dumps(case["instance"], separators=(",", ":")), add_special_tokens=False)
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    lines = _repeats(eng, schema, ids, buf)  # before the wrappers
    timed = _Timed()
    for name in (*_CALLBACKS, "lexical_key"):
        timed.wrap(automaton_mod.GrammarAutomaton, name, name)
    trie_mod._c = _TimedWalks(trie_mod._c, timed)
    for _ in range(3):
        _pass(eng, schema, ids, buf, timed)
    gc.collect()
    gc.freeze()
    passes = [_pass(eng, schema, ids, buf, timed) for _ in range(args.passes)]
    print("| # | token | " + " | ".join(f"{p} us" for p in _PARTS) + " |")
    print("|---|---|" + "---|" * len(_PARTS))
    sums = dict.fromkeys(_PARTS, 0.0)
    for i, t in enumerate(ids):
        row = [statistics.median(p[i][part] for p in passes) / 1e3 for part in _PARTS]
        for part, us in zip(_PARTS, row):
            sums[part] += us
        cells = " | ".join(f"{us:.1f}" for us in row)
        print(f"| {i} | {tok.decode([t])!r} | {cells} |")
    print("| sum | | " + " | ".join(f"{sums[p]:.0f}" for p in _PARTS) + " |")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
