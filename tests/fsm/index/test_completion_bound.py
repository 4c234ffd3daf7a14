"""The token budget's free bound (``completion_bound``) and the matcher's free path.

Two references: the bound against brute force (every state of the fully built automaton,
its shortest completion in bytes and, on a vocabulary, its exact fewest tokens), on seeded
random terms with every node kind and on the budget tests' grammars; and the matcher's
free path against the slow path (the same matcher with the bound withheld: the budget's
exact masks) on copy grammars over SmolLM2's real vocabulary.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary, compile_regex
from structgen.fsm.index import budget as budget_mod
from structgen.fsm.index.budget import INF, CompletionBudget
from structgen.fsm.index.completion_bound import UNBOUNDED, completion_bound
from structgen.fsm.index.vocabulary import MARKER_BYTE
from structgen.fsm.regex.lazy_dfa import ByteDFA
from structgen.fsm.regex.terms import ALT, AND, BYTES, CONCAT, NOT, REPEAT, UNTIL, TermArena
from structgen.fsm.regex.terms import INF as NO_HI
from tests.fsm._contact_cards import contact_card_grammars
from tests.fsm.index.test_budget import (  # noqa: F401 (json_vocab: a fixture)
    _brute_force_min_tokens,
    _exact_budget_grammars,
    _reachable,
    json_vocab,
)

ALL_BYTES = list(range(256))  # a byte_token table where every byte has a token


def _random_term(arena: TermArena, rng: random.Random, depth: int) -> int:
    """A seeded random term over the bytes a, b, c, with every node kind."""
    if depth == 0 or rng.random() < 0.2:
        return arena.byteset(sum(1 << ord(c) for c in rng.sample("abc", rng.randint(1, 2))))
    kind = rng.choice(["concat", "concat", "alt", "repeat", "until", "and", "not"])
    sub = lambda: _random_term(arena, rng, depth - 1)  # noqa: E731
    if kind == "concat":
        return arena.concat(sub(), sub())
    if kind == "alt":
        return arena.alt([sub() for _ in range(rng.randint(2, 3))])
    if kind == "repeat":
        lo = rng.randint(0, 3)
        hi = rng.choice([lo, lo + 1, lo + 3, NO_HI])
        return arena.repeat(sub(), lo, hi)
    if kind == "until":
        trigger = "".join(rng.choice("abc") for _ in range(rng.randint(1, 3))).encode()
        return arena.until(trigger, sub(), rng.randint(0, len(trigger) - 1))
    if kind == "and":
        return arena.intersect([sub(), sub()])
    return arena.complement(sub())


def _all_states(dfa: ByteDFA, limit: int) -> list[int] | None:
    """Every state reachable from the initial one (None past ``limit``)."""
    seen, todo = {dfa.initial}, [dfa.initial]
    while todo:
        row = dfa.row(todo.pop())
        for z in row[row >= 0].tolist():
            if z not in seen:
                seen.add(z)
                todo.append(z)
        if len(seen) > limit:
            return None
    return sorted(seen)


def _shortest_bytes(dfa: ByteDFA, states: list[int]) -> dict[int, int]:
    """Per state, the length of its shortest accepted string (``INF`` if none)."""
    dist = {s: (0 if dfa.is_accepting(s) else INF) for s in states}
    changed = True
    while changed:
        changed = False
        for s in states:
            row = dfa.row(s)
            best = min((dist[z] + 1 for z in row[row >= 0].tolist()), default=INF)
            if best < dist[s]:
                dist[s], changed = best, True
    return dist


def test_bound_holds_on_random_terms() -> None:
    """On 400 seeded random terms (concatenations, alternations, counted and unbounded
    repetitions, UNTIL, AND, NOT), every live state's shortest completion is at most the
    bound; most terms get a finite bound, so the check bites."""
    finite = 0
    for seed in range(400):
        rng = random.Random(seed)
        arena = TermArena()
        root = _random_term(arena, rng, 4)
        if root == 0 or arena.is_empty(root):
            continue
        dfa = ByteDFA(arena, root)
        states = _all_states(dfa, 400)
        if states is None:
            continue
        bound = completion_bound(dfa, ALL_BYTES)
        if bound >= UNBOUNDED:
            continue
        finite += 1
        dist = _shortest_bytes(dfa, states)
        live = [d for d in dist.values() if d < INF]
        assert max(live) <= bound, (seed, max(live), bound)
    assert finite >= 150


def _reference_bound(dfa: ByteDFA, byte_token: list[int]) -> int:
    """The module docstring's rules written as a plain memoised recursion over the term DAG
    (the reference for the iterative walk; shallow terms only)."""
    arena = dfa.arena
    kind, args = arena.kind, arena.args
    memo: dict[int, tuple[int, int, int, bool]] = {}
    used = [0]
    cap = lambda n: min(n, UNBOUNDED)  # noqa: E731

    def rec(u: int) -> tuple[int, int, int, bool]:
        if u in memo:
            return memo[u]
        k, a = kind[u], args[u]
        if k == BYTES:
            used[0] |= a[0]
            out = (1, 1, 1, False)
        elif k == CONCAT:
            (mh, nh, lh, eh), (mt, nt, lt, et) = rec(a[0]), rec(a[1])
            out = (cap(max(mh + nt, mt)), cap(nh + nt), cap(lh + lt), eh or et)
        elif k == ALT:
            items = [rec(c) for c in a]
            sure = [x[1] for x in items if not x[3]]
            short = min(sure) if sure else max(x[1] for x in items)
            out = (max(x[0] for x in items), short, max(x[2] for x in items))
            out += (all(x[3] for x in items),)
        elif k == REPEAT:
            (mx, nx, lx, ex), lo, hi = rec(a[0]), a[1], a[2]
            longest = (UNBOUNDED if lx else 0) if hi == NO_HI else cap(hi * lx)
            out = (cap(mx + max(lo - 1, 0) * nx), cap(lo * nx), longest, ex and lo > 0)
        elif k == UNTIL:
            trigger, _, cont = a
            for b in trigger:
                used[0] |= 1 << b
            mc, nc, _, ec = rec(cont)
            out = (cap(max(len(trigger) + nc, mc)), cap(len(trigger) + nc), UNBOUNDED, ec)
        elif k == AND:
            least = min(rec(c)[2] for c in a)
            out = (least, least, least, True)
        elif k == NOT:
            rec(a[0])  # its bytes count as met, as the walk's do
            out = (UNBOUNDED, UNBOUNDED, UNBOUNDED, True)
        else:
            out = (0, 0, 0, u == 0)
        memo[u] = out
        return out

    top = rec(dfa.term(dfa.initial))[0]
    if used[0] >> MARKER_BYTE & 1 or any(
        used[0] >> b & 1 and byte_token[b] < 0 for b in range(256)
    ):
        return UNBOUNDED
    return top


def test_bound_equals_the_reference_rules() -> None:
    """The iterative walk gives exactly the recursive reference's bound on 400 seeded random
    terms, with every byte covered and with some bytes uncovered (bound refused)."""
    holes = [b if b != ord("c") else -1 for b in ALL_BYTES]
    finite = 0
    for seed in range(400):
        arena = TermArena()
        root = _random_term(arena, random.Random(seed), 4)
        if root == 0:
            continue
        dfa = ByteDFA(arena, root)
        for table in (ALL_BYTES, holes):
            got = completion_bound(dfa, table)
            assert got == _reference_bound(dfa, table), seed
            finite += got < UNBOUNDED
    assert finite >= 250


def test_bound_equals_the_reference_on_copy_grammars(smollm2_vocab: Vocabulary) -> None:
    """On contact-card copy grammars (thousands of terms each) the bound equals the
    reference's, and is finite."""
    table = budget_mod._vocab_tokens(smollm2_vocab).byte_token
    for grammar in contact_card_grammars(smollm2_vocab, 6, seed=5):
        got = completion_bound(grammar.dfa, table)
        assert got == _reference_bound(grammar.dfa, table) < UNBOUNDED


def test_bound_is_tight_where_it_is_exact() -> None:
    """For ``x{3}`` after a prefix and an alternation the bound equals the true worst state
    (a rule too loose would not show in the soundness test)."""
    arena = TermArena()
    ab = arena.byteset(1 << ord("a") | 1 << ord("b"))
    c = arena.byteset(1 << ord("c"))
    root = arena.concat(c, arena.repeat(ab, 3, 3))  # c[ab]{3}: 4 at the start
    assert completion_bound(ByteDFA(arena, root), ALL_BYTES) == 4
    root = arena.alt([arena.repeat(c, 5, NO_HI), ab])  # c{5,} | [ab]
    assert completion_bound(ByteDFA(arena, root), ALL_BYTES) == 5


def test_bound_refuses_uncovered_bytes_and_markers() -> None:
    """A byte without a one-byte token, or the marker byte, gives no bound."""
    arena = TermArena()
    root = arena.concat(arena.byteset(1 << ord("a")), arena.byteset(1 << 0xFF))
    assert completion_bound(ByteDFA(arena, root), ALL_BYTES) == UNBOUNDED
    arena = TermArena()
    root = arena.repeat(arena.byteset(1 << ord("a")), 2, 2)
    table = list(ALL_BYTES)
    table[ord("a")] = -1
    assert completion_bound(ByteDFA(arena, root), table) == UNBOUNDED
    assert completion_bound(ByteDFA(arena, root), ALL_BYTES) == 2


def test_bound_holds_in_tokens_on_the_budget_grammars(json_vocab, monkeypatch) -> None:  # noqa: F811
    """The budget tests' grammars (nested JSON, a copied field on the INTERSECT path,
    alternations, a vocabulary without one-byte tokens): where a bound is given, every
    reachable state's exact fewest tokens (brute force) is at most it; the vocabulary
    without one-byte tokens gets none."""
    from structgen.fsm import clear_cache

    clear_cache()
    try:
        finite = 0
        for vocab, grammar in _exact_budget_grammars(json_vocab, monkeypatch):
            bound = CompletionBudget(grammar.token_index).free_bound()
            if vocab is not json_vocab:
                assert bound == INF  # no one-byte tokens: the bound does not apply
                continue
            if bound == INF:  # JSON strings take bytes the hand vocabulary has no token of
                continue
            finite += 1
            dist = _brute_force_min_tokens(grammar, vocab)
            assert max(dist[s] for s in _reachable(grammar)) <= bound
        assert finite >= 2
    finally:
        clear_cache()


def _allowed(m, vocab_size: int) -> np.ndarray:
    mask = torch.zeros(1, (vocab_size + 31) // 32, dtype=torch.int32)
    m.fill_bitmask(mask, 0)
    return mask_bits(mask[0], vocab_size)


def _walk_both(grammar, vocab, max_tokens: int, rng: random.Random, monkeypatch) -> int:
    """Walk one random path with the free path and the slow path side by side; every mask,
    step, validation and termination equal. Returns the steps taken on the free path."""
    fast = grammar.matcher(max_tokens=max_tokens)
    with monkeypatch.context() as patch:
        patch.setattr(CompletionBudget, "free_bound", lambda self: INF)
        slow = grammar.matcher(max_tokens=max_tokens)
    assert fast.is_budgeted and slow.is_budgeted and slow._free_until < 0
    free_steps = 0
    for _ in range(max_tokens + 1):
        a, b = _allowed(fast, vocab.vocab_size), _allowed(slow, vocab.vocab_size)
        assert np.array_equal(a, b), fast.num_accepted_tokens
        assert fast.is_terminated() == slow.is_terminated()
        ids = np.nonzero(a)[0].tolist()
        if fast.is_terminated() or not ids:
            break
        free_steps += fast.num_accepted_tokens <= fast._free_until
        probe = [rng.choice(ids), rng.randrange(vocab.vocab_size), rng.choice(ids)]
        assert fast.validate(probe) == slow.validate(probe)
        tok = rng.choice(ids)
        assert fast.advance(tok) and slow.advance(tok)
        if tok in vocab.eos_token_ids:
            break
    return free_steps


def test_free_path_equals_slow_path_on_copy_grammars(smollm2_vocab: Vocabulary, monkeypatch):
    """Copy grammars of contact cards over SmolLM2's vocabulary: random walks under
    ``max_tokens`` 512 (free all the way) and just above the bound (free for two tokens,
    then the budget decides) give the slow path's masks, steps and validations."""
    rng = random.Random(0)
    for grammar in contact_card_grammars(smollm2_vocab, 3, seed=1):
        bound = budget_mod.budget_for(grammar.token_index).free_bound()
        assert bound < 200
        assert _walk_both(grammar, smollm2_vocab, 512, rng, monkeypatch) > 5
        assert _walk_both(grammar, smollm2_vocab, bound + 3, rng, monkeypatch) <= 3


def test_generous_budget_matcher_takes_the_cached_path(json_vocab) -> None:  # noqa: F811
    """Under a free budget the mask is the cached one (``is_mask_cached``, the C fill);
    with the budget binding it is not."""
    grammar = compile_regex(r"[ab]{2,4}c", json_vocab)
    bound = CompletionBudget(grammar.token_index).free_bound()
    assert bound == 3  # 'ab' then 'c' from the start
    ids = {t: i for i, t in enumerate(json_vocab.token_bytes)}
    m, plain = grammar.matcher(max_tokens=bound + 2), grammar.matcher()
    tight = grammar.matcher(max_tokens=bound)
    words = torch.zeros(3, (json_vocab.vocab_size + 31) // 32, dtype=torch.int32)  # one tensor:
    tight.fill_bitmask(words, 2)  # the C fill's tensor
    tight.fill_bitmask(words, 2)
    assert tight.is_budgeted and not tight.is_mask_cached()
    cached = []
    for tok in (b"a", b"b", b"a", b"c"):  # free for two tokens, then the budget steers
        for _ in range(2):  # a state's mask form is cached by the C fill's first use
            m.fill_bitmask(words, 0)
            plain.fill_bitmask(words, 1)
            assert torch.equal(words[0], words[1])
        free = m.num_accepted_tokens <= 1  # (bound + 2) - 1 - bound
        assert m.is_mask_cached() == (free and plain.is_mask_cached())
        cached.append(m.is_mask_cached())
        assert m.advance(ids[tok]) and plain.advance(ids[tok])
    assert cached == [True, True, False, False]


@pytest.mark.parametrize("max_tokens", [1, 2, 3])
def test_infeasible_or_tight_budgets_keep_the_budget(json_vocab, max_tokens) -> None:  # noqa: F811
    """Below the bound nothing changes: ``within`` still decides feasibility."""
    grammar = compile_regex(r"[ab]{2,4}c", json_vocab)
    m = grammar.matcher(max_tokens=max_tokens)
    assert m.is_budgeted == (max_tokens >= 3) and m._free_until < 0  # 3: "a", "b", "c"
