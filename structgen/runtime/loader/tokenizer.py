"""Tokenizers: built from GGUF metadata (structgen's ``Tokenizer``, cached on disk as a
``tokenizer.json``) or loaded from a Hugging Face folder (through transformers).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from structgen.errors import ModelLoadError
from structgen.runtime.tokenizer import Tokenizer

__all__ = [
    "tokenizer_from_gguf_metadata",
    "load_cached_tokenizer",
    "save_tokenizer_cache",
    "load_hf_tokenizer",
    "load_tokenizer",
]

log = logging.getLogger(__name__)

# llama.cpp `tokenizer.ggml.pre` values whose pre-tokenizer is "digits one by one, then GPT-2 byte
# level" (the StarCoder / SmolLM tokenizer.json: Sequence[Digits(individual_digits=True),
# ByteLevel]).
_DIGITS_THEN_GPT2 = {"smollm", "starcoder", "refact"}
_GPT2 = {"gpt-2", "gpt2", "default"}

_CONTROL, _USER_DEFINED = 3, 4


def _fast_byte_level(meta: dict):
    """Build a byte-level BPE `tokenizers.Tokenizer` directly, or None if this pre-tokenizer is
    unknown.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    pre = meta.get("tokenizer.ggml.pre") or "default"
    if meta.get("tokenizer.ggml.model") != "gpt2" or pre not in _DIGITS_THEN_GPT2 | _GPT2:
        return None
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges") or []]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre in _DIGITS_THEN_GPT2:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    types = meta.get("tokenizer.ggml.token_type") or []
    tok.add_special_tokens(
        [
            AddedToken(t, normalized=False, special=True)
            for t, k in zip(tokens, types)
            if k == _CONTROL
        ]
    )
    tok.add_tokens(
        [
            AddedToken(t, normalized=False, special=False)
            for t, k in zip(tokens, types)
            if k == _USER_DEFINED
        ]
    )
    bos_id = meta.get("tokenizer.ggml.bos_token_id")
    if meta.get("tokenizer.ggml.add_bos_token") and bos_id is not None:
        bos = tokens[bos_id]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def _transformers_backend(meta: dict):
    """Fallback: transformers' GGUF tokenizer builders, fed the metadata we already parsed."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_TOKENIZER_MAPPING,
        convert_gguf_tokenizer,
    )

    tdict = {
        name: meta[f"tokenizer.{key}"]
        for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
        if meta.get(f"tokenizer.{key}") is not None
    }
    try:
        backend, _ = convert_gguf_tokenizer(meta.get("general.architecture", "llama"), tdict)
    except Exception as e:  # noqa: BLE001 - any failure here means we cannot tokenize this file
        raise ModelLoadError(f"cannot build the tokenizer from GGUF metadata: {e}") from e
    return backend


def tokenizer_from_gguf_metadata(meta: dict) -> Tokenizer:
    """Structgen's :class:`~structgen.runtime.tokenizer.Tokenizer` from GGUF ``tokenizer.*``
    metadata (vocabulary arrays included).

    Byte-level BPE vocabularies with a known pre-tokenizer are built directly with
    ``tokenizers``; everything else goes through transformers' GGUF converters (imported
    only then; the result is cached as a ``tokenizer.json`` by the loader).

    Raises:
        ModelLoadError: the metadata has no vocabulary or an unsupported tokenizer model.
    """
    tokens = meta.get("tokenizer.ggml.tokens")
    if not tokens:
        raise ModelLoadError("GGUF file has no tokenizer vocabulary (tokenizer.ggml.tokens)")
    backend = _fast_byte_level(meta) or _transformers_backend(meta)

    def tok_of(key: str):
        i = meta.get(f"tokenizer.ggml.{key}")
        return tokens[i] if i is not None and 0 <= i < len(tokens) else None

    return Tokenizer(
        backend,
        chat_template=meta.get("tokenizer.chat_template") or None,
        bos_token=tok_of("bos_token_id"),
        eos_token=tok_of("eos_token_id"),
        unk_token=tok_of("unknown_token_id"),
        pad_token=tok_of("padding_token_id"),
    )


def load_cached_tokenizer(directory: Path) -> Tokenizer | None:
    """The tokenizer saved in ``directory`` by :func:`save_tokenizer_cache`, or None if
    absent/unreadable.
    """
    if not (directory / "tokenizer.json").is_file():
        return None
    try:
        return Tokenizer.from_pretrained(directory)
    except ModelLoadError as e:  # a corrupt cache entry is rebuilt, never fatal
        log.warning("ignoring unreadable tokenizer cache %s: %s", directory, e)
        return None


def save_tokenizer_cache(tok, directory: Path) -> None:
    """Save atomically (temp dir + rename); failures (read-only disk) are logged, not raised."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory.parent))
        tok.save_pretrained(str(tmp))
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)
    except OSError as e:
        log.warning("could not cache the tokenizer in %s: %s", directory, e)


# What AutoTokenizer can build a tokenizer from besides tokenizer.json: a SentencePiece model,
# or a tokenizer_config.json naming a slow tokenizer class and its vocabulary files.
_SLOW_TOKENIZER_FILES = (
    "tokenizer_config.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
)
_TOKENIZER_EXTRAS = (  # change what the conversion gives
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
)


def _converted_cache_dir(folder: Path) -> Path:
    """Cache directory of the fast tokenizer converted from ``folder``'s tokenizer files (its
    key changes when any of them does).
    """
    import hashlib

    from structgen.runtime.loader.cache import cache_root, file_cache_key

    names = set(_SLOW_TOKENIZER_FILES) | set(_TOKENIZER_EXTRAS)
    names |= {p.name for p in folder.glob("*.model")}
    keys = [file_cache_key(folder / n) for n in sorted(names) if (folder / n).is_file()]
    digest = hashlib.sha1("\n".join(keys).encode()).hexdigest()[:16]
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in folder.resolve().name)[:60]
    return cache_root() / "tokenizers" / f"{stem}-converted-{digest}"


def _convert_to_fast(folder: Path):
    """A fast tokenizer converted from ``folder``'s slow-tokenizer files by transformers
    (``AutoTokenizer``, ``use_fast=True``), saved in the cache the first time and returned
    as loaded from there (structgen's ``Tokenizer``; transformers' where the cache cannot be
    written).

    Raises:
        ModelLoadError: transformers cannot build a fast tokenizer from these files.
    """
    cache_dir = _converted_cache_dir(folder)
    tok = load_cached_tokenizer(cache_dir)
    if tok is not None:
        return tok
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    except Exception as e:  # noqa: BLE001 - any failure means there is no tokenizer to use
        raise ModelLoadError(
            f"{folder} has no tokenizer.json and its tokenizer files do not convert to a fast "
            f"tokenizer: {type(e).__name__}: {e}"
        ) from e
    if not getattr(tok, "is_fast", False):
        raise ModelLoadError(
            f"{folder}: transformers has no fast conversion for {type(tok).__name__} "
            "(a fast tokenizer is required)"
        )
    save_tokenizer_cache(tok, cache_dir)
    return load_cached_tokenizer(cache_dir) or tok  # the same type as every later load


def load_hf_tokenizer(folder: Path, required: bool = True):
    """The tokenizer of a Hugging Face model folder, as a fast tokenizer.

    ``tokenizer.json`` is loaded as it is; without it, a SentencePiece ``tokenizer.model`` or
    ``tokenizer_config.json`` with vocabulary files is converted by transformers once and
    the result cached (the cache directory of ``structgen.env``).

    Args:
        folder: the model folder.
        required: False returns None for a folder with no tokenizer files at all (a model
            served on token ids only).

    Returns:
        A transformers ``PreTrainedTokenizerFast`` for ``tokenizer.json``, structgen's
        ``Tokenizer`` for converted files, or None (``required=False`` and no tokenizer
        files).

    Raises:
        ModelLoadError: no tokenizer files (``required``), or files that do not load or
            convert.
    """
    from transformers import PreTrainedTokenizerFast

    if not (folder / "tokenizer.json").is_file():
        if any((folder / name).is_file() for name in _SLOW_TOKENIZER_FILES):
            return _convert_to_fast(folder)
        if not required:
            return None
        raise ModelLoadError(
            f"{folder} has no tokenizer (tokenizer.json, tokenizer.model or "
            "tokenizer_config.json with vocabulary files)"
        )
    try:
        return PreTrainedTokenizerFast.from_pretrained(str(folder))
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"cannot load the tokenizer in {folder}: {e}") from e


def load_tokenizer(path: str | os.PathLike | None = None):
    """The tokenizer of a model, without its weights (e.g. for a remote-server client).

    Args:
        path: None for the default SmolLM2 GGUF; a ``.gguf`` file (tokenizer built from
            its metadata, cached on disk like :func:`load_gguf` does); or a Hugging Face
            folder (``tokenizer.json``, or slow-tokenizer files converted once and cached).

    Returns:
        For a GGUF file, structgen's :class:`~structgen.runtime.tokenizer.Tokenizer`; for a
        Hugging Face folder, transformers' ``PreTrainedTokenizerFast``; either with the
        model's chat template.

    Raises:
        ModelNotFoundError: the path does not exist, or the default model is not installed.
        ModelLoadError: the file or folder has no usable tokenizer.
    """
    from structgen.errors import ModelNotFoundError
    from structgen.runtime.loader import default_model_path
    from structgen.runtime.loader.cache import cache_root, file_cache_key
    from structgen.runtime.loader.gguf_file import GGUFFile

    p = Path(default_model_path() if path is None else path).expanduser()
    if not p.exists():
        raise ModelNotFoundError(f"model path {str(p)!r} does not exist")
    if p.is_dir():
        return load_hf_tokenizer(p)
    tok_dir = cache_root() / "tokenizers" / file_cache_key(str(p))
    tok = load_cached_tokenizer(tok_dir)
    g = GGUFFile(str(p), skip_arrays_over=None if tok is None else 4096)
    try:
        meta = g.metadata
        if tok is None:
            tok = tokenizer_from_gguf_metadata(meta)
            save_tokenizer_cache(tok, tok_dir)
    finally:
        g.close()
    if meta.get("tokenizer.chat_template"):
        tok.chat_template = meta["tokenizer.chat_template"]
    return tok
