"""``clear_cache(memos=True)`` drops every per-process memo of ``fsm._MEMOS``,
``Vocabulary.clear_tables`` every state table built since ``prepare``, and grammars
compiled after either are the same as with them kept.

Reference: brute force over every token of a synthetic vocabulary, each token walked
through the same schema's automaton compiled without a vocabulary
(``grammar/test_lexical_split``'s check: regex and context-free grammars alike), at
prefixes inside keys, extra keys, strings under a format and a length, and a recursive
definition; the memos' sizes read directly (an ``LRUCache`` / dict length, an
``lru_cache``'s ``currsize``).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from structgen import fsm
from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.index.lexical_masks import LexicalMaskCache
from tests.fsm.grammar.test_lexical_split import _check
from tests.fsm.index.test_lexical_masks import _vocab

SCHEMAS = [  # (schema, prefixes checked): extra keys, a format under a length, recursion,
    # a non-ASCII key
    (
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "nick": {"type": "string"}},
            "required": ["name"],
        },
        [b'{"', b'{"na', b'{"name":"ab', b'{"name":"a","', b'{"name":"a","ni', b'{"name":"a","x'],
    ),
    (
        {
            "type": "object",
            "properties": {"mail": {"type": "string", "format": "email", "maxLength": 12}},
        },
        [b'{"mail":"', b'{"mail":"ab', b'{"mail":"a@b', b'{"m'],
    ),
    (
        {
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                }
            },
        },
        [b'{"kids":[{"', b'{"kids":[{"kids":[', b'{"k'],
    ),
    (  # a key not of plain ASCII: its trie written by Python (_unit_not_in), not in C
        {"type": "object", "properties": {"café": {"type": "string"}}},
        [b'{"', '{"caf'.encode(), '{"café":"a","'.encode(), '{"café":"a","caf'.encode()],
    ),
]


def _size(memo) -> int:
    info = getattr(memo, "cache_info", None)
    return info().currsize if info is not None else len(memo)


def _memos() -> dict[str, object]:
    out = {}
    for module, name in fsm._MEMOS:
        out[f"{module}.{name}"] = getattr(importlib.import_module(module, "structgen.fsm"), name)
    return out


@pytest.fixture
def vocab():
    v = _vocab()
    v.lexical_masks = LexicalMaskCache(v, auto_prepare=False)
    clear_cache(memos=True)
    return v


def _compile(schema, vocab):
    return compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)


def test_memos_emptied(vocab) -> None:
    for schema, _ in SCHEMAS:
        _compile(schema, vocab)
    filled = {k for k, m in _memos().items() if _size(m)}
    # the key tries' texts, the atom recipes, the reusable runs and a bounded body at least
    assert {
        ".json_schema.objects._key_not_in",
        ".json_schema.objects._unit_not_in",
        ".regex.lower._ATOM_RECIPES",
        ".regex.reused._runs",
        ".json_schema.string_length._BODIES",
    } <= filled
    clear_cache()
    assert {k for k, m in _memos().items() if _size(m)} == filled  # kept without memos
    clear_cache(memos=True)
    assert {k: _size(m) for k, m in _memos().items() if _size(m)} == {}


def test_masks_same_with_and_without_memos(vocab) -> None:
    for schema, prefixes in SCHEMAS:
        clear_cache()
        ref = compile_json_schema(schema, None, strict=False, allow_extra_properties=True)
        clear_cache(memos=True)
        vocab.lexical_masks.clear()
        cold = _compile(schema, vocab)
        got_cold = [_check(cold, ref, vocab, p) for p in prefixes]
        clear_cache()  # the memos this compile filled stay
        vocab.lexical_masks.clear()
        warm = _compile(schema, vocab)
        assert warm is not cold
        for p, a in zip(prefixes, got_cold):
            assert np.array_equal(_check(warm, ref, vocab, p), a), p


def test_clear_tables_back_to_prepare() -> None:
    from structgen.fsm.index.count_masks import STATE_TABLES

    vocab = _vocab()
    vocab.prepare(warm_up=False)
    exits = vocab.lexical_masks.exit_sets()
    tables = {name: set(vocab.__dict__.get(name, ())) for name in STATE_TABLES}
    first = []
    for schema, prefixes in SCHEMAS:
        clear_cache()
        ref = compile_json_schema(schema, None, strict=False, allow_extra_properties=True)
        g = _compile(schema, vocab)
        first.append([_check(g, ref, vocab, p) for p in prefixes])
        clear_cache()  # a second compile reads the keys the first stored: their exit sets
        g = _compile(schema, vocab)
        for p, a in zip(prefixes, first[-1]):
            assert np.array_equal(_check(g, ref, vocab, p), a), p
    assert vocab.lexical_masks.exit_sets() > exits  # the e-mail's and keys' exit sets
    vocab.clear_tables()
    assert vocab.lexical_masks.exit_sets() == exits
    assert {n: set(vocab.__dict__.get(n, ())) for n in STATE_TABLES} == tables
    assert vocab.lexical_masks.stats()["lexical_cache_entries"] == 0
    for (schema, prefixes), want in zip(SCHEMAS, first):
        clear_cache()
        ref = compile_json_schema(schema, None, strict=False, allow_extra_properties=True)
        g = _compile(schema, vocab)
        for p, a in zip(prefixes, want):
            assert np.array_equal(_check(g, ref, vocab, p), a), p
