"""The grammar vocabulary of a cached tokenizer, cached beside it.

``Vocabulary.from_tokenizer`` reads the whole vocabulary out of the tokenizer and decodes
every piece to bytes; for a GGUF file's tokenizer (cached as ``tokenizer.json`` under
``cache_root()/tokenizers/<file key>``) its result depends only on that file, so the token
bytes and special ids are stored next to it (``vocabulary.npz``) and read back on the next
start. The entry also records a digest of the module that decodes pieces
(``structgen/fsm/index/vocabulary.py``): when that code changes, the entry is rebuilt.

The vocabulary's token trie (``Vocabulary.token_trie``, what every grammar's masks walk) is
stored in the same file: its arrays are read back with the tokens instead of being built on
the first constrained request (about 0.13 s for SmolLM2's 49k tokens). Its part of the key is
a digest of ``structgen/fsm/index/trie.py`` and the vocabulary's fingerprint; an entry
without a current trie keeps its tokens, and the trie is built and the entry rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from structgen.fsm import Vocabulary

__all__ = ["VOCABULARY_FILE", "cached_vocabulary"]

VOCABULARY_FILE = "vocabulary.npz"
log = logging.getLogger(__name__)


@functools.cache
def _builder_digest() -> str:
    """Digest of the source that turns a tokenizer into token bytes (the cache entry's key)."""
    import structgen.fsm.index.vocabulary as module

    with open(module.__file__, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


_TRIE_ARRAYS = ("byte", "depth", "skip", "token", "dups", "_bfs", "_parent_bfs")


def _trie_key(vocab: Vocabulary) -> str:
    """Key of a stored trie: the trie builder's source and the vocabulary it was built over."""
    import structgen.fsm.index.trie as module

    with open(module.__file__, "rb") as f:
        return hashlib.sha1(f.read() + vocab.fingerprint.encode()).hexdigest()


def cached_vocabulary(
    tokenizer, eos_token_ids: Iterable[int], directory: Path | None
) -> Vocabulary:
    """``Vocabulary.from_tokenizer(tokenizer, eos_token_ids)``, read from ``directory`` when it
    holds a current entry, else built and saved there.

    Args:
        tokenizer: the model's tokenizer (structgen's or transformers').
        eos_token_ids: the engine's EOS ids.
        directory: the tokenizer's cache directory (``LoadedModel.cache_dir``); None builds
            without caching.

    Returns:
        The vocabulary, equal (same fingerprint) to ``Vocabulary.from_tokenizer``'s.

    Raises: never for the cache itself (an unreadable or stale entry is rebuilt, a failed
    write is logged).
    """
    eos = list(eos_token_ids)
    if directory is not None:
        vocab = _read(directory / VOCABULARY_FILE, eos)
        if vocab is not None:
            if "token_trie" not in vocab.__dict__:  # no current trie: build it, store it
                _write(directory / VOCABULARY_FILE, vocab)
            return vocab
    vocab = Vocabulary.from_tokenizer(tokenizer, eos_token_ids=eos)
    if directory is not None:
        _write(directory / VOCABULARY_FILE, vocab)
    return vocab


def _read(path: Path, eos: list[int]) -> Vocabulary | None:
    """The stored vocabulary (its token trie installed when a current one is stored), or None."""
    from structgen.fsm.index.trie import TokenTrie

    if not path.is_file():
        return None
    try:
        with np.load(path) as z:
            if str(z["builder"]) != _builder_digest():
                return None
            ends, blob = z["ends"], z["blob"].tobytes()
            special = z["special"].tolist()
            starts = [0, *ends[:-1].tolist()]
            tokens = [blob[s:e] for s, e in zip(starts, ends.tolist())]
            vocab = Vocabulary(tokens, eos, special)
            if "trie_key" in z.files and str(z["trie_key"]) == _trie_key(vocab):
                arrays = [z["trie" + name] for name in _TRIE_ARRAYS]
                # what the cached_property would compute, set where it stores its value
                vocab.__dict__["token_trie"] = TokenTrie(len(tokens), *arrays)
        return vocab
    except (OSError, KeyError, ValueError) as e:  # a corrupt entry is rebuilt, never fatal
        log.warning("ignoring unreadable vocabulary cache %s: %s", path, e)
        return None


def _write(path: Path, vocab: Vocabulary) -> None:
    """Save the tokens and the token trie (built here if it was not) atomically (temp file +
    rename); failures (read-only disk) are logged, not raised.
    """
    ends = np.cumsum([len(t) for t in vocab.token_bytes], dtype=np.int64)
    trie = vocab.token_trie
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                builder=np.array(_builder_digest()),
                ends=ends,
                blob=np.frombuffer(b"".join(vocab.token_bytes), dtype=np.uint8),
                special=np.array(sorted(vocab.special_token_ids), dtype=np.int64),
                trie_key=np.array(_trie_key(vocab)),
                **{"trie" + name: getattr(trie, name) for name in _TRIE_ARRAYS},
            )
        os.replace(tmp, path)
    except OSError as e:
        log.warning("could not cache the vocabulary in %s: %s", path, e)
