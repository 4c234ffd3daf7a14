"""Head aliases: a string pattern or format with a length shares its head parts across
character counts (``json_schema.string_length``'s product states, ``TermArena.head_aliases``,
``lexical_masks.alias_key``).

Reference: brute force over the whole vocabulary (each token's bytes walked through an
automaton of the same definitions lowered afresh, one derivative per byte, no row), for
states along strings of several fields that share a pattern under different ``maxLength``s
(one grammar and the shared lexical cache across grammars), near the ends of the bounds
where the counter does restrict the next ``max_depth`` bytes (no alias may serve there), on
a hand-built vocabulary, on SmolLM2's and on the 150k BPE's.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.index import lexical_masks
from structgen.fsm.json_schema import string_length
from structgen.fsm.regex.dfa import regex_to_dfa
from structgen.fsm.regex.terms import CONCAT

WORDS = r"^(?:\S+\s+){0,19}\S+$"


def _check(schema: dict, vocab, prefixes: list[str]) -> tuple[int, int]:
    """Every prefix's mask (``TokenIndex.bitmask`` through the lexical cache) against brute
    force; returns (states keyed by an alias, lexical-cache hits)."""
    grammar = compile_json_schema(schema, vocab)
    index, dfa = grammar.token_index, grammar.dfa
    ref = regex_to_dfa(
        getattr(grammar, "source_pattern", None) or grammar.pattern,
        definitions=grammar.definitions or None,
        eager_rows=0,
    )
    assert ref.arena.head_aliases == {}  # no aliases given: the reference splits nothing
    never = vocab.index_tables[0]
    aliased = 0
    hits0 = vocab.lexical_masks.hits
    depth = vocab.token_trie.max_depth
    for text in prefixes:
        data = text.encode()
        state = dfa.walk(dfa.initial, data)
        start = ref.walk(ref.initial, data)
        assert state >= 0 and start >= 0, text
        key = index.lexical_key(state)
        if key is not None:
            head = dfa.arena.args[dfa.term(state)][0]
            while dfa.arena.kind[head] == CONCAT:  # a spine kept whole: split_key's head
                head = dfa.arena.args[head][0]
            aliased += lexical_masks.alias_key(dfa.arena, head, depth, {}) == key[0]
        got = mask_bits(index.bitmask(state), vocab.vocab_size)
        want = np.zeros(vocab.vocab_size, bool)
        for t, tok in enumerate(vocab.token_bytes):
            if not never[t] and tok:
                want[t] = ref.walk(start, tok) >= 0
        assert np.array_equal(got, want), (text, np.flatnonzero(got != want)[:10])
        assert ref.num_rows_built == 0
    return aliased, vocab.lexical_masks.hits - hits0


def _schema(fields: dict) -> dict:
    return {"type": "object", "properties": fields, "required": list(fields)}


def _prefixes(fields: list[str], texts: list[str]) -> list[str]:
    """Prefixes ending inside each field's string, after ``texts[i]`` cut at each length."""
    out = []
    done = ""
    for name, text in zip(fields, texts):
        head = done + ("{" if not done else ",") + json.dumps(name) + ':"'
        out.extend(head + text[:k] for k in range(len(text) + 1))
        done = head + text + '"'
    return out


def _tiny_vocab(longest: int = 6) -> Vocabulary:
    """Short tokens over words and blanks, a quote and two-byte characters, the longest
    ``longest`` bytes (``#`` runs; 6: every alias serves, slack 16 or more)."""
    tokens = [b"<eos>", b'"', b'",', b" ", b"  ", b"      ", b"a", b"ab", b"abc", b"abcdef"]
    tokens += [b"b a", b"a b", b"x", b"##", b"######", b"\xc3", b"\xa9", b"\xc3\xa9", b"}"]
    tokens += [b"\\", b'\\"', b"\t", b"a\t", b"\\n"]
    alphabet = b"abcdefghij #"  # fillers: the exit tokens' trie is small beside the whole
    tokens += [bytes([x, y]) for x in alphabet for y in alphabet if bytes([x, y]) not in tokens]
    if longest > 6:
        tokens.append(b"#" * longest)
    return Vocabulary(tokens, eos_token_ids=[0])


def test_aliases_claim_only_what_the_counter_leaves_alone() -> None:
    """``_head_aliases`` against its definition, by brute force over a small pattern: a state
    with an alias of slack ``k`` has the same strings and prefixes of at most ``k``
    characters as every state of the same alias (strings enumerated over the pattern's
    alphabet and its product's counts)."""
    import itertools

    regex, lo, hi = r"^(?:ab?\s)*a$", 2, 24
    strings = [
        "".join(p) for n in range(0, 8) for p in itertools.product("ab ", repeat=n)
    ]  # every string of at most 7 characters over the alphabet

    nfa, start, final, _ = string_length._build_nfa(regex, False, "", False)
    closures = [nfa.closure(s) for s in range(len(nfa.eps))]
    moves = [[e for u in cl for e in nfa.edges[u]] for cl in closures]
    accepting = [final in cl for cl in closures]
    states = [start] + sorted(nfa.rest)
    live = {}
    for c in range(hi, -1, -1):
        for q in states:
            live[(q, c)] = (accepting[q] and c >= lo) or (
                c < hi and any(live[(t, c + 1)] for _, t in moves[q])
            )
    aliases = string_length._head_aliases(regex, False, lo, hi, states, moves, accepting, live)
    assert aliases  # some states have a slack of 16 or more

    def step(qs, ch):
        return {t for q in qs for rs, t in moves[q] if any(a <= ord(ch) <= b for a, b in rs)}

    def prefixes_and_words(q, c, k):
        words, prefixes = set(), set()
        for s in strings:
            if len(s) > k:
                continue
            qs = {q}
            for ch in s:
                qs = step(qs, ch)
            n = c + len(s)
            if any(accepting[t] for t in qs) and lo <= n <= hi:
                words.add(s)
            if any(live.get((t, n), False) for t in qs):
                prefixes.add(s)
        return words, prefixes

    by_alias: dict[bytes, list] = {}
    for (q, c), (alias, slack) in aliases.items():
        by_alias.setdefault(alias, []).append((q, c, slack))
    checked = 0
    for members in by_alias.values():
        k = min(7, min(slack for _, _, slack in members))
        first = prefixes_and_words(members[0][0], members[0][1], k)
        for q, c, _ in members[1:4]:
            assert prefixes_and_words(q, c, k) == first, (q, c)
            checked += 1
    assert checked > 10


def test_head_aliases_masks_equal_brute_force_on_a_small_vocabulary() -> None:
    """A pattern under three ``maxLength``s (two sharing one alias's entries, one too short
    for any), on a vocabulary whose longest token is 20 bytes: every mask brute force; the
    aliased keys are hit across counts and fields."""
    clear_cache()
    vocab = _tiny_vocab(longest=20)
    fields = {
        "a": {"type": "string", "pattern": WORDS, "maxLength": 40, "minLength": 1},
        "b": {"type": "string", "pattern": WORDS, "maxLength": 60},
        "c": {"type": "string", "pattern": WORDS, "maxLength": 12},
    }
    texts = ["ab ab  abc a" + " " * 20 + "b", 'abc\\n\\"é a', "a  b ab a ##"]
    for t, sub in zip(texts, fields.values()):
        value = json.loads('"' + t + '"')
        assert jsonschema.validate(value, sub) is None
    aliased, hits = _check(_schema(fields), vocab, _prefixes(list(fields), texts))
    assert aliased >= 20 and hits >= 15


def test_a_slack_under_the_longest_token_is_no_alias(monkeypatch) -> None:
    """A 20-byte token: the states of one word past count 20 of 40 have aliases of slack
    16-19, which must not serve (the run of 20 does not fit there); the mutant that takes
    every alias whatever its slack serves them the head part of the word's first counts,
    and the brute force catches it."""
    clear_cache()
    vocab = _tiny_vocab(longest=20)
    fields = {"a": {"type": "string", "pattern": WORDS, "maxLength": 40}}
    texts = ["a" + "b" * 30]
    aliased, hits = _check(_schema(fields), vocab, _prefixes(["a"], texts))
    assert aliased >= 15 and hits >= 10
    clear_cache()
    vocab = _tiny_vocab(longest=20)
    real = lexical_masks.alias_key
    monkeypatch.setattr(
        lexical_masks, "alias_key", lambda arena, head, depth, memo: real(arena, head, 0, memo)
    )
    with pytest.raises(AssertionError):
        _check(_schema(fields), vocab, _prefixes(["a"], texts))


@pytest.mark.slow
def test_head_aliases_masks_equal_brute_force_on_smollm2(smollm2_vocab) -> None:
    """SmolLM2 (longest token 81 bytes): fields of one pattern under ``maxLength`` 200 and
    100 (its states past count ~17 restrict the 80-byte ``#`` runs: no alias there)."""
    clear_cache()
    fields = {
        "a": {"type": "string", "pattern": WORDS, "maxLength": 200, "minLength": 1},
        "b": {"type": "string", "pattern": WORDS, "maxLength": 100},
        "c": {"type": "string", "format": "email", "maxLength": 160},
    }
    texts = ["REST API" + " " * 30 + "x", "REST " + "#" * 30 + " ok", "ada.lovelace@example.org"]
    prefixes = _prefixes(list(fields), texts)
    aliased, hits = _check(_schema(fields), smollm2_vocab, prefixes[::3] + prefixes[-14:])
    assert aliased >= 10 and hits >= 5


@pytest.mark.slow
def test_head_aliases_masks_equal_brute_force_on_the_150k_bpe() -> None:
    """The 150k BPE (longest token 31 bytes): the same fields, maxLength 100 serving too."""
    from .test_count_masks import _bpe150k_tokenizer

    vocab = Vocabulary.from_tokenizer(_bpe150k_tokenizer())  # skips without the cached BPE
    clear_cache()
    fields = {
        "a": {"type": "string", "pattern": WORDS, "maxLength": 200, "minLength": 1},
        "b": {"type": "string", "pattern": WORDS, "maxLength": 40},
    }
    texts = ["REST API" + " " * 30 + "x", "REST " + "#" * 30]
    prefixes = _prefixes(list(fields), texts)
    aliased, hits = _check(_schema(fields), vocab, prefixes[::4] + prefixes[-8:])
    assert aliased >= 5 and hits >= 2


def test_a_long_spine_splits_at_its_first_part() -> None:
    """An object with many properties keeps a spine whole as a ``CONCAT`` head
    (``terms._SPINE_MAX``); inside a string of it, the split takes the string's part as the
    head (exits ``first`` of the rest of the spine): the same keys as the same string in a
    small object, masks brute force."""
    clear_cache()
    vocab = _tiny_vocab(longest=20)
    names = [f"field_{i:02d}_with_a_long_name" for i in range(16)]
    bounded = {"type": "string", "pattern": WORDS, "maxLength": 60}
    long = _schema({n: bounded if i == 5 else {"type": "string"} for i, n in enumerate(names)})
    short = _schema({names[5]: bounded})
    text = "ab abc " + "#" * 8 + " a"
    inside = _prefixes(names[:6], ["x"] * 5 + [text])[-len(text) - 1 :]
    alone = _prefixes(names[5:6], [text])
    keys = []
    for schema, prefixes in ((long, inside), (short, alone)):
        aliased, _ = _check(schema, vocab, prefixes)
        assert aliased >= 10
        g = compile_json_schema(schema, vocab)
        states = [g.dfa.walk(g.dfa.initial, p.encode()) for p in prefixes]
        keys.append([g.token_index.lexical_key(s) for s in states])
        if schema is long:  # the path taken: a spine kept whole, the head of the term
            arena = g.dfa.arena
            assert arena.kind[arena.args[g.dfa.term(states[3])][0]] == CONCAT
    assert keys[0] == keys[1] and all(k is not None for k in keys[0])
