"""Budget-aware completion: ``CompiledGrammar.matcher(max_tokens=N)`` ends accepted within N."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from benchmarks.support import allowed_ids
from structgen.fsm import Vocabulary, compile_json_schema, compile_regex
from structgen.fsm.index.budget import INF, CompletionBudget

SCHEMA = {
    "type": "object",
    "properties": {
        "k": {"type": "string"},
        "a": {"type": "number"},
        "b": {"type": "array", "items": {"type": "boolean"}},
        "o": {
            "type": "object",
            "properties": {"x": {"enum": ["long-value", "v"]}},
            "required": ["x"],
        },
    },
    "required": ["k", "o"],
}


@pytest.fixture(scope="module")
def json_vocab() -> Vocabulary:
    tokens = [
        b"<eos>",
        b"<s>",
        b"{",
        b"}",
        b'"',
        b"a",
        b"1",
        b",",
        b":",
        b'{"',
        b'a"',
        b"\xc3",
        b"\xa9",
        b"\xc3\xa9",
        b"\\",
        b"n",
        b"-",
        b"0",
        b"12",
        b".5",
        b"e",
        b"true",
        b"t",
        b"[",
        b"]",
        b'":',
        b'"k"',
        b'":"',
        b'"}',
        b'"}}',
        b"long",
        b"-value",
        b'"o":{"x":"',
    ]
    tokens += [bytes([c]) for c in range(32, 127) if bytes([c]) not in tokens]
    return Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0, 1])


def _allowed(m, vocab_size: int) -> list[int]:
    mask = torch.zeros(1, (vocab_size + 31) // 32, dtype=torch.int32)
    m.fill_bitmask(mask, 0)
    return allowed_ids(mask[0], vocab_size)


def _brute_force_min_tokens(grammar, vocab: Vocabulary) -> dict[int, int]:
    """Exact fewest tokens to acceptance for every reachable state (Bellman-Ford)."""
    index, dfa = grammar.token_index, grammar.dfa
    edges: dict[int, set[int]] = {}
    todo, seen = [dfa.initial], {dfa.initial}
    while todo:
        s = todo.pop()
        row = index.next_states(s)
        nxt = {
            int(row[t])
            for t in range(vocab.vocab_size)
            if row[t] >= 0 and t not in vocab.eos_token_ids
        }
        edges[s] = nxt
        for z in nxt - seen:
            seen.add(z)
            todo.append(z)
    dist = {s: (0 if dfa.is_accepting(s) else INF) for s in edges}
    changed = True
    while changed:
        changed = False
        for s, nxt in edges.items():
            best = min((dist[z] + 1 for z in nxt), default=INF)
            if best < dist[s]:
                dist[s], changed = best, True
    return dist


def _walk(grammar, vocab, budget: int | None, rng: random.Random) -> tuple[bytes, int, object]:
    m = grammar.matcher(max_tokens=budget)
    out, n = b"", 0
    while not m.is_terminated() and (budget is None or n < budget) and n < 400:
        allowed = _allowed(m, vocab.vocab_size)
        assert allowed, out  # never an empty mask
        tok = rng.choice(allowed)
        assert m.advance(tok)
        if tok in vocab.eos_token_ids:
            break
        out += vocab.token_bytes[tok]
        n += 1
    return out, n, m


def test_tiny_budget_random_walks_end_accepted(json_vocab: Vocabulary) -> None:
    grammar = compile_json_schema(SCHEMA, json_vocab)
    need = _brute_force_min_tokens(grammar, json_vocab)[grammar.dfa.initial]
    assert 3 <= need <= 12
    rng = random.Random(0)
    for budget in range(need, need + 8):
        for _ in range(25):
            out, n, m = _walk(grammar, json_vocab, budget, rng)
            assert n <= budget and grammar.matches(out), (budget, out)
            assert m.is_terminated() or m.is_accepting()


def test_budgeted_mask_is_exact(json_vocab: Vocabulary) -> None:
    """A token is allowed iff acceptance stays reachable in the remaining budget after it."""
    grammar = compile_json_schema(SCHEMA, json_vocab)
    dist = _brute_force_min_tokens(grammar, json_vocab)
    index = grammar.token_index
    rng = random.Random(1)
    for budget in (dist[grammar.dfa.initial], dist[grammar.dfa.initial] + 3, 20):
        for _ in range(10):
            m = grammar.matcher(max_tokens=budget)
            while not m.is_terminated():
                left = m.remaining_tokens()
                row = index.next_states(m.state)
                expected = {
                    t
                    for t in range(json_vocab.vocab_size)
                    if row[t] >= 0
                    and (t in json_vocab.eos_token_ids or dist[int(row[t])] <= left - 1)
                }
                allowed = _allowed(m, json_vocab.vocab_size)
                assert set(allowed) == expected
                assert m.validate(allowed) >= min(1, len(allowed))
                tok = rng.choice(allowed)
                assert m.advance(tok)
    b = CompletionBudget(index)
    for s, d in dist.items():
        if d < 30:
            assert b.min_tokens(s) == d


def test_generous_budget_equals_unbudgeted(json_vocab: Vocabulary) -> None:
    grammar = compile_json_schema(SCHEMA, json_vocab)
    rng = random.Random(2)
    for _ in range(20):
        free, budgeted = grammar.matcher(), grammar.matcher(max_tokens=10_000)
        assert budgeted.is_budgeted
        for _ in range(60):
            allowed = _allowed(free, json_vocab.vocab_size)
            assert allowed == _allowed(budgeted, json_vocab.vocab_size)
            if free.is_terminated():
                break
            tok = rng.choice(allowed)
            assert free.advance(tok) and budgeted.advance(tok)


def test_budget_refuses_in_advance_and_validate(json_vocab: Vocabulary) -> None:
    grammar = compile_regex(r"(ab|a)*c", json_vocab)
    ids = {t: i for i, t in enumerate(json_vocab.token_bytes)}
    a, b, c = ids[b"a"], ids[b"b"], ids[b"c"]
    m = grammar.matcher(max_tokens=2)
    assert m.validate([a, b, c]) == 1  # "a" then only "c" fits
    assert m.advance(a) and not m.advance(b) and m.num_accepted_tokens == 1
    assert _allowed(m, json_vocab.vocab_size) == [c]
    assert m.advance(c) and m.is_terminated() and m.remaining_tokens() == 0
    assert _allowed(m, json_vocab.vocab_size) == [0]  # only EOS
    m.rollback(2)
    assert m.remaining_tokens() == 2 and m.advance(a)
    assert not m.advance(a)  # "aa" would need a third token ("c")


def test_budget_zero_on_accepting_state_terminates(json_vocab: Vocabulary) -> None:
    grammar = compile_regex(r"a+", json_vocab)
    ids = {t: i for i, t in enumerate(json_vocab.token_bytes)}
    m = grammar.matcher(max_tokens=1)
    assert m.advance(ids[b"a"]) and m.is_accepting() and m.is_terminated()
    assert not m.advance(ids[b"a"]) and m.advance(0)


def test_infeasible_budget_is_ignored(json_vocab: Vocabulary) -> None:
    grammar = compile_json_schema(SCHEMA, json_vocab)
    m = grammar.matcher(max_tokens=1)
    assert not m.is_budgeted
    assert _allowed(m, json_vocab.vocab_size) == _allowed(grammar.matcher(), json_vocab.vocab_size)


def test_vocabulary_without_single_bytes_uses_token_search() -> None:
    vocab = Vocabulary(
        [b"<eos>", b"ab", b"ba", b"abab", b"b", b"aba"], eos_token_ids=[0], special_token_ids=[0]
    )
    grammar = compile_regex(r"(ab)+a", vocab)  # needs "aba", or "ab"+"ab"+... ending in "a"
    m = grammar.matcher(max_tokens=1)
    assert m.is_budgeted and _allowed(m, vocab.vocab_size) == [5]
    m = grammar.matcher(max_tokens=2)
    assert set(_allowed(m, vocab.vocab_size)) == {1, 3, 5}
    out, n, m = _walk(grammar, vocab, 2, random.Random(0))
    assert grammar.matches(out) and n <= 2


@pytest.mark.slow
def test_tiny_budget_random_walks_smollm2(smollm2_vocab: Vocabulary) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"enum": ["alpha", "beta", "日本"]}, "minItems": 2},
        },
        "required": ["name", "age", "tags"],
    }
    grammar = compile_json_schema(schema, smollm2_vocab)
    b = CompletionBudget(grammar.token_index)
    need = b.min_tokens(grammar.dfa.initial)
    assert need < 30
    rng = random.Random(5)
    for budget in (need, need + 2, need + 10):
        for _ in range(5):
            out, n, _ = _walk(grammar, smollm2_vocab, budget, rng)
            assert n <= budget and grammar.matches(out), (budget, out)


def test_depth_first_completions_keep_tiny_budgets_sound(
    json_vocab: Vocabulary, monkeypatch
) -> None:
    """Past ``MAX_BYTE_BFS_STATES`` a completion is found depth-first (not the shortest): the
    witnesses only loosen, so every tiny-budget walk still ends on an accepted document within
    its budget and never meets an empty mask (a bound of 1 sends every search depth-first)."""
    from structgen.fsm import clear_cache
    from structgen.fsm.index import budget as budget_mod

    monkeypatch.setattr(budget_mod, "MAX_BYTE_BFS_STATES", 1)
    clear_cache()  # a fresh token index, so fresh budget tables under the bound
    try:
        grammar = compile_json_schema(SCHEMA, json_vocab)
        need = _brute_force_min_tokens(grammar, json_vocab)[grammar.dfa.initial]
        rng = random.Random(1)
        for budget in range(need + 4, need + 12):
            for _ in range(10):
                out, n, m = _walk(grammar, json_vocab, budget, rng)
                assert n <= budget and grammar.matches(out), (budget, out)
                assert m.is_terminated() or m.is_accepting()
    finally:
        clear_cache()


def _reachable(grammar, limit: int = 4000) -> list[int]:
    """Every state reachable from the initial one over non-EOS tokens (at most ``limit``)."""
    index, vocab = grammar.token_index, grammar.token_index.vocab
    seen, todo = {grammar.dfa.initial}, [grammar.dfa.initial]
    while todo:
        row = index.next_states(todo.pop())
        for t in np.nonzero(row >= 0)[0].tolist():
            z = int(row[t])
            if t not in vocab.eos_token_ids and z not in seen:
                seen.add(z)
                todo.append(z)
        assert len(seen) <= limit
    return sorted(seen)


def _exact_budget_grammars(json_vocab: Vocabulary, monkeypatch) -> list:
    """Small grammars for the exhaustive comparison: nested JSON, alternations a greedy
    completion misjudges, a copied string field with ``maxLength`` on the ``INTERSECT``
    path (the per-document AND states the quick walk exists for), a vocabulary without
    one-byte tokens."""
    from structgen.fsm.compiler import compile_spec
    from structgen.fsm.json_schema import copy as copy_mod
    from structgen.fsm.json_schema.copy import CopyJsonSchema

    monkeypatch.setattr(copy_mod, "ENUMERATE_MAX_SPANS", 0)  # keep the INTERSECT path
    copied = CopyJsonSchema(
        {
            "type": "object",
            "properties": {"v": {"type": "string", "maxLength": 4}, "n": {"type": "integer"}},
            "required": ["v", "n"],
        },
        copy_from=("ab a1 e 12",),
    )
    pairs = [(json_vocab, compile_json_schema(SCHEMA, json_vocab))]
    pairs.append((json_vocab, compile_spec(copied, json_vocab)))
    for pattern in (r"(ab|a)*c", r"a{3,6}b|c{2}|(e[0-9]){2,3}\}"):
        pairs.append((json_vocab, compile_regex(pattern, json_vocab)))
    bare = Vocabulary(
        [b"<eos>", b"ab", b"ba", b"abab", b"b", b"aba"], eos_token_ids=[0], special_token_ids=[0]
    )
    pairs.append((bare, compile_regex(r"(ab)+a|b{3}", bare)))
    return pairs


def test_budgeted_masks_equal_the_brute_force_on_every_state(json_vocab, monkeypatch) -> None:
    """For every reachable state and every remaining budget from 0 past the state's need,
    queried in a shuffled order on a fresh table (generous and tight queries interleaved,
    so memoised quick walks and searches meet each other): the mask is exactly the tokens
    after which acceptance is reachable within ``remaining - 1`` tokens (EOS on accepting
    states), ``within`` is exact, and every quick witness is a real upper bound."""
    from structgen.fsm import clear_cache

    clear_cache()
    try:
        for vocab, grammar in _exact_budget_grammars(json_vocab, monkeypatch):
            index, dfa = grammar.token_index, grammar.dfa
            dist = _brute_force_min_tokens(grammar, vocab)
            states = _reachable(grammar)
            top = max(d for d in dist.values() if d < INF) + 2
            queries = [(s, r) for s in states for r in range(top + 1)]
            queries += [(s, 10_000) for s in states]
            random.Random(3).shuffle(queries)
            b = CompletionBudget(index)
            eos = vocab.eos_token_ids
            for s, r in queries:
                row = index.next_states(s)
                expected = {
                    t
                    for t in np.nonzero(row >= 0)[0].tolist()
                    if (t in eos and dfa.is_accepting(s))
                    or (t not in eos and dist[int(row[t])] <= r - 1)
                }
                words = b.mask(s, r)
                if words is None:
                    words = index.bitmask(s)
                got = set(allowed_ids(words, vocab.vocab_size))
                assert got == expected, (s, r, dist[s])
                if dist[s] <= r and r > 0 and not dfa.is_accepting(s):
                    assert got  # a feasible request always has a token to finish with
                assert b.within(s, r) == (dist[s] <= r), (s, r)
            for s in states:
                assert b._quick_of(s) >= dist[s]  # a witness: never below the fewest tokens
    finally:
        clear_cache()


def test_quick_walks_that_give_up_leave_masks_exact(json_vocab, monkeypatch) -> None:
    """With every quick walk giving up at once (``MAX_QUICK_STATES = 0``), the exact path
    decides every mask, and the masks are the same as the brute force's."""
    from structgen.fsm.index import budget as budget_mod

    monkeypatch.setattr(budget_mod, "MAX_QUICK_STATES", 0)
    grammar = compile_json_schema(SCHEMA, json_vocab)
    dist = _brute_force_min_tokens(grammar, json_vocab)
    index = grammar.token_index
    b = CompletionBudget(index)
    for s in _reachable(grammar):
        for r in (dist[s], dist[s] + 1, 40):
            row = index.next_states(s)
            words = b.mask(s, r)
            if words is None:
                words = index.bitmask(s)
            got = set(allowed_ids(words, json_vocab.vocab_size))
            expected = {
                t for t in np.nonzero(row >= 0)[0].tolist() if t == 0 or dist[int(row[t])] <= r - 1
            }
            assert got == expected, (s, r)
