"""The grammar vocabulary of a cached tokenizer, cached beside it.

``Vocabulary.from_tokenizer`` reads the whole vocabulary out of the tokenizer and decodes
every piece to bytes; for a GGUF file's tokenizer (cached as ``tokenizer.json`` under
``cache_root()/tokenizers/<file key>``) its result depends only on that file, so the token
bytes and special ids are stored next to it (``vocabulary.npz``) and read back on the next
start. The entry also records a digest of the module that decodes pieces
(``structgen/fsm/index/vocabulary.py``): when that code changes, the entry is rebuilt.
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
            return vocab
    vocab = Vocabulary.from_tokenizer(tokenizer, eos_token_ids=eos)
    if directory is not None:
        _write(directory / VOCABULARY_FILE, vocab)
    return vocab


def _read(path: Path, eos: list[int]) -> Vocabulary | None:
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
        return Vocabulary(tokens, eos, special)
    except (OSError, KeyError, ValueError) as e:  # a corrupt entry is rebuilt, never fatal
        log.warning("ignoring unreadable vocabulary cache %s: %s", path, e)
        return None


def _write(path: Path, vocab: Vocabulary) -> None:
    """Save atomically (temp file + rename); failures (read-only disk) are logged, not raised."""
    ends = np.cumsum([len(t) for t in vocab.token_bytes], dtype=np.int64)
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
            )
        os.replace(tmp, path)
    except OSError as e:
        log.warning("could not cache the vocabulary in %s: %s", path, e)
