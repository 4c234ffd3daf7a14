"""The grammar vocabulary cached beside a GGUF file's tokenizer: what the cache gives equals
``Vocabulary.from_tokenizer`` (the reference), a warm start does not rebuild it, and a stale or
corrupt entry is rebuilt."""

from __future__ import annotations

import pytest

from structgen.fsm import Vocabulary
from structgen.runtime.loader import vocab_cache
from structgen.runtime.loader.vocab_cache import VOCABULARY_FILE, cached_vocabulary


@pytest.fixture
def tiny_gguf(tmp_path, monkeypatch):
    from tests.runtime.test_loader import tiny_hf, write_tiny_gguf

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, tiny_hf(False))
    return path


def _same(a: Vocabulary, b: Vocabulary) -> None:
    assert a.fingerprint == b.fingerprint
    assert a.token_bytes == b.token_bytes
    assert a.eos_token_ids == b.eos_token_ids and a.special_token_ids == b.special_token_ids


def test_cached_vocabulary_equals_from_tokenizer_and_is_read_back(tiny_gguf, monkeypatch):
    from structgen.runtime.loader import load_model

    loaded = load_model(str(tiny_gguf))
    assert loaded.cache_dir is not None and (loaded.cache_dir / "tokenizer.json").is_file()
    ref = Vocabulary.from_tokenizer(loaded.tokenizer, eos_token_ids=loaded.eos_token_ids)
    first = cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
    _same(first, ref)
    assert (loaded.cache_dir / VOCABULARY_FILE).is_file()

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the vocabulary was rebuilt, not read from the cache")

    with monkeypatch.context() as m:
        m.setattr(Vocabulary, "from_tokenizer", no_rebuild)
        _same(cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir), ref)
        # other EOS ids: given by the caller, not stored
        other = cached_vocabulary(loaded.tokenizer, [0], loaded.cache_dir)
        assert other.eos_token_ids == {0} and other.token_bytes == ref.token_bytes


def test_stale_or_corrupt_entry_is_rebuilt(tiny_gguf, monkeypatch):
    from structgen.runtime.loader import load_model

    loaded = load_model(str(tiny_gguf))
    ref = Vocabulary.from_tokenizer(loaded.tokenizer, eos_token_ids=loaded.eos_token_ids)
    entry = loaded.cache_dir / VOCABULARY_FILE
    cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
    calls = []
    real = Vocabulary.from_tokenizer

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(Vocabulary, "from_tokenizer", counted)
    # the code that decodes pieces changed: the entry is stale
    monkeypatch.setattr(vocab_cache, "_builder_digest", lambda: "another version")
    _same(cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir), ref)
    assert len(calls) == 1
    entry.write_bytes(b"not an npz file")
    _same(cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir), ref)
    assert len(calls) == 2
    _same(cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, None), ref)  # no cache


def test_engine_builds_its_vocabulary_once_per_file(tiny_gguf, monkeypatch):
    from structgen import Engine

    first = Engine(str(tiny_gguf), max_kv_tokens=64)
    monkeypatch.setattr(
        Vocabulary, "from_tokenizer", lambda *a, **k: pytest.fail("vocabulary rebuilt")
    )
    second = Engine(str(tiny_gguf), max_kv_tokens=64)
    _same(first.vocab, second.vocab)
    assert second.eos_token_ids == first.eos_token_ids


def _same_trie(a, b) -> None:
    from structgen.runtime.loader.vocab_cache import _TRIE_ARRAYS

    assert a.vocab_size == b.vocab_size and a.num_nodes == b.num_nodes > 0
    for name in _TRIE_ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all(), name


def test_token_trie_is_stored_and_read_back_equal_to_a_fresh_build(tiny_gguf, monkeypatch):
    from structgen.fsm.index.trie import TokenTrie
    from structgen.runtime.loader import load_model

    loaded = load_model(str(tiny_gguf))
    ref = Vocabulary.from_tokenizer(loaded.tokenizer, eos_token_ids=loaded.eos_token_ids)
    cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)  # writes
    with monkeypatch.context() as m:
        m.setattr(TokenTrie, "build", lambda *a: pytest.fail("the trie was rebuilt"))
        warm = cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
        assert "token_trie" in warm.__dict__  # installed at read, not built on first use
        got = warm.token_trie
    _same_trie(got, ref.token_trie)  # the reference: TokenTrie.build over the same tokens
    # other EOS ids make other never-allowed ids: that trie is built, not the stored one reused
    other = cached_vocabulary(loaded.tokenizer, [0], loaded.cache_dir)
    _same_trie(other.token_trie, Vocabulary(ref.token_bytes, [0], ref.special_token_ids).token_trie)


def test_stale_trie_is_rebuilt_and_stored_again(tiny_gguf, monkeypatch):
    from structgen.fsm.index.trie import TokenTrie
    from structgen.runtime.loader import load_model

    loaded = load_model(str(tiny_gguf))
    ref = Vocabulary.from_tokenizer(loaded.tokenizer, eos_token_ids=loaded.eos_token_ids)
    assert ref.token_trie.num_nodes > 0  # built before the count starts
    cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
    calls = []
    real = TokenTrie.build.__func__

    def counted(cls, *args):
        calls.append(1)
        return real(cls, *args)

    monkeypatch.setattr(TokenTrie, "build", classmethod(counted))
    real_key = vocab_cache._trie_key
    monkeypatch.setattr(vocab_cache, "_trie_key", lambda v: "another trie builder")
    first = cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
    assert len(calls) == 1  # the stored trie's key is stale: built, and the entry rewritten
    _same_trie(first.token_trie, ref.token_trie)
    monkeypatch.setattr(vocab_cache, "_trie_key", real_key)
    cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
    assert len(calls) == 2  # the entry holds the stale key's trie: rebuilt once more
    warm = cached_vocabulary(loaded.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
    assert len(calls) == 2 and "token_trie" in warm.__dict__
    _same_trie(warm.token_trie, ref.token_trie)
