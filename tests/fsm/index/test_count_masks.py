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

import itertools
import random

import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary, clear_cache, compile_json_schema, compile_regex
from structgen.fsm.index.count_masks import (
    TABLE_CLASSES,
    CountView,
    closed_class,
    long_run_tables,
    prepare_long_runs,
    run_derivative,
    run_lengths,
    walk_class,
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
    got = mask_bits(mask, vocab.vocab_size)
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
    got = mask_bits(packed, vocab.vocab_size)
    assert np.array_equal(got, want)
    assert trie.num_nodes > 0
    assert long_run_tables(vocab, frozenset({(letters, 1)})) is None  # too many: no split


def test_prepared_long_runs_equal_brute_force(vocab) -> None:
    """``prepare_long_runs``' tables of a class: for every bound, the tokens with a longer
    run (brute force over the bytes) less the never-allowed ones, and their trie's tokens
    the same; a domain label's masks read them (not rebuilt) and equal brute force."""
    label = TABLE_CLASSES[0]
    n = prepare_long_runs(vocab, label)
    tables = dict(vocab.__dict__["_count_long"])
    assert n == len(tables) > 10
    never = vocab.index_tables[0]
    runs = [max((len(r) for r in _label_runs(data)), default=0) for data in vocab.token_bytes]
    for hi in range(16, max(runs) + 2):
        want = ~never & (np.array(runs) > hi)
        trie, packed = long_run_tables(vocab, frozenset({(label, hi)}))
        got = mask_bits(packed, vocab.vocab_size)
        assert np.array_equal(got, want), hi
        held = set(trie.token[trie.token >= 0].tolist()) | set(trie.dups[:, 0].tolist())
        assert held == set(np.flatnonzero(want).tolist()), hi
    assert vocab.__dict__["_count_long"] == tables  # every bound read a prepared table
    g = compile_regex(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[a-z]{2,6})*!", vocab)
    for prefix in (b"a", b"a-", b"a" * 20, b"a" + b"-" * 44):
        assert _check(g, vocab, prefix), prefix
    assert vocab.__dict__["_count_long"] == tables


def _label_runs(data: bytes) -> list[bytes]:
    """The maximal runs of ``[A-Za-z0-9-]`` bytes in ``data``."""
    label = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
    return [bytes(g) for k, g in itertools.groupby(data, label.__contains__) if k]


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


def _class_mask(classes: bytes) -> int:
    return sum(1 << b for b in classes)


def _all_live(dfa, state: int, alphabet: bytes, first: bytes, depth: int) -> bool:
    """Every string over ``alphabet`` starting with a byte of ``first`` up to ``depth``
    bytes, and every run of one such byte up to 30, is live from ``state``
    (``ByteDFA.walk`` string by string)."""
    runs = [bytes([b]) * n for b in first for n in range(depth + 1, 31)]
    strings = [
        bytes(s)
        for n in range(1, depth + 1)
        for s in itertools.product(alphabet, repeat=n)
        if s[0] in first
    ]
    return all(dfa.walk(state, s) >= 0 for s in strings + runs)


@pytest.mark.parametrize(
    "pattern, prefix, candidates, want, first",
    [
        (r"[a-c](?:[a-c-]*[a-c])?\.x", b"", b"abc-", b"abc-", b"abc"),  # a label: not - first
        (r"[a-c](?:[a-c-]*[a-c])?\.x", b"a", b"abc-", b"abc-", b"abc-"),  # - inside it
        (r"[a-c]{0,20}x", b"", b"abc", b"", b""),  # a bounded count dies past its bound
        (r"[ab-]*[ab]!", b"-", b"ab-", b"ab-", b"ab-"),
        # the state itself dies on ! (dropped from B: a! is live, a!a is not)
        (r"[ab-]*[ab]!", b"-", b"ab-!", b"ab-", b"ab-"),
        (r"(?:ab)*c", b"", b"abc", b"", b""),  # no byte repeats alone
        (r"a{0,3}b", b"", b"ab", b"", b""),  # a dies after three
        (r"[ab]*", b"", b"ab", b"ab", b"ab"),
        (r"a*|b*", b"", b"ab", b"a", b"a"),  # {a} and {b} each, not both: the first kept
    ],
)
def test_closed_class_is_a_live_class(pattern, prefix, candidates, want, first) -> None:
    """``closed_class`` against brute force: every string over the answer's bytes that
    starts with one of its first bytes (up to 6 bytes, and every run up to 30) is live, the
    other first bytes die at once, and every larger subset of the candidates holding the
    answer has a dead string from those first bytes (the cases leave no larger one)."""
    dfa = regex_to_dfa(pattern, eager_rows=0)
    state = dfa.walk(dfa.initial, prefix)
    got = closed_class(dfa, state, _class_mask(candidates))
    assert got == (_class_mask(want), _class_mask(first)), (pattern, prefix)
    if not want:
        return
    assert _all_live(dfa, state, want, first, 6)
    assert all(dfa.walk(state, bytes([b])) < 0 for b in set(want) - set(first))
    for n in range(len(want) + 1, len(candidates) + 1):
        for sub in itertools.combinations(candidates, n):
            if set(want) <= set(sub):
                lead = bytes(b for b in sub if dfa.walk(state, bytes([b])) >= 0)
                assert not _all_live(dfa, state, bytes(sub), lead, 6), (pattern, sub)


def _canonical_masks_by_class(grammar, vocab, prefixes) -> int:
    """For each prefix's counted state: its canonical state's mask by ``walk_class`` (when
    it answers) equals that state's token-by-token walk (``ByteDFA.walk``); how many
    answered."""
    dfa, index = grammar.dfa, grammar.token_index
    never = vocab.index_tables[0]
    answered = 0
    for prefix in prefixes:
        state = dfa.walk(dfa.initial, prefix)
        canon, bounds = index._counts.canonical(dfa.term(state))
        if not bounds:
            continue
        cs = dfa.state_of_term(canon)
        for byte_mask in {m for m, _ in bounds}:
            mask = walk_class(vocab, dfa, cs, byte_mask)
            if mask is None:
                continue
            answered += 1
            got = mask_bits(mask, vocab.vocab_size)
            want = [
                not never[t] and bool(data) and dfa.walk(cs, data) >= 0
                for t, data in enumerate(vocab.token_bytes)
            ]
            assert np.array_equal(got, np.array(want)), prefix
    return answered


def test_canonical_masks_by_class_equal_token_walks(vocab) -> None:
    g = compile_regex(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[a-z]{2,20})*!", vocab)
    prefixes = [b"a", b"ab", b"a-", b"a" * 20, b"a" + b"-" * 44, b"ab."]
    assert _canonical_masks_by_class(g, vocab, prefixes) >= 4
    g = compile_regex(r"x[a-c]{20,40}y|x[0-9]{5,30}-", vocab)
    assert _canonical_masks_by_class(g, vocab, [b"x", b"xa", b"x99"]) >= 1


def _bpe150k_tokenizer():
    """The 150k byte-level BPE bench_grammar trains (``bpe_150k_tokenizer``) as a
    ``transformers`` tokenizer, when a run left it in the cache (training takes a minute:
    skipped otherwise)."""
    from benchmarks.bench_grammar import BPE_CACHE_PREFIX, bpe_cache_dir

    found = sorted(bpe_cache_dir().glob(f"{BPE_CACHE_PREFIX}*.json"))
    if not found:
        pytest.skip("no cached 150k BPE (run benchmarks/bench_grammar.py --tokenizers bpe150k)")
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_file(str(found[0])), eos_token="<|endoftext|>"
    )


def _bpe150k_vocab() -> Vocabulary:
    """The vocabulary of ``_bpe150k_tokenizer`` (skipped without the cached BPE)."""
    return Vocabulary.from_tokenizer(_bpe150k_tokenizer())


_FORMATS = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "homepage": {"type": "string", "format": "uri"},
    },
    "required": ["email", "homepage"],
}
_FORMATS_PREFIXES = (
    b'{"email":"ada@',
    b'{"email":"ada@ex',
    b'{"email":"ada@example',
    b'{"email":"ada@example.',
    b'{"email":"ada@ex-am',
    b'{"email":"a@b.c","homepage":"https://',
    b'{"email":"a@b.c","homepage":"https://example',
)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["smollm2", "bpe150k"])
def test_formats_counts_on_real_vocabularies(which, request) -> None:
    """An e-mail's and a URI host's domain labels on both bench tokenizers: the counted
    states' masks equal brute force, and their canonical states' masks came by class."""
    if which == "smollm2":
        real, prefixes, least = request.getfixturevalue("smollm2_vocab"), _FORMATS_PREFIXES, 5
    else:  # three of them (150k tokens walked in Python per prefix: seconds)
        real, prefixes, least = _bpe150k_vocab(), _FORMATS_PREFIXES[::3], 2
    clear_cache()
    g = compile_json_schema(_FORMATS, real, strict=False)
    served = [_check(g, real, p) for p in prefixes]
    assert sum(served) >= least
    clear_cache()
    g = compile_json_schema(_FORMATS, real, strict=False)
    assert _canonical_masks_by_class(g, real, prefixes) >= least


def _spy_by_class(monkeypatch) -> list[bool]:
    """Record, per call of ``TokenIndex._walk_by_class``, whether it answered."""
    from structgen.fsm.index.token_index import TokenIndex

    seen: list[bool] = []
    plain = TokenIndex._walk_by_class

    def spy(self, state):
        mask = plain(self, state)
        seen.append(mask is not None)
        return mask

    monkeypatch.setattr(TokenIndex, "_walk_by_class", spy)
    return seen


@pytest.mark.parametrize(
    "pattern, prefixes, answers",
    [
        # an e-mail's local part: lives on [A-Za-z0-9-] and more, loops on them
        (
            r"[A-Za-z0-9_%+-]+(?:\.[A-Za-z0-9_%+-]+)*@[a-z]+\.[a-z]{2,6}!",
            [b"", b"ab", b"ab.", b"a-b", b"ab@", b"ab@x."],
            True,
        ),
        # a URI's scheme (letters first: the [A-Za-z] table), authority and path
        (
            r"[A-Za-z][A-Za-z0-9+.-]*://(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-F]{2})*"
            r"(?:/[A-Za-z0-9._~-]*)*!",
            [b"", b"ab", b"ab://", b"ab://x%", b"ab://x%4", b"ab://xy/", b"ab://xy/a.b"],
            True,
        ),
        # a class state whose closure dies (3 bytes, then `-`): the whole trie is walked
        (r"[A-Za-z0-9]{3}(?:-[a-z0-9]+)*!", [b"", b"a", b"ab"], False),
    ],
)
def test_masks_by_table_class_equal_brute_force(
    vocab, monkeypatch, pattern, prefixes, answers
) -> None:
    """A regex state's first mask by a table class it lives on (``_walk_by_class``)
    equals brute force; it answers for the states whose closure over the class is live,
    and not for the one whose closure dies."""
    vocab.__dict__["_count_class_pay"] = True  # its share of class tokens is under half
    seen = _spy_by_class(monkeypatch)
    g = compile_regex(pattern, vocab)
    for p in prefixes:
        _check(g, vocab, p)
    assert seen, "never tried"
    assert any(seen) == answers, seen


def test_table_class_choice(vocab) -> None:
    """The widest ``TABLE_CLASSES`` class within a closed class serves it; another class
    gets a table only with ``own`` and while fewer than ``_MAX_CLASS_TABLES`` have one,
    else the widest class with a table within it."""
    from structgen.fsm.index import count_masks as cm

    label, letters = TABLE_CLASSES
    vocab.__dict__.pop("_count_class", None)
    assert cm._table_class(vocab, label | _class_mask(b"._%"), False) == label
    assert cm._table_class(vocab, letters | _class_mask(b"0"), False) == letters
    assert cm._table_class(vocab, _class_mask(b"abc"), False) is None
    assert cm._table_class(vocab, _class_mask(b"abc"), True) == _class_mask(b"abc")
    for c in (_class_mask(b"ab"), _class_mask(b"xy"), letters, _class_mask(b"019")):
        cm.class_tables(vocab, c)
    assert cm._table_class(vocab, _class_mask(b"abc"), True) == _class_mask(b"ab")
    assert cm._table_class(vocab, label, False) == letters  # full: the widest within
    assert cm._table_class(vocab, _class_mask(b"cz"), True) is None


def test_class_tables_pay_by_share(vocab) -> None:
    """``class_tables_pay`` against the share of tokens of the label class alone, counted
    token by token (the synthetic vocabulary's is under half; made over half, it pays)."""
    from structgen.fsm.index import count_masks as cm

    label = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
    never = vocab.index_tables[0]
    share = (
        sum(bool(t) and not never[i] and set(t) <= label for i, t in enumerate(vocab.token_bytes))
        / vocab.vocab_size
    )
    assert cm.class_tables_pay(vocab) == (share >= cm.MIN_CLASS_SHARE)
    assert not cm.class_tables_pay(vocab)
    words = [b"<eos>"] + [bytes([97 + i % 26]) * (1 + i // 26) for i in range(300)]
    words += [b"x!" * (1 + i) for i in range(200)]
    assert cm.class_tables_pay(Vocabulary(words, eos_token_ids=[0]))
    more = words + [b"y!" * (1 + i) for i in range(150)]  # 300 of 651: under half
    assert not cm.class_tables_pay(Vocabulary(more, eos_token_ids=[0]))


_URI_PREFIXES = (
    b'{"email":"',
    b'{"email":"a.b',
    b'{"email":"a@b.c","homepage":"',
    b'{"email":"a@b.c","homepage":"https',
    b'{"email":"a@b.c","homepage":"https://',
    b'{"email":"a@b.c","homepage":"https://example',
    b'{"email":"a@b.c","homepage":"https://example.org/',
)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["smollm2", "bpe150k"])
def test_formats_by_table_class_on_real_vocabularies(which, request, monkeypatch) -> None:
    """An e-mail's local part and a URI's scheme, authority, host and path on both bench
    tokenizers: masks equal brute force, most of them by a table class on the 150k BPE,
    none on SmolLM2 (its tables do not pay: ``class_tables_pay``)."""
    if which == "smollm2":
        real, prefixes, least = request.getfixturevalue("smollm2_vocab"), _URI_PREFIXES, 0
    else:  # three of them (150k tokens walked in Python per prefix: seconds)
        real, prefixes, least = _bpe150k_vocab(), _URI_PREFIXES[::3], 3
    clear_cache()
    real.lexical_masks.clear()
    seen = _spy_by_class(monkeypatch)
    g = compile_json_schema(_FORMATS, real, strict=False)
    for p in prefixes:
        _check(g, real, p)
    assert sum(seen) >= least if least else not any(seen), seen
