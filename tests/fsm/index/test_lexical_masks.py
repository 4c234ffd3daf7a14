"""The shared head parts of token masks (``structgen/fsm/index/lexical_masks.py``) stay exact.

Reference: brute force over every token of the vocabulary, each token's bytes walked through
an independent automaton of the same pattern with no rows built (``ByteDFA.step``), allowed
iff the walk stays alive (EOS iff the state accepts). The vocabulary is synthetic (2,000
tokens of letters, digits, punctuation, escapes, quotes and UTF-8, some cut inside a
character) so that a string state's split pays (few tokens hold a quote); the slow test
runs real schemas on SmolLM2's vocabulary.
"""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
import torch

from benchmarks.support import mask_bits
from structgen.fsm import (
    Vocabulary,
    clear_cache,
    compile_choice,
    compile_json_schema,
    compile_regex,
)
from structgen.fsm.index.lexical_masks import LexicalMaskCache, head_key
from structgen.fsm.regex.dfa import regex_to_dfa
from tests.fsm._reference import brute_force_mask


def _vocab() -> Vocabulary:
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;{}[]"
    tokens = {b"<eos>"}
    while len(tokens) < 1900:
        n = rng.randint(1, 6)
        tokens.add("".join(rng.choice(alphabet) for _ in range(n)).encode())
    extra = ['"', '":', '",', '"}', '"]', 'a"', '\\"', "\\n", "\\", "\\u00e9", "é", "ü", "☃x"]
    tokens.update(t.encode() for t in extra)
    tokens.update({"é".encode()[:1], "☃".encode()[:2], b"\x80", b"\x1f", b"ab\x00"})
    ordered = sorted(tokens)
    ordered.remove(b"<eos>")
    return Vocabulary([b"<eos>", *ordered], eos_token_ids=[0])


@pytest.fixture
def vocab() -> Vocabulary:
    v = _vocab()
    v.lexical_masks = LexicalMaskCache(v, auto_prepare=False)
    clear_cache()
    return v


def _check(grammar, vocab, prefix: bytes) -> np.ndarray:
    """The grammar's mask after ``prefix`` equals brute force; returns it unpacked."""
    state = grammar.dfa.walk(grammar.dfa.initial, prefix)
    mask = grammar.token_index.bitmask(state)
    got = mask_bits(mask, vocab.vocab_size)
    want = brute_force_mask(grammar, vocab, prefix)
    assert np.array_equal(got, want), (prefix, np.flatnonzero(got != want)[:10])
    return got


def test_entry_reused_by_a_grammar_with_other_surroundings(vocab) -> None:
    lex = vocab.lexical_masks
    # first: strings in an array, where '",' and '"]' may close the string
    strings = compile_json_schema({"type": "array", "items": {"type": "string"}}, vocab)
    first = _check(strings, vocab, b'["')
    assert lex.stats()["lexical_cache_misses"] == 1
    assert lex.stats()["lexical_cache_entries"] == 1
    # then a string followed by "}" alone, and strings inside objects inside an array: the
    # same head part, other exit tokens
    obj = compile_json_schema(
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        vocab,
    )
    second = _check(obj, vocab, b'{"name":"')
    quote_comma = vocab.token_bytes.index(b'",')
    assert first[quote_comma] and not second[quote_comma]
    arr = compile_json_schema(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"k": {"type": "string"}, "j": {"type": "string"}},
            },
        },
        vocab,
    )
    for prefix in (b'[{"k":"', b'[{"k":"x","j":"ab\\n'):
        _check(arr, vocab, prefix)
    stats = lex.stats()
    assert stats["lexical_cache_hits"] == 3 and stats["lexical_cache_misses"] == 1, stats
    assert stats["lexical_cache_hit_rate"] == pytest.approx(3 / 4)


def test_bounded_string_keys_apart_near_its_bound(vocab) -> None:
    """``maxLength`` below the longest token: not the plain string's entry, still exact."""
    lex = vocab.lexical_masks
    plain = compile_json_schema({"type": "string"}, vocab)
    _check(plain, vocab, b'"')
    short = compile_json_schema({"type": "string", "maxLength": 3}, vocab)
    for prefix in (b'"', b'"a', b'"ab'):
        _check(short, vocab, prefix)
    assert lex.stats()["lexical_cache_hits"] == 0
    # far from its bound (>= the longest token, 6 bytes) the plain entry serves it
    long = compile_json_schema({"type": "string", "maxLength": 40}, vocab)
    _check(long, vocab, b'"abc')
    assert lex.stats()["lexical_cache_hits"] == 1


@pytest.mark.parametrize("min_length", [0, 1, 3])
def test_bounded_strings_take_the_pinned_counted_entries(vocab, min_length) -> None:
    """A string under ``maxLength`` below the longest token (a value's ``JSON_CHAR`` and a
    pattern-less key's): after ``prepare`` each state inside it takes the pinned entry of its
    remaining count (``unit_counts`` over the synthetic vocabulary: escapes, UTF-8 cut inside
    a character), no whole walk, and every mask equals brute force, at any ``minLength``."""
    lex = vocab.lexical_masks
    lex.prepare()
    hits, misses = lex.hits, lex.misses
    value = {"type": "string", "minLength": min_length, "maxLength": 5}
    g = compile_json_schema(value, vocab)
    prefixes = [b'"', b'"a', b'"ab', b'"\\n', b'"\\u00e9x', b'"\xc3\xa9', b'"abcd']
    for prefix in prefixes:
        _check(g, vocab, prefix)
    obj = {"type": "object", "propertyNames": {"maxLength": 4}, "additionalProperties": True}
    k = compile_json_schema(obj, vocab)
    for prefix in (b'{"', b'{"a', b'{"ab\\"'):
        _check(k, vocab, prefix)
    assert lex.misses == misses and lex.hits >= hits + len(prefixes)


def test_unit_counts_against_a_per_token_split() -> None:
    """``unit_counts`` against splitting each token into JSON string characters by hand (an
    escape is 2 or 6 bytes, a UTF-8 character 1-4 by its lead byte), -1 for a token no
    sequence of characters starts with; None for no prefix code or a word's start that
    comes back (``a*b``)."""
    from structgen.fsm.index.lexical_masks import unit_counts
    from structgen.fsm.json_schema.pattern import JSON_CHAR

    tokens = [b"a", b"ab", b'\\"x', b"\\u00", b"\\u00e9z", b"\xc3", b"\xc3\xa9\xc3", b"\xa9", b'"']
    tokens += [b"\\", b"\\q", b"\x1f", "☃é".encode(), b"xyz\\n\\t"]
    want = [1, 2, 2, 1, 2, 1, 2, -1, -1, 1, -1, -1, 2, 5]
    lengths = np.array([len(t) for t in tokens], np.int64)
    flat = np.frombuffer(b"".join(tokens), np.uint8)
    got = unit_counts(regex_to_dfa(JSON_CHAR, eager_rows=0), flat, lengths)
    assert got.tolist() == want
    assert unit_counts(regex_to_dfa("a|ab", eager_rows=0), flat, lengths) is None
    assert unit_counts(regex_to_dfa("a*b", eager_rows=0), flat, lengths) is None


def test_eviction_and_pinned_entries(vocab) -> None:
    lex = vocab.lexical_masks
    words = (vocab.vocab_size + 31) // 32
    lex.set_capacity(4 * words)  # one mask
    a = compile_regex(r'"[a-z]*"', vocab)
    _check(a, vocab, b'"')
    b = compile_regex(r'"[A-Z0-9]*"', vocab)
    _check(b, vocab, b'"')
    stats = lex.stats()
    assert stats["lexical_cache_entries"] == 1 and stats["lexical_cache_bytes"] <= 4 * words
    clear_cache()
    a2 = compile_regex(r'"[a-z]*",', vocab)  # the evicted head again: a miss, still exact
    _check(a2, vocab, b'"ab')
    assert lex.stats()["lexical_cache_misses"] == 3
    lex.prepare()  # pinned: survive clear() and a zero capacity
    pinned = lex.stats()["lexical_cache_pinned"]
    # the two string interiors, and each under every bound below the longest token
    assert pinned == 2 + 2 * (vocab.token_trie.max_depth - 1)
    lex.clear()
    lex.set_capacity(0)
    assert lex.stats()["lexical_cache_entries"] == 0
    assert lex.stats()["lexical_cache_pinned"] == pinned
    s = compile_json_schema({"type": "array", "items": {"type": "string"}}, vocab)
    hits = lex.hits
    _check(s, vocab, b'["x","')
    assert lex.hits == hits + 1
    with pytest.raises(ValueError, match="grammar_cache_bytes"):
        lex.set_capacity(-1)


def _bits(byte_set: bytes) -> int:
    return sum(1 << b for b in set(byte_set))


def test_a_key_read_once_builds_no_exit_trie(vocab) -> None:
    """A first miss whose exit set has no tries yet stores the whole mask (``put_whole``):
    no exit trie is built until the key is read again; then the head part cut from it is
    the whole mask without the exit tokens (the tokens the old path's head part holds), the
    trie is built and the second state's mask is exact."""
    lex = vocab.lexical_masks
    exits = _bits(b"Q")
    a = compile_regex(r"Q[a-z ]*Q", vocab)
    whole = _check(a, vocab, b"Q")
    key = a.token_index.lexical_key(a.dfa.walk(a.dfa.initial, b"Q"))
    assert key is not None and key[1] == exits
    assert lex.kept_exit_tables(exits) is False  # read once: nothing built
    assert lex.stats()["lexical_cache_entries"] == 1
    b = compile_regex(r"xQ[a-z ]*Q!", vocab)  # the same head and exit byte, elsewhere
    hits = lex.hits
    _check(b, vocab, b"xQab")
    assert lex.hits == hits + 1
    tables = lex.kept_exit_tables(exits)
    assert tables
    holds = mask_bits(tables[1], vocab.vocab_size)
    part = lex.get(key)
    got = mask_bits(part, vocab.vocab_size)
    assert np.array_equal(got, whole & ~holds)
    assert whole[holds].any()  # the cut removed tokens (an exit byte: "Q...")


def test_a_refused_exit_set_read_again_walks_whole(vocab) -> None:
    """A whole mask stored under a key whose exit set is then refused (its tokens too many
    for a split to pay): the second read drops the entry (a miss), the state's mask is
    walked whole and exact, and a third state of the set asks nothing of the cache."""
    lex = vocab.lexical_masks
    exits = _bits(b"abcdefghijklmnopqrstuvwxyz")
    _check(compile_regex(r"[^a-z]*[a-z]", vocab), vocab, b"")
    assert lex.kept_exit_tables(exits) is False and lex.stats()["lexical_cache_entries"] == 1
    misses = lex.misses
    _check(compile_regex(r"1[^a-z]*[a-z]", vocab), vocab, b"1")
    assert lex.kept_exit_tables(exits) is None  # refused
    assert lex.misses == misses + 1 and lex.stats()["lexical_cache_entries"] == 0
    lookups = lex.hits + lex.misses
    _check(compile_regex(r"2[^a-z]*[a-z]", vocab), vocab, b"2")
    assert lex.hits + lex.misses == lookups


def test_pin_cuts_a_whole_entry(vocab) -> None:
    """``pin`` of a key stored by ``put_whole`` pins its head part."""
    lex = vocab.lexical_masks
    a = compile_regex(r"Q[a-z ]*Q", vocab)
    whole = a.token_index.bitmask(a.dfa.walk(a.dfa.initial, b"Q"))
    key = a.token_index.lexical_key(a.dfa.walk(a.dfa.initial, b"Q"))
    lex.pin(key)
    assert lex.stats()["lexical_cache_pinned"] == 1
    assert lex.stats()["lexical_cache_entries"] == 0
    holds = lex.kept_exit_tables(key[1])[1]
    assert np.array_equal(lex.get(key), whole & ~holds)


def test_capacity_zero_walks_whole_and_stays_exact(vocab) -> None:
    vocab.lexical_masks.set_capacity(0)
    g = compile_json_schema({"type": "object", "additionalProperties": {"type": "string"}}, vocab)
    for prefix in (b'{"', b'{"k":"', b'{"k":"v","'):
        _check(g, vocab, prefix)
    assert vocab.lexical_masks.stats()["lexical_cache_entries"] == 0


def test_compile_keyword_sets_the_cache_bound(vocab) -> None:
    """``compile_*(..., grammar_cache_bytes=N)`` bounds the vocabulary's cache (evicting down
    to it at once); masks stay exact under the bound; bad bounds are a ConfigError."""
    from structgen.errors import ConfigError

    lex = vocab.lexical_masks
    words = (vocab.vocab_size + 31) // 32
    a = compile_regex(r'"[a-z]*"', vocab)
    _check(a, vocab, b'"')
    b = compile_regex(r'"[A-Z0-9]*"', vocab)
    _check(b, vocab, b'"')
    assert lex.stats()["lexical_cache_entries"] == 2
    c = compile_json_schema(
        {"type": "string", "maxLength": 3}, vocab, grammar_cache_bytes=4 * words
    )
    assert lex.capacity_bytes == 4 * words
    assert lex.stats()["lexical_cache_entries"] == 1  # evicted down to one mask
    _check(c, vocab, b'"')
    assert lex.stats()["lexical_cache_bytes"] <= 4 * words
    compile_choice(["ab", "cd"], vocab, grammar_cache_bytes=0)
    assert lex.capacity_bytes == 0 and lex.stats()["lexical_cache_entries"] == 0
    d = compile_regex(r'"[a-f]*"', vocab, grammar_cache_bytes=0)
    _check(d, vocab, b'"')
    assert lex.stats()["lexical_cache_entries"] == 0
    for bad in (-1, 1.5, True, "64M"):
        with pytest.raises(ConfigError, match="grammar_cache_bytes"):
            compile_regex("a", vocab, grammar_cache_bytes=bad)


def test_head_key_is_structural_across_arenas() -> None:
    one = regex_to_dfa(r'\{"a":"[^"]*"\}', eager_rows=0)
    two = regex_to_dfa(r'\["(?:[^"]*)",1\]', eager_rows=0)
    other = regex_to_dfa(r'\["[^"x]*",1\]', eager_rows=0)

    def key(dfa, prefix):
        term = dfa.term(dfa.walk(dfa.initial, prefix))
        return head_key(dfa.arena, dfa.arena.args[term][0], 8, {})

    assert key(one, b'{"a":"') == key(two, b'["')
    assert key(one, b'{"a":"') != key(other, b'["')


def test_vocabulary_pickles_with_its_cache(vocab) -> None:
    g = compile_json_schema({"type": "string"}, vocab)
    _check(g, vocab, b'"')
    copy = pickle.loads(pickle.dumps(vocab))
    assert copy.lexical_masks.stats()["lexical_cache_entries"] == 0
    assert copy.fingerprint == vocab.fingerprint


@pytest.mark.slow
def test_real_schemas_share_entries_on_smollm2(smollm2_vocab) -> None:
    """SmolLM2's vocabulary: string states of two schemas, the second served by the shared
    (pinned) head part, both equal to brute force."""
    lex = smollm2_vocab.lexical_masks
    lex.prepare()
    clear_cache()
    hits = lex.hits
    a = compile_json_schema(
        {"type": "object", "properties": {"city": {"type": "string", "maxLength": 200}}},
        smollm2_vocab,
    )
    b = compile_json_schema({"type": "array", "items": {"type": "string"}}, smollm2_vocab)
    for g, prefix in ((a, b'{"city":"Z\xc3\xbcr'), (b, b'["a","\\"x')):
        _check(g, smollm2_vocab, prefix)
    assert lex.hits >= hits + 2


def test_whole_rows_for_a_walk_without_pending(vocab, monkeypatch) -> None:
    """A C walk built before PENDING existed is handed whole rows (``row_tables_whole``)."""
    from structgen.fsm.index import trie

    monkeypatch.setattr(trie, "_READS_PENDING", False)
    g = compile_json_schema({"type": "array", "items": {"type": "string"}}, vocab)
    for prefix in (b'["', b'["a\\u00', b'["x","\xc3'):
        _check(g, vocab, prefix)
    assert not g.dfa._pending  # every row built whole


def test_exit_tables_hold_exactly_the_tokens_with_an_exit_byte(vocab) -> None:
    """``tokens_holding`` (the per-token byte sets) and ``exit_tables`` against brute force:
    for exit sets in each of the four 64-byte words, across two of them and all 256 bytes,
    a token is held iff one of its bytes is in the set; the exit trie holds exactly the
    allowable ones (the mask's tokens are its tokens), or the split is refused."""
    lex = vocab.lexical_masks
    never = vocab.index_tables[0]
    rng = random.Random(1)
    sets = [1 << ord('"'), (1 << ord('"')) | (1 << ord("\\")), 1 << 0x80, 1 << 0xFF]
    sets += [1 << 0x1F | 1 << 200, (1 << 256) - 1]
    sets += [sum(1 << b for b in rng.sample(range(256), 3)) for _ in range(6)]
    for exit_mask in sets:
        want = np.array([any((exit_mask >> b) & 1 for b in t) for t in vocab.token_bytes])
        assert np.array_equal(lex.tokens_holding(exit_mask), want), hex(exit_mask)
        tables = lex.exit_tables(exit_mask)
        if tables is None:
            continue
        trie, packed = tables
        held = mask_bits(packed, vocab.vocab_size)
        assert np.array_equal(held, want & ~never), hex(exit_mask)
        in_trie = set(trie.token[trie.token >= 0].tolist()) | set(trie.dups[:, 0].tolist())
        assert in_trie == set(np.flatnonzero(want & ~never).tolist()), hex(exit_mask)


def test_key_part_way_through_a_declared_name_and_a_nonempty_string(vocab, monkeypatch) -> None:
    """A key with extra keys allowed, each followed by its own value: part-way through a
    declared name the state is ``rest of the name | any key's rest`` (an alternation, masked
    as the union of its members'), and any key's rest is ``c c* r`` (split as ``c+ r``,
    keyed as the plain string's ``c*``); a ``minLength: 1`` string likewise. Every mask
    equals brute force.
    """
    from structgen.fsm.index import token_index

    used = []
    walk_alt = token_index.TokenIndex._walk_alt

    def spy(self, state):
        mask = walk_alt(self, state)
        used.append(mask is not None)
        return mask

    monkeypatch.setattr(token_index.TokenIndex, "_walk_alt", spy)
    g = compile_regex(r'\{"(title":"[^"\\]*"\}|titleCase":[0-9]+\]|[^"\\][^"\\]*":\[\])', vocab)
    prefixes = (b'{"', b'{"t', b'{"ti', b'{"title', b'{"titleC', b'{"x', b'{"tx', b'{"title":"a')
    for prefix in prefixes:
        _check(g, vocab, prefix)
    assert any(used)
    plain = compile_json_schema({"type": "string"}, vocab)
    _check(plain, vocab, b'"')
    hits = vocab.lexical_masks.hits
    nonempty = compile_json_schema({"type": "string", "minLength": 1}, vocab)
    _check(nonempty, vocab, b'"')  # c c* '"': the plain string's entry
    assert vocab.lexical_masks.hits == hits + 1


def test_head_digests_shared_with_a_snapshot_equal_the_arenas_own(vocab) -> None:
    """Arenas restored from one snapshot of the reused definitions (``regex.reused``)
    share ``head_key``'s digests of its terms; each digest equals the one the arena alone
    computes (reference: the same call with no shared memo), for every term of three
    schemas' arenas, the shared ones written by one arena and read by the next."""
    schemas = [
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "integer"}}}},
        {"anyOf": [{"type": "object"}, {"type": "string", "minLength": 2}]},
    ]
    arenas = []
    for schema in schemas * 2:
        clear_cache()
        vocab.lexical_masks.clear()
        g = compile_json_schema(schema, vocab, allow_extra_properties=True)
        _check(g, vocab, b"")
        arenas.append(g.dfa.arena)
    restored = [a for a in arenas if a.shared_prefix is not None]
    assert len(restored) >= 5  # the first compile lowers the run, the others restore it
    n, shared = restored[0].shared_prefix
    assert all(a.shared_prefix[1] is shared for a in restored)
    for arena in restored:
        own = arena.shared_prefix
        for u in range(2, arena.num_terms):
            got = head_key(arena, u, 8, {})
            arena.shared_prefix = None
            try:
                want = head_key(arena, u, 8, {})
            finally:
                arena.shared_prefix = own
            assert got == want, u
    assert 0 < len(shared) <= n
    assert set(shared) == set(range(2, n))  # every shared term digested once, kept


def _same_trie(got, want) -> None:
    for name in ("byte", "depth", "skip", "token", "dups", "_bfs", "_parent_bfs"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_exit_trie_from_a_kept_superset(vocab, monkeypatch) -> None:
    """Without the C build (``TokenTrie.holding``), an exit set whose bytes a kept exit
    set's include gets its trie as that trie's ``subtrie``: the arrays of a build by bytes
    (``TokenTrie.build`` without rank), and the string states that split on it have
    brute-force masks."""
    from structgen.fsm.index import lexical_masks
    from structgen.fsm.index.trie import TokenTrie

    monkeypatch.setattr(lexical_masks, "holding_in_c", lambda: False)
    derived = []
    subtrie = TokenTrie.subtrie
    monkeypatch.setattr(
        TokenTrie, "subtrie", lambda self, keep: derived.append(self) or subtrie(self, keep)
    )
    g = compile_json_schema({"type": "array", "items": {"type": "string"}}, vocab)
    state = g.dfa.walk(g.dfa.initial, b'["a')
    exit_mask = g.token_index.lexical_key(state)[1]
    lex, never = vocab.lexical_masks, vocab.index_tables[0]
    superset = lex.exit_tables(exit_mask | 1 << 0x80)[0]  # adds the one token b"\x80"
    assert not derived
    trie = lex.exit_tables(exit_mask)[0]
    assert derived == [superset]
    for prefix in (b'["a', b'["a\\u00', b'["x","\xc3', b'["\\"'):
        _check(g, vocab, prefix)
    _same_trie(trie, TokenTrie.build(vocab.token_bytes, never | ~lex.tokens_holding(exit_mask)))


@pytest.mark.parametrize("in_c", [True, False])
def test_formats_exit_tries_on_smollm2(smollm2_tokenizer, monkeypatch, in_c) -> None:
    """SmolLM2's vocabulary, benchmarks' formats schema (e-mail, date-time, URI, ...) forced
    along its instance from the tables ``prepare`` left, twice (the second compile reads
    the keys the first stored and builds their exit tries): every exit trie its states built
    equals a build by bytes (built by ``TokenTrie.holding`` in C, or without it some
    derived from a kept superset's trie), and masks in the e-mail, URI and pattern strings
    equal brute force."""
    import json
    from pathlib import Path

    from structgen.fsm.index import lexical_masks, trie
    from structgen.fsm.index.trie import TokenTrie
    from tests.fsm._reference import brute_force_mask

    if in_c and not trie.holding_in_c():
        pytest.skip("the C extension is not built")
    if not in_c:
        monkeypatch.setattr(lexical_masks, "holding_in_c", lambda: False)
    held = []
    holding = TokenTrie.holding
    monkeypatch.setattr(
        TokenTrie, "holding", lambda self, *a: held.append(a[1]) or holding(self, *a)
    )

    case = json.loads(
        (Path(__file__).parents[3] / "benchmarks/data/cold_schemas.json").read_text()
    )["formats"]
    # a vocabulary of its own: the session's shared one carries lexical masks and tries
    # other tests left, under which this schema may build no exit trie at all
    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer)
    vocab.prepare(warm_up=False)
    vocab.clear_tables()
    lex, never = vocab.lexical_masks, vocab.index_tables[0]
    before = lex.exit_sets()
    held.clear()  # prepare's own
    derived = []
    subtrie = TokenTrie.subtrie
    monkeypatch.setattr(
        TokenTrie, "subtrie", lambda self, keep: derived.append(self) or subtrie(self, keep)
    )
    text = json.dumps(case["instance"], separators=(",", ":"))
    # twice: the second compile reads the keys the first stored, the whole masks of keys
    # whose exit tries were not built yet (put_whole): their tries are built then
    for _ in range(2):
        clear_cache(memos=True)
        g = compile_json_schema(case["schema"], vocab, strict=False, allow_extra_properties=True)
        m, prefix, checks = g.matcher(), b"", []
        for tid in smollm2_tokenizer.encode(text, add_special_tokens=False):
            buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
            m.fill_bitmask(buf, 0)
            mask = buf[0].numpy().astype("<i4")
            if any(prefix.endswith(s) for s in (b'"ada@', b'"https://', b'"ADA')):
                checks.append((prefix, mask))
            assert m.advance(tid)
            prefix += vocab.token_bytes[tid]
        assert len(checks) == 3
        for prefix, mask in checks:
            got = mask_bits(mask, vocab.vocab_size)
            assert np.array_equal(got, brute_force_mask(g, vocab, prefix)), prefix
    assert (held and not derived) if in_c else (derived and not held)
    for exit_mask in lex.exit_sets() - before:
        tables = lex.exit_tables(exit_mask)
        if tables is not None:
            want = TokenTrie.build(vocab.token_bytes, never | ~lex.tokens_holding(exit_mask))
            _same_trie(tables[0], want)
    vocab.clear_tables()


@pytest.mark.slow
def test_whole_entries_cut_exactly_on_the_150k_bpe() -> None:
    """The formats schema on the 150k BPE forced twice from the tables ``prepare`` left:
    the first request's keys store whole masks and build no exit trie for them, the
    second's read them (their tries built, their head parts cut); masks where the second
    request hit such an entry equal brute force (150k tokens stepped in Python each)."""
    import json
    from pathlib import Path

    from tests.fsm.index.test_count_masks import _bpe150k_tokenizer

    tok = _bpe150k_tokenizer()  # skips without the cached BPE
    vocab = Vocabulary.from_tokenizer(tok)
    vocab.prepare(warm_up=False)
    vocab.clear_tables()
    lex = vocab.lexical_masks
    case = json.loads(
        (Path(__file__).parents[3] / "benchmarks/data/cold_schemas.json").read_text()
    )["formats"]
    ids = tok.encode(json.dumps(case["instance"], separators=(",", ":")), add_special_tokens=False)
    built, checked = [], 0
    for run in range(2):
        clear_cache(memos=True)
        g = compile_json_schema(case["schema"], vocab, strict=False, allow_extra_properties=True)
        m, prefix = g.matcher(), b""
        for tid in ids:
            sets, hits = lex.exit_sets(), lex.hits
            buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
            m.fill_bitmask(buf, 0)
            grew = lex.exit_sets() - sets
            built.append((run, len(grew)))
            if run and grew and lex.hits > hits and checked < 3:  # a whole entry cut here
                mask = buf[0].numpy().astype("<i4")
                got = mask_bits(mask, vocab.vocab_size)
                assert np.array_equal(got, brute_force_mask(g, vocab, prefix))
                checked += 1
            assert m.advance(tid)
            prefix += vocab.token_bytes[tid]
    assert checked >= 1
    first = sum(n for r, n in built if r == 0)
    assert sum(n for r, n in built if r == 1) >= 1 and first >= 1


def _head_key_reference(arena, head, max_depth, memo, bound=None, limit=4096):
    """``head_key`` as it was before its walk was unrolled (main c0a02ce), kept verbatim
    but for ``limit`` (``_MAX_KEY_NODES``): the reference its returns and memos must equal."""
    import hashlib

    from structgen.fsm.index.lexical_masks import repeat_digest
    from structgen.fsm.regex.terms import ALT, AND, BYTES, CONCAT, NOT, REPEAT, UNTIL

    def children(k, a):
        if k in (CONCAT, ALT, AND, NOT):
            return a
        if k == REPEAT:
            return a[:1]
        if k == UNTIL:
            return a[2:]
        return ()

    kind, args = arena.kind, arena.args
    shared_terms, shared = arena.shared_prefix or (0, None)
    top, hi = head, None
    if bound is not None:
        top, hi = bound
    elif kind[head] == REPEAT:
        top, _, hi = args[head]
    stack = [top]
    seen = 0
    while stack:
        u = stack[-1]
        if u in memo:
            stack.pop()
            continue
        if u < shared_terms:
            digest = shared.get(u)
            if digest is not None:
                memo[u] = digest
                stack.pop()
                continue
        k = kind[u]
        missing = [c for c in children(k, args[u]) if c not in memo]
        if missing:
            seen += len(missing)
            if seen > limit:
                return None
            stack.extend(missing)
            continue
        stack.pop()
        a = args[u]
        if k == BYTES:
            data = a[0].to_bytes(32, "little")
        elif k == CONCAT:
            data = memo[a[0]] + memo[a[1]]
        elif k == ALT:
            data = b"".join(sorted([memo[c] for c in a]))
        elif k == REPEAT:
            data = (
                memo[a[0]]
                + a[1].to_bytes(8, "little", signed=True)
                + a[2].to_bytes(8, "little", signed=True)
            )
        elif k == UNTIL:
            data = len(a[0]).to_bytes(4, "little") + a[0] + a[1].to_bytes(4, "little")
            data += memo[a[2]]
        elif k in (AND, NOT):
            data = b"".join([memo[c] for c in a])
        else:
            data = b""
        memo[u] = hashlib.blake2b(bytes((k,)) + data, digest_size=16).digest()
        if u < shared_terms:
            shared[u] = memo[u]
    if hi is None:
        return memo[top]
    return repeat_digest(memo[top], hi, max_depth)


def _random_pattern(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["a", "b", "[a-c]", "[^a]", ".", "ab", "\\d", "é"])
    parts = [_random_pattern(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    op = rng.random()
    if op < 0.3:
        return "(?:" + "|".join(parts) + ")"
    if op < 0.5:
        lo = rng.randint(0, 3)
        hi = rng.choice([str(lo + rng.randint(0, 40)), ""])
        return "(?:" + "".join(parts) + "){" + f"{lo},{hi}" + "}"
    if op < 0.6:
        return "(?:" + "".join(parts) + ")*"
    return "".join(parts)


def _calls_equal_reference(arena, rng: random.Random, limits, calls: int) -> int:
    """Random heads and bounds of ``arena`` (repeats included), each asked of ``head_key``
    and of the reference with their own memos and shared memos: the same returns, the same
    memos after every call. Returns how many calls gave up."""
    import structgen.fsm.index.lexical_masks as lm
    from structgen.fsm.regex.terms import REPEAT

    gave_up = 0
    shared = arena.shared_prefix
    for limit in limits:
        memo, want_memo = {}, {}
        if shared is not None:
            shared[1].clear()
            want_shared = {}
        terms = list(range(2, arena.num_terms))
        for _ in range(calls):
            u = rng.choice(terms[-40:] if rng.random() < 0.5 else terms)
            bound = None
            if arena.kind[u] == REPEAT and rng.random() < 0.3:
                bound = (arena.args[u][0], rng.choice([3, 17, -1]))
            old = lm._MAX_KEY_NODES
            lm._MAX_KEY_NODES = limit
            try:
                got = head_key(arena, u, 16, memo, bound)
            finally:
                lm._MAX_KEY_NODES = old
            if shared is not None:
                got_shared = dict(shared[1])
                shared[1].clear()
                shared[1].update(want_shared)
            want = _head_key_reference(arena, u, 16, want_memo, bound, limit)
            if shared is not None:
                want_shared = dict(shared[1])
                assert got_shared == want_shared, u
            assert got == want, (u, bound, limit)
            assert memo == want_memo, (u, bound, limit)
            gave_up += got is None
    return gave_up


def test_head_key_walk_equals_the_reference_on_random_terms() -> None:
    """``head_key``'s unrolled walk against the implementation it replaced
    (``_head_key_reference``): on the terms of random regexes and the derivatives walked
    through them, with limits small enough that many calls give up part-way (the memo
    then holds what was digested, which decides the next calls)."""
    rng = random.Random(7)
    gave_up = 0
    for _ in range(12):
        dfa = regex_to_dfa(_random_pattern(rng, 4), eager_rows=0)
        state = dfa.initial
        for byte in rng.choices(b"abcd1\xc3\xa9", k=12):
            nxt = dfa.walk(state, bytes([byte]))
            if nxt is None or nxt < 0:
                break
            state = nxt
        gave_up += _calls_equal_reference(dfa.arena, rng, (1, 3, 8, 30, 4096), 60)
    assert gave_up > 50  # the give-ups were exercised


def test_head_key_walk_equals_the_reference_in_product_strings(vocab) -> None:
    """The same comparison on the terms of ``pattern`` + ``maxLength`` strings (the product
    chains whose heads exceed ``_MAX_KEY_NODES``, as in MaskBench's o21135-o21137), walked
    into the string, with the real limit and a small one (the digests shared through a
    snapshot's ``shared_prefix``: ``test_head_digests_shared_with_a_snapshot...``)."""
    rng = random.Random(3)
    gave_up = 0
    for schema in (
        {"type": "string", "pattern": "^[a-z]+(-[a-z0-9]+)*$", "maxLength": 300},
        {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[A-Z]{2}[0-9a-f]+$", "maxLength": 90}
            },
        },
    ):
        clear_cache()
        vocab.lexical_masks.clear()
        g = compile_json_schema(schema, vocab, allow_extra_properties=True)
        dfa = g.dfa
        text = b'"ab-c1-dd' if schema["type"] == "string" else b'{"id":"AB0f1e'
        state = dfa.walk(dfa.initial, text)
        assert state is not None and state >= 0
        gave_up += _calls_equal_reference(dfa.arena, rng, (4096, 64), 80)
    assert gave_up > 0
