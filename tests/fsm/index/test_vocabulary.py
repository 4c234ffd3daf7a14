"""Vocabulary: token bytes from byte-level BPE and SentencePiece-style tokenizers."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    'Structured generation keeps JSON valid: {"a": [1, 2, 3]}.',
    "Ünïcödé text, café, naïve, façade, jalapeño, 日本語のテキスト.",
    "Emoji are fun 😀😨🙏 and so are tabs\tand newlines\n.",
] * 20

TEXTS = [
    "hello world",
    " leading space and trailing ",
    "café 😀 naïve — “quotes”",
    '{"key": "value", "n": -1.5e3}',
    "日本語 and 中文 and 한국어",
    "tabs\tnew\nlines\r\n",
    "unseen: ∑∫√ 🚀🛸 ǅ",
]


def _random_text(rng: random.Random) -> str:
    pool = 'abc xyz{}":,.é日😀🚀\t\n∑'
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 20)))


@pytest.fixture(scope="module")
def byte_level_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>")


@pytest.fixture(scope="module")
def sentencepiece_tokenizer() -> PreTrainedTokenizerFast:
    """Llama-2-style BPE: Metaspace, ``<0xNN>`` byte fallback tokens in the model vocab."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="never", split=True
    )
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(CORPUS, trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["decoder"] = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    }
    tok = Tokenizer.from_str(json.dumps(spec))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="</s>", bos_token="<s>", unk_token="<unk>"
    )


def test_hand_built_vocabulary() -> None:
    vocab = Vocabulary([b"<eos>", b"a", b"\xc3", b""], eos_token_ids=[0], special_token_ids=[0])
    assert vocab.vocab_size == 4 and len(vocab) == 4
    assert vocab.eos_token_ids == frozenset({0}) and vocab.special_token_ids == frozenset({0})
    assert vocab.decode([1, 2]) == b"a\xc3"
    assert len(vocab.fingerprint) == 64
    same = Vocabulary([b"<eos>", b"a", b"\xc3", b""], eos_token_ids=[0], special_token_ids=[0])
    other_eos = Vocabulary([b"<eos>", b"a", b"\xc3", b""], eos_token_ids=[1], special_token_ids=[0])
    assert same.fingerprint == vocab.fingerprint != other_eos.fingerprint
    with pytest.raises(ValueError):
        Vocabulary([b"a"], eos_token_ids=[3])


def test_token_trie_of_tiny_vocab(tiny_vocab: Vocabulary) -> None:
    # allowable: a b ab abc c " \xc3 (EOS, the special token and the empty one are left out)
    trie = tiny_vocab.token_trie
    assert bytes(trie.byte.tolist()) == b'"abcbc\xc3'  # preorder, children by byte
    assert trie.depth.tolist() == [1, 1, 2, 3, 1, 1, 1]
    assert trie.skip.tolist() == [1, 4, 4, 4, 5, 6, 7]
    assert trie.token.tolist() == [7, 2, 4, 5, 3, 6, 8]
    assert trie.dups.shape == (0, 2) and trie.max_depth == 3
    never, eos = tiny_vocab.index_tables
    assert np.flatnonzero(never).tolist() == [0, 1, 9] and eos.tolist() == [0]


def _check_roundtrip(tokenizer, vocab: Vocabulary, text: str, strip_leading_space: bool) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    expected = tokenizer.decode(ids)
    got = vocab.decode(ids).decode("utf-8")
    if strip_leading_space and got.startswith(" "):
        got = got[1:]  # the decoder strips the space the normalizer prepended
    assert got == expected, (text, ids)


def test_byte_level_bpe(byte_level_tokenizer) -> None:
    vocab = Vocabulary.from_tokenizer(byte_level_tokenizer)
    assert vocab.vocab_size == len(byte_level_tokenizer)
    im_end = byte_level_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in vocab.eos_token_ids
    im_start = byte_level_tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert im_start in vocab.special_token_ids
    # every single byte is a token of its own (initial alphabet)
    assert {t for t in vocab.token_bytes if len(t) == 1} == {bytes([b]) for b in range(256)}
    rng = random.Random(0)
    for text in TEXTS + [_random_text(rng) for _ in range(50)]:
        _check_roundtrip(byte_level_tokenizer, vocab, text, strip_leading_space=False)


def test_sentencepiece_style(sentencepiece_tokenizer) -> None:
    vocab = Vocabulary.from_tokenizer(sentencepiece_tokenizer)
    tid = sentencepiece_tokenizer.convert_tokens_to_ids
    assert vocab.token_bytes[tid("<0x0A>")] == b"\n"
    assert vocab.token_bytes[tid("<0xF0>")] == b"\xf0"
    assert vocab.eos_token_ids == frozenset({tid("</s>")})
    assert {tid("<s>"), tid("</s>"), tid("<unk>")} <= vocab.special_token_ids
    spaced = [t for t in sentencepiece_tokenizer.get_vocab() if t.startswith("▁") and len(t) > 1]
    assert spaced and vocab.token_bytes[tid(spaced[0])] == spaced[0].replace("▁", " ").encode()
    rng = random.Random(1)
    for text in TEXTS + [_random_text(rng) for _ in range(50)]:
        if "\r" in text:
            continue
        _check_roundtrip(sentencepiece_tokenizer, vocab, text, strip_leading_space=True)
    # an emoji that is not in the vocabulary is spelled with byte-fallback tokens
    ids = sentencepiece_tokenizer.encode("🚀", add_special_tokens=False)
    assert b"".join(vocab.token_bytes[i] for i in ids).endswith("🚀".encode())


@pytest.mark.slow
def test_smollm2_vocabulary(smollm2_tokenizer, smollm2_vocab: Vocabulary) -> None:
    vocab = smollm2_vocab
    assert vocab.vocab_size == 49152
    assert vocab.eos_token_ids == frozenset({0, 2})
    assert smollm2_tokenizer.convert_tokens_to_ids("<|im_start|>") in vocab.special_token_ids
    rng = random.Random(2)
    for text in TEXTS + [_random_text(rng) for _ in range(100)]:
        _check_roundtrip(smollm2_tokenizer, vocab, text, strip_leading_space=False)


def test_prepare_builds_what_first_masks_read_and_masks_stay_exact(byte_level_tokenizer) -> None:
    """``Vocabulary.prepare`` (per-tokenizer preprocessing) builds the id tables, the token
    trie and its C walk's subtree tables, the lexical cache's byte sets and pinned string
    heads (plain and under each bound); a schema's first masks then build none of them
    again (the same objects after), and every mask along an instance equals brute force
    (``ByteDFA.walk`` of each allowable token's bytes), as on an unprepared vocabulary."""
    from structgen.fsm import clear_cache, compile_json_schema

    vocab = Vocabulary.from_tokenizer(byte_level_tokenizer)
    assert vocab.prepare() is vocab and vocab.prepare() is vocab  # idempotent
    trie = vocab.token_trie
    built = {k: vocab.__dict__[k] for k in ("index_tables", "allowable", "token_trie")}
    assert "subtree_tables" in trie.__dict__
    tables, sets = trie.__dict__["subtree_tables"], vocab.lexical_masks._sets
    pinned = vocab.lexical_masks.stats()["lexical_cache_pinned"]
    assert sets is not None and pinned == 2 + 2 * (trie.max_depth - 1)  # strings, bounded too
    from structgen.fsm.index.count_masks import TABLE_CLASSES, class_tables_pay

    classes = dict(vocab.__dict__.get("_count_class", {}))  # where they pay, all built
    pay = class_tables_pay(vocab)
    assert sorted(classes) == (sorted(TABLE_CLASSES) if pay else [TABLE_CLASSES[0]])

    schema = {
        "type": "object",
        "properties": {"key": {"type": "string"}, "n": {"type": "number"}},
        "required": ["key", "n"],
    }
    ids = byte_level_tokenizer.encode('{"key":"value abc","n":-1.5e3}', add_special_tokens=False)
    never = vocab.index_tables[0]
    for v in (vocab, Vocabulary.from_tokenizer(byte_level_tokenizer)):  # prepared, then not
        clear_cache()
        g = compile_json_schema(schema, v)
        m = g.matcher()
        for tid in ids:
            got = mask_bits(g.token_index.bitmask(m.state), v.vocab_size)
            want = [
                not never[t] and g.dfa.walk(m.state, v.token_bytes[t]) >= 0
                for t in range(v.vocab_size)
            ]
            assert got.tolist() == want
            assert m.advance(tid)
        assert m.is_accepting()
    assert all(vocab.__dict__[k] is obj for k, obj in built.items())
    assert trie.__dict__["subtree_tables"] is tables and vocab.lexical_masks._sets is sets
    assert all(vocab.__dict__["_count_class"][c] is t for c, t in classes.items())


def _reference_token_bytes(tokenizer) -> list[bytes]:
    """Token bytes by the definition: the whole tokenizer's JSON for its decoder, each
    byte-level piece character by character through GPT-2's map (``from_tokenizer`` reads
    the decoder's own JSON and maps pieces with one ``str.translate``)."""
    from structgen.fsm.index.vocabulary import _UNICODE_TO_BYTE, _piece_decoder

    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    decoder = json.loads(backend.to_str())["decoder"]
    is_byte_level = "ByteLevel" in json.dumps(decoder)
    sentencepiece = _piece_decoder(decoder)
    added = backend.get_added_tokens_decoder()
    vocab = backend.get_vocab(with_added_tokens=True)
    out = [b""] * max(max(vocab.values()) + 1, len(tokenizer))
    for piece, tid in vocab.items():
        if tid in added:
            out[tid] = added[tid].content.encode("utf-8")
        elif not is_byte_level:
            out[tid] = sentencepiece(piece)
        elif all(c in _UNICODE_TO_BYTE for c in piece):
            out[tid] = bytes(_UNICODE_TO_BYTE[c] for c in piece)
        else:
            out[tid] = piece.encode("utf-8")
    return out


def test_from_tokenizer_equals_the_reference_decoding(
    byte_level_tokenizer, sentencepiece_tokenizer, tiny_tokenizer
) -> None:
    for tok in (byte_level_tokenizer, sentencepiece_tokenizer, tiny_tokenizer):
        assert Vocabulary.from_tokenizer(tok).token_bytes == _reference_token_bytes(tok)


def test_byte_level_pieces_outside_the_map_are_utf8() -> None:
    """A piece with any character outside GPT-2's map (a space, U+00AD, U+0100+ beyond
    the map, or one below 256 that the map sends elsewhere) is its UTF-8, whole."""
    from structgen.fsm.index.vocabulary import _UNICODE_TO_BYTE, _piece_decoder

    decode = _piece_decoder({"type": "ByteLevel"})
    mapped = "".join(sorted(_UNICODE_TO_BYTE))
    assert decode(mapped) == bytes(_UNICODE_TO_BYTE[c] for c in mapped)
    assert sorted(decode(mapped)) == list(range(256))
    for piece in ("Ġa b", "a\xad", "x\u0144", "\u0143", "é\x7f", "日本", " ", "\t"):
        ok = all(c in _UNICODE_TO_BYTE for c in piece)
        want = bytes(_UNICODE_TO_BYTE[c] for c in piece) if ok else piece.encode("utf-8")
        assert decode(piece) == want, piece
    assert decode("\u0143") == bytes([_UNICODE_TO_BYTE["\u0143"]])  # the map's last char
