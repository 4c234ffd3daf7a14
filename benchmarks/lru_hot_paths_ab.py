"""Cache hits of two checkouts on SmolLM2's vocabulary, same process: the hottest LRU caches.

Ten hit paths, each timed for the baseline's package (``_load_checkout``) and this
checkout's, alternated, ``perf_counter``, the garbage collector off, median of ``RUNS`` runs
of ``LOOPS`` passes over the same warm keys, and the fastest runs' ratio (a restore's run
lasts ~2 ms: one preemption on a shared machine is most of it); both sides must return the
same values. The grammar: the contact-card dev-set schema. Paths: ``TokenIndex.bitmask``
(the mask cache), ``TokenIndex.next_states`` (the row cache), ``TokenIndex.token_next_state``
past the step memo (the row cache, read without refreshing), ``LexicalMaskCache.get`` (head
parts), ``compile_json_schema`` of a cached schema (the compiler's grammar cache); a copy
spec's cached ``lower`` and ``copied_fields`` and a copied field's cached acceptor
(``json_schema.copy``'s three caches), ``regex.reused.restore`` of a kept run of
``parse.lower`` and of the grammar lexers (a two-definition run: the lookup is a larger part
of it). Prints a markdown table (ns per hit, new / base).

    PYTHONPATH=. python benchmarks/lru_hot_paths_ab.py /work/main
"""

from __future__ import annotations

import gc
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.cold_ab import _load_checkout  # noqa: E402
from benchmarks.support import smollm2_tokenizer  # noqa: E402

RUNS = 9
LOOPS = 20
SCHEMA = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())


def _paths(pkg: str, tok) -> dict:
    """Warm callables of package ``pkg``: name -> (call of one pass, its result)."""
    fsm = importlib.import_module(f"{pkg}.fsm")
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    grammar = fsm.compile_json_schema(SCHEMA, vocab)
    grammar.dfa.explore(max_rows=200)  # states to cache (a fresh automaton has a few)
    index = grammar.token_index
    states = list(range(min(60, grammar.dfa.num_states)))
    for s in states:
        index.bitmask(s)
        index.next_states(s)
    lex = vocab.lexical_masks
    keys = [(bytes([k]) * 8, k) for k in range(64)]
    for k in keys:
        lex.put(k, np.full(index.num_words, k[1], np.int32))

    def masks():
        return [index.bitmask(s) for s in states]

    def rows():
        return [index.next_states(s) for s in states]

    def parts():
        return [lex.get(k) for k in keys]

    vocab_ids = range(0, vocab.vocab_size, 97)

    def steps():
        out = []
        for s in states[:10]:
            index.steps.clear()  # every step read from the cached row, not the step memo
            out.append([index.token_next_state(s, t) for t in vocab_ids])
        return out

    def compiled():
        return [fsm.compile_json_schema(SCHEMA, vocab) is grammar for _ in range(20)]

    return {
        **_copy_and_reused_paths(pkg),
        "TokenIndex.bitmask": (masks, len(states)),
        "TokenIndex.next_states": (rows, len(states)),
        "TokenIndex.token_next_state": (steps, 10 * len(vocab_ids)),
        "LexicalMaskCache.get": (parts, len(keys)),
        "compile_json_schema (cached)": (compiled, 20),
    }


def _copy_and_reused_paths(pkg: str) -> dict:
    """Warm callables of ``json_schema.copy``'s and ``regex.reused``'s caches in ``pkg``."""
    copy = importlib.import_module(f"{pkg}.fsm.json_schema.copy")
    parse = importlib.import_module(f"{pkg}.fsm.regex.parse")
    reused = importlib.import_module(f"{pkg}.fsm.regex.reused")
    terms = importlib.import_module(f"{pkg}.fsm.regex.terms")
    base = importlib.import_module(f"{pkg}.fsm.regex.definitions").PLACEHOLDER_BASE
    spec = copy.CopyJsonSchema(SCHEMA, copy_from=("Ann Lee, ann@example.com, +1 555 0100",))
    spec.lower()
    field = {"type": "string", "pattern": "[A-Z][a-z]+"}

    class Conv:  # a hit reads only ``strict``
        strict = False

    key = ("/properties/name", json.dumps(field, sort_keys=True, default=str), False)
    if hasattr(copy._ACCEPTORS, "put"):
        copy._ACCEPTORS.put(key, ("acceptor", ()))
    else:  # a baseline's OrderedDict
        copy._ACCEPTORS[key] = ("acceptor", ())
    texts = ["(?:abc|abd)+xyz", "(?:" + chr(base) + "|q)*r"]
    parse.lower(chr(base + 1), terms.TermArena(), definitions=texts, reusable={0, 1})
    run = reused.run_key(texts, [0, 1])
    lexer_key = getattr(reused, "lexer_key", lambda r, s: ("lexers", r, s))(run, ("[0-9]+",))
    arena = terms.TermArena()
    kept = parse.lower(chr(base + 1), arena, definitions=texts)
    reused.keep(lexer_key, arena, [kept])

    def lowered():
        return [spec.lower().pattern for _ in range(20)]

    def copied():
        return [spec.copied_fields() for _ in range(20)]

    def acceptors():
        return [copy._base_acceptor(Conv, field, "/properties/name")[0] for _ in range(20)]

    def runs():
        return [reused.restore(run, terms.TermArena()) for _ in range(20)]

    def lexer_runs():
        return [reused.restore(lexer_key, terms.TermArena()) for _ in range(20)]

    return {
        "CopyJsonSchema.lower (cached)": (lowered, 20),
        "CopyJsonSchema.copied_fields (cached)": (copied, 20),
        "copy._base_acceptor (cached)": (acceptors, 20),
        "reused.restore (lower run)": (runs, 20),
        "reused.restore (lexers run)": (lexer_runs, 20),
    }


def _time(call, loops: int) -> float:
    """Seconds of ``loops`` calls, the garbage collector off (a collection of the
    vocabulary's heap, caught by one side's run, would be most of a restore's time).
    """
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(loops):
            call()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def main() -> None:
    _load_checkout("structgen_base", Path(sys.argv[1]))
    tok = smollm2_tokenizer()
    sides = {"base": _paths("structgen_base", tok), "new": _paths("structgen", tok)}
    print("| hit path | base ns/hit | new ns/hit | new / base | fastest new / base |")
    print("|---|---|---|---|---|")
    for name in sides["new"]:
        (base_call, n), (new_call, _) = sides["base"][name], sides["new"][name]
        for a, b in zip(base_call(), new_call(), strict=True):
            assert np.array_equal(a, b), name
        times: dict[str, list[float]] = {"base": [], "new": []}
        for _ in range(RUNS):
            times["base"].append(_time(base_call, LOOPS) / (LOOPS * n))
            times["new"].append(_time(new_call, LOOPS) / (LOOPS * n))
        b, w = statistics.median(times["base"]), statistics.median(times["new"])
        fastest = min(times["new"]) / min(times["base"])
        print(f"| {name} | {b * 1e9:.0f} | {w * 1e9:.0f} | {w / b:.2f} | {fastest:.2f} |")


if __name__ == "__main__":
    main()
