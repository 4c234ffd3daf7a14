"""The two run stores of ``regex.reused`` are bounded apart: a mix of more ``parse.lower``
runs than ``MAX_ENTRIES`` (one per bounded string body, whitespace option...) does not drop
the grammar lexers' run, and a run dropped and lowered again gives the same masks as a
compile that never used the store (references: ``test_reused``'s brute force over the
automaton, ``test_closed_rules``'s walked grammar)."""

from __future__ import annotations

import json

import numpy as np

from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.grammar import lower
from structgen.fsm.regex import parse, reused
from structgen.fsm.regex.definitions import PLACEHOLDER_BASE
from structgen.fsm.regex.terms import TermArena
from tests.fsm._reference import instance_step
from tests.fsm.grammar.test_closed_rules import _TOKENS, COLD, RECURSIVE, _check, _reference
from tests.fsm.grammar.test_literal_rows import _bits
from tests.fsm.index.test_lexical_masks import _vocab
from tests.fsm.regex.test_reused import (
    PREFIXES,
    _check_masks,
    _empty_store,  # noqa: F401  (autouse: the store emptied)
)


def _lower_closed_run(k: int) -> None:
    """``parse.lower`` of a small run of reusable definitions of its own (kept)."""
    texts = [f"(?:abc|ab{k})+xyz", "(?:" + chr(PLACEHOLDER_BASE) + "|q)*r"]
    parse.lower(chr(PLACEHOLDER_BASE + 1), TermArena(), definitions=texts, reusable={0, 1})


def _compile_recursive(vocab, whitespace="compact"):
    return compile_json_schema(
        RECURSIVE, vocab, strict=False, allow_extra_properties=True, whitespace=whitespace
    )


def test_lexer_run_survives_more_lower_runs_than_the_bound() -> None:
    vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    lower.clear_closed()
    _compile_recursive(vocab)
    lexer_keys = list(reused._lexer_runs)
    assert len(lexer_keys) == 1  # the grammar's lexers kept their run
    for k in range(reused.MAX_ENTRIES + 4):  # a schema mix: more runs than the bound
        _lower_closed_run(k)
    assert len(reused._runs) == reused.MAX_ENTRIES
    assert list(reused._lexer_runs) == lexer_keys
    assert reused.restore(lexer_keys[0], TermArena()) is not None


def test_lower_run_masks_equal_brute_force_after_eviction_and_rebuild(monkeypatch) -> None:
    vocab = _vocab()
    _check_masks(vocab, PREFIXES)  # lowered, kept, then restored
    (key,) = list(reused._runs)
    monkeypatch.setattr(reused._runs, "max_entries", 1)
    _lower_closed_run(0)  # drops the schema's run
    assert reused.restore(key, TermArena()) is None
    _check_masks(vocab, PREFIXES)  # lowered again after the eviction, then restored


def test_lexer_run_masks_equal_the_walked_grammar_after_eviction_and_rebuild(monkeypatch):
    vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    ref_vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    instance = json.dumps(COLD["recursive"]["instance"], separators=(",", ":")).encode()
    lower.clear_closed()
    ref_g = _reference(RECURSIVE, ref_vocab, monkeypatch)
    monkeypatch.setattr(reused._lexer_runs, "max_entries", 1)
    seen, keys = [], []
    for round_ in ("lowered", "restored", "evicted", "lowered again"):
        if round_ == "evicted":
            _compile_recursive(vocab, "flexible")
            assert reused.restore(keys[0], TermArena()) is None  # the flexible run dropped it
            continue
        clear_cache()
        vocab.lexical_masks.clear()
        got = _compile_recursive(vocab).matcher()
        keys += list(reused._lexer_runs)
        ref = ref_g.matcher()
        masks, prefix = [], b""
        while prefix != instance:  # the instance itself, longest token first
            bits = _bits(got, vocab)
            _check(bits, ref_g, ref, ref_vocab, prefix)
            masks.append(bits)
            tid = instance_step(np.flatnonzero(bits).tolist(), vocab, instance[len(prefix) :])
            assert got.advance(tid) and ref.advance(tid)
            prefix += _TOKENS[tid]
        seen.append(masks)
    assert len(set(keys)) == 1 and len(seen) == 3
    assert all(np.array_equal(a, b) for a, b in zip(seen[0], seen[-1], strict=True))
