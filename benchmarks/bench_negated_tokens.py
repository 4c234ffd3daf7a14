"""``!<X>`` (any one token but X) on SmolLM2's vocabulary: cost of the token edge.

Two same-process figures (the host is shared, so only ratios within one run mean much):

1. a token-edge loop (``<R> !<R>* <R>``, ``!<R>* " done."``) against the byte loop a
   user would otherwise write (``[^\\x00]*``, any character: not the same language, the
   nearest regular one), each compiled afresh and walked over the same ~130 tokens of
   reasoning text, cold (new grammar) and warm (a second matcher): best of ``--repeats``;
2. for a grammar that names a special token but has no ``!<X>`` (a JSON-ish CFG between
   two ``<repo_name>``), the share of a cold compile-and-walk spent looking for wildcard
   edges (the only cost such grammars pay).

Run: ``python benchmarks/bench_negated_tokens.py [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.support import smollm2_tokenizer
from structgen.fsm import Vocabulary, compile_grammar
from structgen.fsm.grammar.compile import clear_cache
from structgen.fsm.index import token_index

LOOPS = {
    "edge  <R> !<R>* <R>": "root ::= <repo_name> !<repo_name>* <repo_name>",
    "bytes <R> [^\\x00]* <R>": "root ::= <repo_name> [^\\x00]* <repo_name>",
    'edge  !<R>* " done."': 'root ::= !<repo_name>* " done."',
    'bytes [^\\x00]* " done."': 'root ::= [^\\x00]* " done."',
}
NAMED_ONLY = "\n".join(
    [
        "root ::= <repo_name> obj <repo_name>",
        'obj ::= "{" ws (pair ("," ws pair)*)? "}"',
        'pair ::= str ":" ws val ws',
        "val ::= str | [0-9]+ | obj",
        'str ::= "\\"" [^"]* "\\""',
        'ws ::= " "?',
    ]
)
TEXT = (
    "Let me think about this step by step. The user wants a function that sorts a list, "
    "so I will write it in Python and check the edge cases: empty lists, duplicates. "
) * 3
BODY = '{"name": "weather", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}'


def _walk(grammar, ids, buf) -> float:
    m = grammar.matcher()
    t0 = time.perf_counter()
    for t in ids:
        m.fill_bitmask(buf, 0)
        assert m.advance(t), t
    m.fill_bitmask(buf, 0)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tok = smollm2_tokenizer()
    vocab = Vocabulary.from_tokenizer(tok)
    repo = vocab.special_token_texts["<repo_name>"]
    buf = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    text_ids = tok.encode(TEXT, add_special_tokens=False)
    best: dict[str, list[float]] = {name: [1e9, 1e9, 1e9] for name in LOOPS}
    for _ in range(args.repeats):
        for name, text in LOOPS.items():
            clear_cache()
            t0 = time.perf_counter()
            grammar = compile_grammar(text, vocab)
            compile_s = time.perf_counter() - t0
            ids = ([repo] if "<R> " in name else []) + text_ids
            cold, warm = _walk(grammar, ids, buf), _walk(grammar, ids, buf)
            for i, v in enumerate((compile_s, cold, warm / len(ids))):
                best[name][i] = min(best[name][i], v)
    print(f"{len(text_ids)} tokens of text, best of {args.repeats}")
    for name, (c, cold, warm) in best.items():
        print(f"  {name:26s} compile {c * 1e3:6.1f} ms  cold walk {cold * 1e3:6.1f} ms  ", end="")
        print(f"warm {warm * 1e6:5.1f} us/token")

    spent = [0.0, 0]
    original = token_index._wildcard_edges

    def timed(dfa, state):
        t0 = time.perf_counter()
        try:
            return original(dfa, state)
        finally:
            spent[0] += time.perf_counter() - t0
            spent[1] += 1

    token_index._wildcard_edges = timed
    ids = [repo] + tok.encode(BODY, add_special_tokens=False) + [repo]
    total = 0.0
    try:
        for _ in range(args.repeats):
            clear_cache()
            vocab.__dict__.pop("_special_views", None)  # a cold view as well
            t0 = time.perf_counter()
            _walk(compile_grammar(NAMED_ONLY, vocab), ids, buf)
            total += time.perf_counter() - t0
    finally:
        token_index._wildcard_edges = original
    print(
        f"named <R> only (no !<X>): {spent[1]} wildcard-edge lookups, "
        f"{100 * spent[0] / total:.2f}% of cold compile + walk"
    )


if __name__ == "__main__":
    main()
