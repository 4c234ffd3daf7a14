"""``Engine()``'s start-up: ``Vocabulary.prepare`` on a background thread
(``structgen.runtime.vocab_prepare``: the result equals a synchronous preparation, failures
surface where the vocabulary is read, unconstrained requests do not wait for it) and the
load with the cyclic garbage collector paused."""

from __future__ import annotations

import gc
import threading

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import GrammarTooComplexError
from structgen.fsm import Vocabulary
from structgen.fsm.compiler import clear_cache
from structgen.runtime.vocab_prepare import VocabularyPreparation

GREEDY = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)


def test_background_prepare_equals_synchronous(tiny_tokenizer):
    # equal vocabularies share compiled grammars (and so the pinning): each its own cache
    clear_cache()
    reference = Vocabulary.from_tokenizer(tiny_tokenizer).prepare()
    clear_cache()
    vocab = Vocabulary.from_tokenizer(tiny_tokenizer)
    prep = VocabularyPreparation(vocab)
    assert prep.result() is vocab and prep.done()
    assert prep.result() is vocab  # any number of reads
    assert vocab._state_table_keys() == reference._state_table_keys()
    assert vocab._prepared_tables == reference._prepared_tables
    for name in ("index_tables", "token_trie", "lexical_masks"):
        assert name in vocab.__dict__
    ref_stats, stats = reference.lexical_masks.stats(), vocab.lexical_masks.stats()
    assert stats["lexical_cache_pinned"] == ref_stats["lexical_cache_pinned"] > 0


class _FailingVocabulary(Vocabulary):
    def prepare(self, warm_up: bool = True):
        raise GrammarTooComplexError("prepare failed (test)")


def test_prepare_error_is_raised_by_every_result(tiny_tokenizer):
    base = Vocabulary.from_tokenizer(tiny_tokenizer)
    vocab = _FailingVocabulary(base.token_bytes, base.eos_token_ids, base.special_token_ids)
    prep = VocabularyPreparation(vocab)
    for _ in range(2):
        with pytest.raises(GrammarTooComplexError, match="prepare failed"):
            prep.result()
    assert prep.done()


def _engine(tiny_llama_dir) -> Engine:
    return Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=4)


def test_unconstrained_requests_do_not_wait_for_prepare(tiny_llama_dir, tiny_engine, monkeypatch):
    release, started = threading.Event(), threading.Event()
    prepare = Vocabulary.prepare

    def blocked(self, warm_up=True):
        started.set()
        assert release.wait(60), "the test never released prepare"
        return prepare(self, warm_up)

    monkeypatch.setattr(Vocabulary, "prepare", blocked)
    engine = _engine(tiny_llama_dir)
    try:
        assert started.wait(60)
        out = engine.generate(["hello world"], GREEDY)[0]  # detokenized text, no wait
        assert not engine._vocab_preparation.done()
        assert out.token_ids == tiny_engine.generate(["hello world"], GREEDY)[0].token_ids
        assert out.text == tiny_engine.generate(["hello world"], GREEDY)[0].text
    finally:
        release.set()
    assert engine.vocab is engine._vocab and "_prepared_tables" in engine.vocab.__dict__
    constrained = engine.generate(["hello"], GREEDY, {"type": "integer"})[0]
    reference = tiny_engine.generate(["hello"], GREEDY, {"type": "integer"})[0]
    assert constrained.token_ids == reference.token_ids


def test_engine_surfaces_a_failed_prepare_at_the_first_constrained_request(
    tiny_llama_dir, tiny_engine, monkeypatch
):
    def failing(self, warm_up=True):
        raise GrammarTooComplexError("prepare failed (test)")

    monkeypatch.setattr(Vocabulary, "prepare", failing)
    engine = _engine(tiny_llama_dir)  # the load itself succeeds
    out = engine.generate(["hello world"], GREEDY)[0]
    assert out.token_ids == tiny_engine.generate(["hello world"], GREEDY)[0].token_ids
    for _ in range(2):
        with pytest.raises(GrammarTooComplexError, match="prepare failed"):
            engine.generate(["hello"], GREEDY, {"type": "integer"})
        with pytest.raises(GrammarTooComplexError, match="prepare failed"):
            _ = engine.vocab


@pytest.mark.parametrize("enabled", [True, False])
def test_engine_loads_with_the_collector_paused(tiny_llama_dir, monkeypatch, enabled):
    seen = []
    load = Engine._load

    def recording(self, *a, **k):
        seen.append(gc.isenabled())
        load(self, *a, **k)
        seen.append(gc.isenabled())

    monkeypatch.setattr(Engine, "_load", recording)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        engine = _engine(tiny_llama_dir)
        assert seen == [False, False] and gc.isenabled() == enabled  # the caller's state
        assert engine.vocab is engine._vocab  # no preparation left running after the test
        monkeypatch.setattr(Engine, "_load", lambda *a, **k: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            _engine(tiny_llama_dir)
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
