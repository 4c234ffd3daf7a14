"""Configurations inside one lexeme take their head part from the vocabulary's shared lexical
cache (``GrammarAutomaton.lexical_key``, ``fsm/index/lexical_masks.py``) and stay exact.

Reference: brute force over every token of the vocabulary, each token's bytes walked one at
a time through an independent automaton of the same grammar compiled without a vocabulary
(no masks, no shared cache, no rows built before), allowed iff the walk stays alive; EOS
iff that grammar ``matches`` the prefix. The vocabulary is ``test_lexical_masks``'s
synthetic one (2,000 tokens), on which a split pays (few tokens hold an exit byte).
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary, clear_cache, compile_json_schema, compile_regex
from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.compile import CompiledCFG
from structgen.fsm.index.lexical_masks import MIN_HEAD_BYTES, LexicalMaskCache
from tests.fsm.index.test_lexical_masks import _vocab

# the inside of a JSON string is one lexeme of the first terminal; its head part is the
# regex string's (exit byte '"')
TREE = {
    "$ref": "#/$defs/node",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name", "children"],
        }
    },
}
# the same string under other surroundings: inside an array, before ',' or ']'
FOREST = {
    "$ref": "#/$defs/t",
    "$defs": {
        "t": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/t"}]}}
    },
}
# WORD is a whole lexeme (no CONCAT inside it): its exit bytes are what may follow it,
# '|' and '>' (rare in the vocabulary: a split pays)
WORDS = r"""
start: list
list: "<" [item ("|" item)*] ">"
item: WORD | list
WORD: /[a-z]+/
"""
# WORD again, before '|' or '>' too, in another structure (left-recursive)
PAIRS = r"""
start: group
group: "<" item ">"
item: WORD | group | item "|" WORD
WORD: /[a-z]+/
"""
# after "<ab" two lexemes read WORD, one with '|' after it and one with '>': the other
# lexeme moves on bytes outside either one's exit bytes, so no split
TWO_RUNS = r"""
start: pair
pair: "<" WORD "|" pair ">" | "<" WORD ">" | WORD
WORD: /[a-z]+/
"""
# one such lexeme alone: the head part of TWO_RUNS's first lexeme, stored by nothing there
ONE_RUN = r"""
start: "<" WORD "|" start | "."
WORD: /[a-z]+/
"""
# tokens that cross WORD's end
CROSSING = [b"|", b">", b"<", b"ab|", b"a>", b"|<", b">|c", b"x|<ab", b"<a"]


@pytest.fixture
def vocab():
    base = _vocab()
    v = Vocabulary([*base.token_bytes, *CROSSING], eos_token_ids=[0])
    v.lexical_masks = LexicalMaskCache(v, auto_prepare=False)
    clear_cache()
    return v


def _reference(make):
    """The same grammar compiled afresh without a vocabulary (its own automaton)."""
    clear_cache()
    return make(None)


def _check(grammar, ref, vocab, prefix: bytes) -> np.ndarray:
    """The mask of ``grammar`` after ``prefix`` equals brute force on ``ref``; returns it."""
    state = grammar.dfa.walk(grammar.dfa.initial, prefix)
    assert state >= 0, prefix
    mask = grammar.token_index.bitmask(state)
    got = mask_bits(mask, vocab.vocab_size)
    start = ref.dfa.walk(ref.dfa.initial, prefix)
    never, eos = vocab.index_tables
    want = np.zeros(vocab.vocab_size, bool)
    for t, data in enumerate(vocab.token_bytes):
        if not never[t] and data:
            s = start
            for b in data:  # one byte at a time, through the reference's own automaton
                s = ref.dfa.step(s, b)
                if s < 0:
                    break
            want[t] = s >= 0
    want[eos] = ref.matches(prefix.decode("utf-8"))
    assert np.array_equal(got, want), (
        prefix,
        [vocab.token_bytes[i] for i in np.flatnonzero(got != want)[:10]],
    )
    return got


def _schema(schema):
    return lambda v: compile_json_schema(schema, v)


def test_recursive_schema_string_states_share_one_entry(vocab) -> None:
    lex = vocab.lexical_masks
    make = _schema(TREE)
    ref = _reference(make)
    tree = make(vocab)
    assert isinstance(tree, CompiledCFG)
    # the lexical path itself: the masks shared across chart nodes (node-free:
    # test_node_free_masks.py) would serve the deeper states
    tree.token_index._node_free_key = None
    _check(tree, ref, vocab, b'{"name":"')
    assert lex.stats()["lexical_cache_misses"] == 1 and lex.stats()["lexical_cache_entries"] == 1
    _check(tree, ref, vocab, b'{"name":"ab\\n')  # the same configuration: its cached mask
    # deeper strings are other configurations (other chart nodes): the same entry serves them
    deeper = (
        b'{"name":"a","children":[{"name":"',
        b'{"name":"a","children":[{"name":"b","children":[]},{"name":"x\\u00e9',
        b'{"name":"a","children":[{"name":"b","children":[{"name":"\\"',
    )
    for prefix in deeper:
        _check(tree, ref, vocab, prefix)
    states = {tree.dfa.walk(tree.dfa.initial, p) for p in (b'{"name":"', *deeper)}
    assert len(states) == 4
    assert lex.stats()["lexical_cache_hits"] == 3
    # another recursive schema, the string before ',' or ']': the entry TREE stored
    forest_ref = _reference(_schema(FOREST))
    forest = _schema(FOREST)(vocab)
    assert isinstance(forest, CompiledCFG)
    got = _check(forest, forest_ref, vocab, b'[["a","')
    quote_comma = vocab.token_bytes.index(b'",')
    assert got[quote_comma]
    assert lex.stats()["lexical_cache_hits"] == 4 and lex.stats()["lexical_cache_misses"] == 1


def test_regex_entry_serves_a_grammar_state(vocab) -> None:
    """A head part stored by a regex state is the CFG lexeme's (one key space)."""
    lex = vocab.lexical_masks
    _check_regex = compile_regex(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"', vocab)
    _check_regex.token_index.bitmask(_check_regex.dfa.walk(_check_regex.dfa.initial, b'"'))
    assert lex.stats()["lexical_cache_entries"] == 1
    make = _schema(TREE)
    ref = _reference(make)
    _check(make(vocab), ref, vocab, b'{"name":"x')
    assert lex.stats()["lexical_cache_hits"] == 1 and lex.stats()["lexical_cache_entries"] == 1


def _lark(text):
    return lambda v: compile_grammar(text, v, syntax="lark")


def test_lark_lexeme_with_what_follows_as_exit(vocab) -> None:
    lex = vocab.lexical_masks
    ref = _reference(_lark(WORDS))
    words = _lark(WORDS)(vocab)
    assert isinstance(words, CompiledCFG)
    got = _check(words, ref, vocab, b"<ab")
    for token in (b"a", b"ab|", b"a>", b"x|<ab"):  # inside WORD, and out of it
        assert got[vocab.token_bytes.index(token)], token
    for prefix in (b"<a|b", b"<a|<<xyz", b"<<a>|bc", b"<<<a|bc"):  # the 3rd: the 1st's
        _check(words, ref, vocab, prefix)
    stats = lex.stats()
    assert stats["lexical_cache_misses"] == 1 and stats["lexical_cache_hits"] == 3, stats
    # another grammar with WORD before ',' or ']': the entry WORDS stored
    pairs_ref = _reference(_lark(PAIRS))
    pairs = _lark(PAIRS)(vocab)
    for prefix in (b"<ab", b"<<a>|bcd", b"<<xy"):
        _check(pairs, pairs_ref, vocab, prefix)
    stats = lex.stats()
    assert stats["lexical_cache_misses"] == 1 and stats["lexical_cache_hits"] == 6, stats


def test_two_lexemes_in_words_stay_unsplit_and_exact(vocab) -> None:
    ref = _reference(_lark(TWO_RUNS))
    runs = _lark(TWO_RUNS)(vocab)
    for prefix in (b"<ab", b"<a|<bcd"):
        state = runs.dfa.walk(runs.dfa.initial, prefix)
        got = _check(runs, ref, vocab, prefix)
        assert len(runs.dfa.lexemes(state)) == 2
        assert runs.token_index.lexical_key(state) is None
        assert got[vocab.token_bytes.index(b"a>")] and got[vocab.token_bytes.index(b"ab|")]
    # a grammar whose lexeme has that key: a miss (the unsplit states stored nothing), exact
    lex = vocab.lexical_masks
    one_ref = _reference(_lark(ONE_RUN))
    one = _lark(ONE_RUN)(vocab)
    got = _check(one, one_ref, vocab, b"<ab")
    assert not got[vocab.token_bytes.index(b"a>")]
    assert lex.stats()["lexical_cache_misses"] == 1 and lex.stats()["lexical_cache_hits"] == 0


def test_capacity_zero_walks_whole_and_stays_exact(vocab) -> None:
    vocab.lexical_masks.set_capacity(0)
    ref = _reference(_lark(WORDS))
    words = _lark(WORDS)(vocab)
    for prefix in (b"<ab", b"<a|b"):
        _check(words, ref, vocab, prefix)
    assert vocab.lexical_masks.stats()["lexical_cache_entries"] == 0


@pytest.mark.slow
def test_recursive_schema_on_smollm2_uses_the_pinned_string_entry(smollm2_vocab) -> None:
    """SmolLM2's vocabulary: a string state of a recursive schema (rules) is served by the
    JSON string entry ``prepare`` pinned from a regex, and equals brute force."""
    lex = smollm2_vocab.lexical_masks
    lex.prepare()
    make = _schema(TREE)
    ref = _reference(make)
    tree = make(smollm2_vocab)
    tree.token_index._node_free_key = None  # the lexical path (no node-free sharing)
    hits = lex.hits
    for prefix in (b'{"name":"Z\xc3\xbcr', b'{"name":"a","children":[{"name":"\\"x'):
        _check(tree, ref, smollm2_vocab, prefix)
    assert lex.hits == hits + 2


class _AlwaysWide(dict):
    """A ``GrammarAutomaton._wide`` that sends every configuration to the full check."""

    def get(self, key, default=None):
        return True


@pytest.mark.parametrize(
    ("make", "prefixes"),
    [
        (_schema(TREE), [b"", b'{"name":"', b'{"name":"a","children":[{"name":"']),
        (_schema(FOREST), [b"", b'[["a","']),
        (_lark(WORDS), [b"", b"<ab"]),
        (_lark(TWO_RUNS), [b"", b"<ab", b"<a|<bcd"]),
    ],
)
def test_narrow_configurations_answer_as_the_full_check(vocab, make, prefixes) -> None:
    """``lexical_key``'s early None (no lexeme ``MIN_HEAD_BYTES`` bytes can start) gives the
    key the full per-lexeme check gives, on every configuration one token step reaches from
    the states after ``prefixes`` (and on those states)."""
    clear_cache()
    g = make(vocab)
    dfa, depth = g.dfa, g.token_index._trie.max_depth
    starts = [dfa.walk(dfa.initial, p) for p in prefixes]
    seen = set(starts)
    for state in starts:
        seen.update(s for s in (dfa.walk(state, d) for d in vocab.token_bytes if d) if s >= 0)
    keys = []
    for state in sorted(seen):
        dfa._wide = {}
        fast = dfa.lexical_key(state, depth)
        dfa._wide = _AlwaysWide()
        assert dfa.lexical_key(state, depth) == fast, state
        keys.append(fast)
    assert None in keys, "no configuration took the early None"
    assert any(k is not None for k in keys), "no configuration has a key"


@pytest.mark.parametrize("make", [_schema(TREE), _lark(TWO_RUNS)])
def test_wide_flags_recorded_with_liveness_match_the_lexer_states(vocab, make) -> None:
    """The ``_wide`` flags ``_live_after`` records (before any ``lexical_key``) are the
    lexer states' own: at least ``MIN_HEAD_BYTES`` bytes can start the state."""
    clear_cache()
    g = make(vocab)
    dfa = g.dfa
    g.token_index.bitmask(dfa.initial)  # rows built: the C core asks every state's flags
    for d in vocab.token_bytes[:2000]:
        s = dfa.walk(dfa.initial, d)
        if s >= 0:
            g.token_index.bitmask(s)
    assert len(dfa._wide) > 3
    terminal_of = {grp: t for t, grp in enumerate(dfa._group)}
    for (grp, s), wide in dfa._wide.items():
        assert wide == (dfa._first(terminal_of[grp], s).bit_count() >= MIN_HEAD_BYTES)
