"""Token id -> bytes for a tokenizer (``Vocabulary``).

Handles the two ways Hugging Face tokenizers spell bytes:

* byte-level BPE (GPT-2, SmolLM2, Llama 3, Qwen): every byte is one printable
  unicode character under GPT-2's ``bytes_to_unicode`` map;
* SentencePiece style (Llama 2, Mistral): ``▁`` stands for a space and ``<0xNN>``
  tokens are single raw bytes (byte fallback).

Special tokens (``<|im_start|>``, ``<s>``, ...) keep their text as bytes for display,
but are listed in ``special_token_ids`` and are never allowed by a grammar that does not
name them. A grammar that names some (``<[id]>``, ``<|name|>`` in a grammar, a structural
tag's begin) is compiled against ``Vocabulary.with_special_tokens(ids)``: a view in which
each named token's bytes are its *marker* (``special_token_marker``: ``0xFF``, the id in
decimal digits, ``0xFF``; ``0xFF`` never occurs in UTF-8), so the byte automata and the
token trie name it, while every text class of a grammar (valid UTF-8 only) excludes it.
A grammar's ``!<X>`` (any one token but X) is the *wildcard marker* of X
(``wildcard_marker``: ``0xFF``, ``!``, the id, ``0xFF``), which no token spells: the token
index reads it as an edge taken by exactly one token (``token_index.py``). llguidance's
``<[*]>`` (any one token) is the marker excluding nothing (``0xFF ! 0xFF``), and its
``<[1,5-7]>`` (one token among those ids) the marker written with ``=`` for ``!``
(``wildcard_marker(ids, only=True)``): only those ids take the edge.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from functools import cached_property

import numpy as np

from .count_masks import (
    STATE_TABLES,
    TABLE_CLASSES,
    class_tables,
    class_tables_pay,
    prepare_long_runs,
    runs_above,
)
from .lexical_masks import LexicalMaskCache
from .token_ends import TokenEnds
from .trie import TokenTrie

__all__ = [
    "Vocabulary",
    "bytes_to_unicode",
    "special_token_marker",
    "wildcard_marker",
    "wildcard_ids",
    "MARKER_BYTE",
    "WILDCARD_BYTE",
    "ONLY_BYTE",
]

MARKER_BYTE = 0xFF  # opens and closes a special token's marker (never a byte of UTF-8)
WILDCARD_BYTE = ord("!")  # second byte of a wildcard marker (a special marker has a digit)
ONLY_BYTE = ord("=")  # second byte of a wildcard marker that lists the ids it allows


def special_token_marker(token_id: int) -> bytes:
    """The reserved bytes that stand for special token ``token_id`` in a grammar:
    ``0xFF``, the id in decimal ASCII digits, ``0xFF`` (no two markers are prefixes of
    each other, and no UTF-8 text holds one).
    """
    return bytes([MARKER_BYTE]) + str(int(token_id)).encode("ascii") + bytes([MARKER_BYTE])


def wildcard_marker(token_ids: int | Iterable[int], *, only: bool = False) -> bytes:
    """The reserved bytes that stand for ``!<token_id>`` (any one token but that one; or
    but any of several, llguidance's ``<[^a,b-c]>``; or, with no ids, any one token,
    llguidance's ``<[*]>``) in a grammar: ``0xFF``, ``!``, the sorted distinct ids in
    decimal ASCII, runs of consecutive ids as ``first-last``, separated by ``,``, then
    ``0xFF``. With ``only`` (llguidance's ``<[a,b-c]>``: one token among those ids) the
    second byte is ``=`` (``ONLY_BYTE``) and ``token_ids`` must not be empty. No token of
    a ``with_special_tokens`` view holds them; ``TokenIndex`` turns them into a token edge.

    Raises:
        ValueError: ``only`` with no ids.
    """
    ids = [int(token_ids)] if isinstance(token_ids, int) else sorted(set(map(int, token_ids)))
    if only and not ids:
        raise ValueError("a wildcard marker that lists the ids it allows needs at least one")
    runs: list[list[int]] = []
    for i in ids:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    body = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs).encode("ascii")
    lead = ONLY_BYTE if only else WILDCARD_BYTE
    return bytes([MARKER_BYTE, lead]) + body + bytes([MARKER_BYTE])


def wildcard_ids(body: bytes) -> frozenset[int]:
    """The ids a wildcard marker's body writes (the bytes between ``0xFF !`` or ``0xFF =``
    and ``0xFF``: ``b"1,3-5"`` -> {1, 3, 4, 5}; ``b""`` -> none); the inverse of
    ``wildcard_marker``.

    Raises:
        ValueError: a body ``wildcard_marker`` does not write.
    """
    out: set[int] = set()
    for item in body.split(b",") if body else ():
        lo, _, hi = item.partition(b"-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_DEFAULT_EOS_NAMES = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "</s>")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


_UNICODE_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}
# ``str.translate`` table of a byte-level piece: each of the 256 characters to its byte's
# code point (Latin-1 encodes it as that byte); every other code point below 256 to U+FFFF,
# which Latin-1 cannot encode, so a piece holding a character outside the map fails whole
_BYTE_LEVEL_TABLE = {ord(c): b for c, b in _UNICODE_TO_BYTE.items()}
_BYTE_LEVEL_TABLE.update({i: 0xFFFF for i in range(256) if i not in _BYTE_LEVEL_TABLE})


class Vocabulary:
    """Every token id of a tokenizer as bytes, plus its EOS and special ids.

    Args:
        token_bytes: bytes of token ``i`` at index ``i``; ``b""`` for unused ids.
        eos_token_ids: ids that end generation (allowed only where the grammar accepts).
        special_token_ids: ids never allowed inside a grammar (EOS ids may be listed too).

    Attributes:
        vocab_size: ``len(token_bytes)``.
        fingerprint: sha256 hex over token bytes, EOS and special ids (cache key).
        is_marker_view: True for a ``with_special_tokens`` view (no token holds ``0xFF``,
            so a grammar's markers are reserved; its token indexes read wildcard markers).
        edge_only_ids: in a view, the ordinary tokens of the base vocabulary holding
            ``0xFF``: empty here (never on a byte path), allowable to wildcard edges only.
    """

    is_marker_view = False
    edge_only_ids: frozenset[int] = frozenset()

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        eos_token_ids: Iterable[int],
        special_token_ids: Iterable[int] = (),
    ) -> None:
        self.token_bytes: list[bytes] = [bytes(t) for t in token_bytes]
        self.vocab_size = len(self.token_bytes)
        self.eos_token_ids = frozenset(int(i) for i in eos_token_ids)
        self.special_token_ids = frozenset(int(i) for i in special_token_ids)
        bad = [
            i for i in self.eos_token_ids | self.special_token_ids if not 0 <= i < self.vocab_size
        ]
        if bad:
            raise ValueError(
                f"token ids {sorted(bad)} are outside the vocabulary (size {self.vocab_size})"
            )
        h = hashlib.sha256()
        h.update(f"{self.vocab_size};".encode())
        for t in self.token_bytes:
            h.update(len(t).to_bytes(4, "little"))
            h.update(t)
        h.update(json.dumps([sorted(self.eos_token_ids), sorted(self.special_token_ids)]).encode())
        self.fingerprint = h.hexdigest()

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return (
            f"Vocabulary(vocab_size={self.vocab_size}, eos={sorted(self.eos_token_ids)}, "
            f"num_special={len(self.special_token_ids)}, fingerprint={self.fingerprint[:12]})"
        )

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``token_ids`` (EOS and special tokens included as text)."""
        return b"".join(self.token_bytes[i] for i in token_ids)

    @cached_property
    def index_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-vocabulary tables of every ``TokenIndex`` (computed once, shared).

        Returns:
            never: bool ``[vocab_size]``, ids a grammar never allows as ordinary tokens
                (special, empty, and EOS, which is handled by acceptance).
            eos: int64 ``[k]``, the sorted EOS ids.
        """
        never = np.zeros(self.vocab_size, bool)
        never[list(self.special_token_ids)] = True
        never[[i for i, t in enumerate(self.token_bytes) if not t]] = True
        eos = np.array(sorted(self.eos_token_ids), np.int64)
        never[eos] = True
        for arr in (never, eos):
            arr.setflags(write=False)
        return never, eos

    @cached_property
    def special_token_texts(self) -> dict[str, int]:
        """The text of each special token (EOS ones included) -> its id (the lowest id
        where two share a text).
        """
        out: dict[str, int] = {}
        for i in sorted(self.special_token_ids):
            out.setdefault(self.token_bytes[i].decode("utf-8", "replace"), i)
        return out

    def with_special_tokens(
        self, token_ids: Iterable[int], *, reserve_markers: bool = False
    ) -> Vocabulary:
        """The view of this vocabulary in which the special tokens ``token_ids`` are
        allowable, each as its marker (``special_token_marker``), cached per id set.

        Every other token keeps its bytes, but ordinary tokens holding the byte ``0xFF``
        (byte-fallback ``<0xFF>``; never part of UTF-8 text) spell nothing (empty bytes),
        so no sequence of ordinary tokens spells a marker; they stay allowable
        (``edge_only_ids``): a wildcard edge (``!<X>``, ``<[*]>``, ``<[^...]>``, a list
        naming them) takes them as one token, as llguidance does, and no byte path does.
        EOS ids stay EOS (not allowable).

        Args:
            token_ids: ids in ``special_token_ids`` and not EOS.
            reserve_markers: build the view even when ``token_ids`` is empty (a grammar
                with ``!<...>``: its wildcard markers must not be spelled by tokens).

        Returns:
            ``self`` when ``token_ids`` is empty and ``reserve_markers`` is False, else the
            view (its own fingerprint).

        Raises:
            ValueError: an id that is not a special token, or is an EOS id.
        """
        ids = frozenset(int(i) for i in token_ids)
        if not ids and not reserve_markers:
            return self
        bad = sorted(i for i in ids if i not in self.special_token_ids or i in self.eos_token_ids)
        if bad:
            raise ValueError(f"token ids {bad} are not special tokens (or are EOS)")
        views = self.__dict__.setdefault("_special_views", {})
        view = views.get(ids)
        if view is None:
            data = [b"" if MARKER_BYTE in t else t for t in self.token_bytes]
            banned = self.special_token_ids | self.eos_token_ids
            edge_only = frozenset(
                i for i, t in enumerate(self.token_bytes) if MARKER_BYTE in t and i not in banned
            )
            for i in ids:
                data[i] = special_token_marker(i)
            view = Vocabulary(data, self.eos_token_ids, self.special_token_ids - ids)
            view.is_marker_view = True
            if edge_only:  # the view's bytes do not show them: the fingerprint must
                view.edge_only_ids = edge_only
                view.fingerprint = hashlib.sha256(
                    f"{view.fingerprint};edge-only {sorted(edge_only)}".encode()
                ).hexdigest()
            views[ids] = view
        return view

    @cached_property
    def allowable(self) -> np.ndarray:
        """Bool ``[vocab_size]``, read-only: the ids a grammar may allow as ordinary tokens
        (not ``never`` of ``index_tables``) and ``edge_only_ids``; what a grammar's
        ``!<X>`` allows, X aside.
        """
        out = ~self.index_tables[0]
        out[sorted(self.edge_only_ids)] = True
        out.setflags(write=False)
        return out

    @cached_property
    def token_trie(self) -> TokenTrie:
        """The allowable tokens (not ``never``) as a byte trie, for ``TokenIndex`` (built
        once per vocabulary; see ``trie.py``).
        """
        return TokenTrie.build(self.token_bytes, self.index_tables[0])

    @cached_property
    def token_ends(self) -> TokenEnds:
        """Prefix and inner-substring questions over the allowable tokens (``token_ends.py``:
        whether a grammar's lexeme can end before a token's last byte), built once per
        vocabulary.
        """
        return TokenEnds(self.token_bytes, self.token_trie.byte_order)

    def prepare(self, warm_up: bool = True) -> Vocabulary:
        """Build now the per-vocabulary tables a grammar's first masks would otherwise build
        lazily, inside their own time: ``index_tables``, ``allowable``, ``token_trie``
        and its C walk's ``subtree_tables``, ``token_ends``, ``lexical_masks``' per-token
        byte sets and pinned JSON string heads (``LexicalMaskCache.prepare``), the string states'
        exit trie with its subtree tables and the byte postings every exit trie is built
        from (``TokenTrie.holding``), and the class tables of
        ``count_masks.TABLE_CLASSES`` with their subtree tables (where they pay,
        ``count_masks.class_tables_pay``: a 150k BPE; elsewhere, SmolLM2, the first
        class's alone, which a host label's count reads) and their run counts
        (``count_masks.runs_above``), and the first class's long-run tries of every bound
        (``count_masks.prepare_long_runs``). The per-tokenizer preprocessing step
        of a vocabulary's load (the peers' ``TokenizerInfo`` / ``LLTokenizer``
        constructors). Cost: ~0.1 s at 49k tokens, ~0.5 s at 150k. Idempotent;
        thread-safe as the properties are.

        Args:
            warm_up: also compile two one-string schemas with extra keys allowed: the first
                lowers the JSON converter's reusable definitions into their per-process
                snapshot (``regex/reused.py``, kept across ``clear_cache``), the second
                restores it and digests its string head once per process
                (``lexical_masks.head_key``): work a process's first two schemas with extra
                keys would do (it leaves their two grammars in the compile cache); and
                ``schema_rules.warm_up_closed_rules``: the "any JSON value" rule every
                recursive schema with untyped values shares, read, lowered and its
                terminals' lexer run kept with its string interior's digest, once per
                process (no grammar cached).

        Returns:
            ``self``.

        Raises:
            GrammarTooComplexError: never in practice (the two small string grammars of
                ``LexicalMaskCache.prepare``).
        """
        _ = self.index_tables, self.allowable
        _ = self.token_trie.subtree_tables
        _ = self.token_ends
        lex = self.lexical_masks
        lex.prepare()
        quote = lex.exit_tables(1 << ord('"'))  # the exit trie of every string state
        if quote is not None:
            _ = quote[0].subtree_tables
        # the tables host / e-mail / URI states' masks start from, where they pay; else a
        # count's canonical state (a host label) reads the first class's
        classes = TABLE_CLASSES if class_tables_pay(self) else TABLE_CLASSES[:1]
        for byte_mask in classes:
            _ = class_tables(self, byte_mask)[0].subtree_tables
            runs_above(self, byte_mask)  # whether a count of the class is worth sharing
        prepare_long_runs(self, TABLE_CLASSES[0])  # a host label's long-run tokens' tries
        if warm_up:
            from ..compiler import compile_json_schema  # the compiler imports this package

            for name in "ab":  # the first lowers the snapshot, the second restores it
                g = compile_json_schema(
                    {"type": "object", "properties": {name: {"type": "string"}}},
                    self,
                    allow_extra_properties=True,
                )
                g.token_index.lexical_key(g.dfa.walk(g.dfa.initial, b'{"%s":"' % name.encode()))
            from ..grammar.schema_rules import warm_up_closed_rules

            warm_up_closed_rules(self)
        if "_prepared_tables" not in self.__dict__:  # the load's own: the first prepare's
            self._prepared_tables = self._state_table_keys()
        return self

    def _state_table_keys(self) -> dict[str, frozenset]:
        keys = {name: frozenset(self.__dict__.get(name, ())) for name in STATE_TABLES}
        keys["exits"] = self.lexical_masks.exit_sets()
        return keys

    def clear_tables(self) -> None:
        """Drop the per-vocabulary tables built on demand since ``prepare`` for particular
        states (``lexical_masks``' exit tries of other exit sets, ``count_masks``'
        ``STATE_TABLES`` of other classes and bounds) and the lexical cache's unpinned head
        parts: the vocabulary as its load left it, before any request (everything when
        ``prepare`` never ran). Benchmarks' cold-empty mode takes it before each compile,
        so a repeated schema builds its own tables every run. Masks are the same either way
        (the tables are rebuilt on demand). Raises: never.
        """
        kept = self.__dict__.get("_prepared_tables", {})
        for name in STATE_TABLES:
            table = self.__dict__.get(name)
            if table is not None:
                for key in list(table):
                    if key not in kept.get(name, ()):
                        table.pop(key, None)
        lex = self.lexical_masks
        lex.drop_exit_tables(kept.get("exits", frozenset()))
        lex.clear()

    @cached_property
    def lexical_masks(self) -> LexicalMaskCache:
        """The masks' head parts shared by every grammar of this vocabulary (the inside of
        a JSON string, say; see ``lexical_masks.py``), an LRU bounded in bytes.
        """
        return LexicalMaskCache(self)

    @classmethod
    def from_tokenizer(cls, tokenizer, eos_token_ids: Iterable[int] | None = None) -> Vocabulary:
        """Build from a Hugging Face tokenizer.

        Either a ``PreTrainedTokenizerFast`` or a ``tokenizers.Tokenizer``.

        Args:
            tokenizer: the tokenizer.
            eos_token_ids: override; by default the tokenizer's ``eos_token_id`` plus any
                special token named ``<|im_end|>``, ``<|endoftext|>``, ``<|eot_id|>``,
                ``<|end|>`` or ``</s>``.

        Raises:
            ValueError: the tokenizer has no EOS token and none is given.
        """
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        vocab: dict[str, int] = backend.get_vocab(with_added_tokens=True)
        added = backend.get_added_tokens_decoder()
        special = {i for i, tok in added.items() if tok.special}
        special |= set(getattr(tokenizer, "all_special_ids", ()) or ())
        size = max(
            max(vocab.values(), default=-1) + 1,
            len(tokenizer) if hasattr(tokenizer, "__len__") else 0,
        )
        decoder = backend.decoder  # its own JSON: not the whole tokenizer's (~1.5 MB)
        decode_piece = _piece_decoder(
            None if decoder is None else json.loads(decoder.__getstate__())
        )
        token_bytes = [b""] * size
        for piece, tid in vocab.items():
            if tid in added:
                token_bytes[tid] = added[tid].content.encode("utf-8")
            else:
                token_bytes[tid] = decode_piece(piece)
        if eos_token_ids is None:
            eos = set()
            if getattr(tokenizer, "eos_token_id", None) is not None:
                eos.add(int(tokenizer.eos_token_id))
            eos |= {vocab[n] for n in _DEFAULT_EOS_NAMES if n in vocab and vocab[n] in special}
            if not eos:
                raise ValueError("the tokenizer has no EOS token; pass eos_token_ids")
            eos_token_ids = eos
        return cls(token_bytes, eos_token_ids, special)


def _decoder_types(decoder: dict | None) -> list[dict]:
    if not decoder:
        return []
    if decoder.get("type") == "Sequence":
        return [d for sub in decoder.get("decoders", []) for d in _decoder_types(sub)]
    return [decoder]


def _piece_decoder(decoder: dict | None):
    """Function vocab piece (str) -> bytes, chosen from the tokenizer's decoder config."""
    types = {d.get("type") for d in _decoder_types(decoder)}
    if "ByteLevel" in types:

        def byte_level(piece: str) -> bytes:
            try:  # each character through GPT-2's map (_BYTE_LEVEL_TABLE)
                return piece.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
            except UnicodeEncodeError:  # not a byte-level piece (added tokens only)
                return piece.encode("utf-8")

        return byte_level

    replace = "▁"
    for d in _decoder_types(decoder):
        if d.get("type") == "Metaspace":
            replace = d.get("replacement", replace)
    byte_fallback = "ByteFallback" in types or not types

    def sentencepiece(piece: str) -> bytes:
        if byte_fallback:
            m = _BYTE_TOKEN.match(piece)
            if m:
                return bytes([int(m.group(1), 16)])
        return piece.replace(replace, " ").encode("utf-8")

    return sentencepiece
