"""Jump-forward's retokenization reads ``encode(text)`` from the vocabulary's probe cache
(``jump_forward._encoded``): the plans of seeded random walks equal those planned with
every text encoded afresh (the cache disabled), the cached walk calls ``encode`` fewer
times, and a vocabulary that cannot key the cache is encoded each time."""

from __future__ import annotations

import random

import pytest

from benchmarks.support import planned_walk
from structgen.fsm import Vocabulary, compile_json_schema
from structgen.fsm import jump_forward as jf

_CORPUS = [
    '{"name":"Ada","age":36,"tags":["x","y"],"ok":true}',
    '{"reservationID":"R-1","specialRequests":["window seat","vegan"]}',
    "日本語 日本 日曜日 旅行 本日 the quick brown fox",
] * 30

SCHEMA = {
    "type": "object",
    "properties": {
        "reservationID": {"type": "string", "maxLength": 8},
        "specialRequests": {"type": "array", "items": {"enum": ["window seat", "vegan", "日本"]}},
        "ok": {"type": "boolean"},
    },
    "required": ["reservationID", "specialRequests", "ok"],
}


@pytest.fixture(scope="module")
def bpe():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS, trainer)
    return tok, Vocabulary.from_tokenizer(tok, eos_token_ids=[0])


def _walks(grammar, encode, vocab, seeds):
    return [
        list(planned_walk(grammar.matcher(max_tokens=80), encode, vocab, random.Random(s), 80))
        for s in seeds
    ]


def test_cached_encodes_plan_alike(bpe, monkeypatch):
    tok, vocab = bpe
    grammar = compile_json_schema(SCHEMA, vocab)
    calls = []

    def encode(text: str) -> list[int]:
        calls.append(text)
        return tok.encode(text, add_special_tokens=False).ids

    seeds = range(12)
    jf._probe_caches.clear()
    jf._boundary_caches.clear()
    cached = _walks(grammar, encode, vocab, seeds) + _walks(grammar, encode, vocab, seeds)
    num_cached = len(calls)
    with monkeypatch.context() as m:
        m.setattr(jf, "_encoded", lambda encode, text, vocab: list(encode(text)))
        jf._probe_caches.clear()
        jf._boundary_caches.clear()
        calls.clear()
        fresh = _walks(grammar, encode, vocab, seeds) + _walks(grammar, encode, vocab, seeds)
    assert cached == fresh
    assert sum(bool(p) for walk in fresh for p in walk) > 20  # plans were made
    assert num_cached < len(calls)


def test_uncacheable_vocabulary_encodes_each_time(bpe):
    tok, vocab = bpe

    class Plain:  # no __weakref__ slot: cannot key the per-vocabulary caches
        __slots__ = ()

    calls = []

    def encode(text: str) -> list[int]:
        calls.append(text)
        return [1, 2]

    assert jf._encoded(encode, "ab", Plain()) == [1, 2]
    assert jf._encoded(encode, "ab", Plain()) == [1, 2]
    assert calls == ["ab", "ab"]
    jf._probe_caches.pop(vocab, None)
    assert jf._encoded(encode, "ab", vocab) == [1, 2] == jf._encoded(encode, "ab", vocab)
    assert calls == ["ab", "ab", "ab"]
