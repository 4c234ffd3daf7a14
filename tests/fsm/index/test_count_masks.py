"""Masks shared across the counts of a bounded repetition (``structgen/fsm/index/count_masks.py``)
stay exact.

Reference: brute force over every token of the vocabulary, each token's bytes walked through
an independent automaton of the same pattern with no rows built (``ByteDFA.step``), allowed
iff the walk stays alive (EOS iff the state accepts). The synthetic vocabulary holds runs of
every length up to 70 of the repeated classes (so the long-run trie is never empty and a
run just past a count's bound is present), the slow test SmolLM2's real vocabulary on the
states of a domain label (``[A-Za-z0-9-]{0,61}``) and a ``{n,m}`` pattern.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from structgen.fsm import Vocabulary, clear_cache, compile_json_schema, compile_regex
from structgen.fsm.index.count_masks import (
    CountView,
    long_run_tables,
    run_derivative,
    run_lengths,
)
from structgen.fsm.index.lexical_masks import LexicalMaskCache
from structgen.fsm.regex.dfa import regex_to_dfa
from tests.fsm._reference import brute_force_mask


def _vocab() -> Vocabulary:
    rng = random.Random(1)
    alphabet = 'abcxyzAB019-._@!" '
    tokens = {b"<eos>"}
    while len(tokens) < 1500:
        n = rng.randint(1, 8)
        tokens.add("".join(rng.choice(alphabet) for _ in range(n)).encode())
    for n in range(1, 71):  # runs of every length: dashes, letters, digits, mixed
        tokens.update({b"-" * n, b"a" * n, b"9" * n, (b"ab-" * 24)[:n], b"." + b"-" * n})
    tokens.update({b"a" * 40 + b"!", b"x" * 17 + b".", b"-" * 62 + b"a"})
    ordered = sorted(tokens)
    ordered.remove(b"<eos>")
    return Vocabulary([b"<eos>", *ordered], eos_token_ids=[0])


@pytest.fixture
def vocab() -> Vocabulary:
    v = _vocab()
    v.lexical_masks = LexicalMaskCache(v, auto_prepare=False)
    clear_cache()
    return v


def _check(grammar, vocab, prefix: bytes) -> bool:
    """The grammar's mask after ``prefix`` equals brute force; True when the shared-count
    path served it (the state's term has a repetition to share and few long-run tokens)."""
    index = grammar.token_index
    state = grammar.dfa.walk(grammar.dfa.initial, prefix)
    _, bounds = index._counts.canonical(grammar.dfa.term(state))
    shared = bool(bounds) and long_run_tables(vocab, bounds) is not None
    mask = index.bitmask(state)
    got = np.unpackbits(mask.view(np.uint8), bitorder="little")[: vocab.vocab_size].astype(bool)
    want = brute_force_mask(grammar, vocab, prefix)
    assert np.array_equal(got, want), (prefix, np.flatnonzero(got != want)[:10])
    return shared


@pytest.mark.parametrize(
    "pattern, prefixes",
    [
        # a domain label: counts from 61 down, the run-64 tokens past every bound
        (
            r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[a-z]{2,20})*!",
            [b"a", b"ab", b"a-", b"a" * 20, b"a" + b"-" * 44, b"a" * 60, b"ab.", b"ab.xy"],
        ),
        # a lower bound above zero, an upper bound reached inside tokens
        (
            r"x[a-c]{20,40}y|x[0-9]{5,30}-",
            [b"x", b"xa", b"x" + b"ab" * 5, b"x" + b"a" * 25, b"x99"],
        ),
        # two counts of one class side by side, and a count inside a star
        (
            r"(?:[a-z-]{0,30}\.|[a-z]{0,18}@)(?:[a-z]{16,20}!)*",
            [b"", b"a", b"ab-", b"abc", b"a" * 17, b"a.", b"a." + b"b" * 16, b"a.abcx"],
        ),
    ],
)
def test_masks_equal_brute_force_across_counts(vocab, pattern, prefixes) -> None:
    g = compile_regex(pattern, vocab)
    served = [_check(g, vocab, p) for p in prefixes]
    assert any(served), "the shared-count path was never taken"


def test_canonical_leaves_other_terms_alone(vocab) -> None:
    """Unbounded, short and non-byte-class repetitions are no shared counts; a shared
    count's canonical term is unbounded and its own canonical term."""
    for pattern in (r"[a-z]*!", r"[a-z]{0,15}!", r"(?:ab){0,40}!", r"[a-z]+"):
        g = compile_regex(pattern, vocab)
        view = CountView(g.dfa.arena, vocab)
        assert view.canonical(g.dfa.term(g.dfa.initial))[1] == frozenset(), pattern
    g = compile_regex(r"[a-z]{3,40}!", vocab)
    view = CountView(g.dfa.arena, vocab)
    canon, bounds = view.canonical(g.dfa.term(g.dfa.initial))
    assert bounds == frozenset({(sum(1 << b for b in range(97, 123)), 40)})
    assert view.canonical(canon) == (canon, frozenset())
    accepts = regex_to_dfa(r"[a-z]{3,}!", eager_rows=0)
    assert g.dfa.arena.nullable[canon] == accepts.is_accepting(accepts.initial)


def test_run_lengths_and_long_run_tables_equal_brute_force(vocab) -> None:
    letters = sum(1 << b for b in b"abcxyz-")
    runs = run_lengths(vocab, letters)
    for t, data in enumerate(vocab.token_bytes):
        best = cur = 0
        for b in data:
            cur = cur + 1 if (letters >> b) & 1 else 0
            best = max(best, cur)
        assert runs[t] == best, data
    digits = sum(1 << b for b in b"0123456789")
    trie, packed = long_run_tables(vocab, frozenset({(letters, 30), (digits, 45)}))
    never = vocab.index_tables[0]
    want = ~never & ((runs > 30) | (run_lengths(vocab, digits) > 45))
    got = np.unpackbits(packed.view(np.uint8), bitorder="little")[: vocab.vocab_size]
    assert np.array_equal(got.astype(bool), want)
    assert trie.num_nodes > 0
    assert long_run_tables(vocab, frozenset({(letters, 1)})) is None  # too many: no split


@pytest.mark.slow
def test_domain_label_and_counts_on_smollm2(smollm2_vocab) -> None:
    """SmolLM2's vocabulary (3 tokens hold 64 label bytes in a row): an email's domain
    labels and a ``{n,m}`` pattern, masks equal to brute force where counts are shared."""
    clear_cache()
    g = compile_json_schema(
        {
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "code": {"type": "string", "pattern": "^[A-Z]{3}-[a-z0-9]{2,24}$"},
            },
            "required": ["email", "code"],
        },
        smollm2_vocab,
        strict=False,
    )
    served = [
        _check(g, smollm2_vocab, p)
        for p in (
            b'{"email":"ada@',
            b'{"email":"ada@ex',
            b'{"email":"ada@ex-am',
            b'{"email":"ada@example.o',
            b'{"email":"a@b.c","code":"ABC-',
            b'{"email":"a@b.c","code":"ABC-x1',
        )
    ]
    assert sum(served) >= 4


@pytest.mark.parametrize(
    "pattern",
    [
        r"[a-z-]{0,61}[a-z]x|y",
        r"a[a-z-]{3,40}\.(?:[a-z]{2,9}!)*",
        r"(?:[a-z-]{0,20}[a-z])?\.|-{5,9}",
        r"--[a-z-]{2,12}",
        r"-*x",
    ],
)
def test_run_derivative_equals_derivatives_byte_by_byte(pattern) -> None:
    """One ``run_derivative`` by ``b^m`` is the term of ``m`` derivatives by ``b`` (or None:
    a shape it leaves to single steps), for every run length up to past the bound."""
    dfa = regex_to_dfa(pattern, eager_rows=0)
    arena = dfa.arena
    start = dfa.term(dfa.initial)
    seen = 0
    for t in (start, arena.derivative(start, ord("a"))):
        for b in b"-ax.":
            stepped = t
            for m in range(70):
                jumped = run_derivative(arena, t, b, m)
                if jumped is not None:
                    seen += 1
                    assert jumped == stepped, (pattern, t, chr(b), m)
                stepped = arena.derivative(stepped, b)
    assert seen
