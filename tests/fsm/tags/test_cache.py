"""The compile cache of structural tags: what a repeated compile walks, what it hits.

References: the walks counted by wrapping ``node_key``, ``tag_texts`` and ``has_grammar``;
the grammar objects' identity for hits and misses; a fresh compile (every cache cleared)
compared mask by mask with the cached grammar along accepted and rejected texts.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from structgen.fsm import Vocabulary, clear_cache
from structgen.fsm.spec import StructuralTag
from structgen.fsm.tags import compile as tag_compile
from structgen.fsm.tags import format as tag_format
from structgen.fsm.tags import grammar as tag_grammar

BEGIN, END = "<tool_call>", "</tool_call>"
TOKENS = [b"<eos>", BEGIN.encode()] + [bytes([b]) for b in range(256)]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "maximum": 5}}}


def _tag_dict(maximum: int = 5, grammar: bool = False) -> dict:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["a"]["maximum"] = maximum
    structures = [{"begin": BEGIN, "schema": schema, "end": END}]
    if grammar:  # a context-free content: the composed-grammar path
        structures.append({"begin": "<g>", "grammar": 'root ::= "(" root ")" | "x"', "end": "</g>"})
    return {"type": "structural_tag", "structures": structures, "triggers": [BEGIN, "<g>"]}


@pytest.fixture
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=[0, 1])


@pytest.fixture
def walks(monkeypatch) -> dict:
    """Counts of the tree walks a compile makes (the key, the texts, the grammar test)."""
    counts = {"node_key": 0, "tag_texts": 0, "has_grammar": 0}

    def counted(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counted(tag_format, "node_key")
    counted(tag_compile, "tag_texts")
    counted(tag_grammar, "has_grammar")
    return counts


# (vocabulary: None, plain bytes, or the begin as a special token; grammar content)
PATHS = [("none", False), ("special", False), ("special", True), ("plain", False)]


def _vocab_of(kind: str, vocab: Vocabulary):
    if kind == "none":
        return None
    if kind == "plain":
        return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=[0])
    return vocab


@pytest.mark.parametrize("kind, grammar", PATHS)
def test_same_tag_again_walks_nothing(kind, grammar, vocab, walks) -> None:
    clear_cache()
    v = _vocab_of(kind, vocab)
    tag = StructuralTag.from_dict(_tag_dict(grammar=grammar))
    first = tag.compile(v)
    assert walks["node_key"] and walks["tag_texts"] and walks["has_grammar"]
    walks.update(dict.fromkeys(walks, 0))
    assert tag.compile(v) is first
    assert walks == {"node_key": 0, "tag_texts": 0, "has_grammar": 0}


@pytest.mark.parametrize("kind, grammar", PATHS)
def test_equal_tags_share_an_entry_and_a_changed_tag_misses(kind, grammar, vocab) -> None:
    clear_cache()
    v = _vocab_of(kind, vocab)
    first = StructuralTag.from_dict(_tag_dict(grammar=grammar)).compile(v)
    assert StructuralTag.from_dict(_tag_dict(grammar=grammar)).compile(v) is first
    changed = StructuralTag.from_dict(_tag_dict(maximum=6, grammar=grammar)).compile(v)
    assert changed is not first
    call = BEGIN + '{"a":6}' + END
    assert changed.matches(call) and not first.matches(call)


def _masks(grammar, ids: list[int]) -> list[np.ndarray]:
    """The mask before each of ``ids`` and after the last accepted one."""
    m = grammar.matcher()
    buf = torch.zeros((1, (len(TOKENS) + 31) // 32), dtype=torch.int32)
    out = []
    for tid in ids:
        m.fill_bitmask(buf, 0)
        out.append(buf.numpy().copy())
        if not m.advance(tid):
            break
    m.fill_bitmask(buf, 0)
    out.append(buf.numpy().copy())
    return out


@pytest.mark.parametrize("kind, grammar", PATHS)
def test_cached_grammar_equals_a_fresh_compile(kind, grammar, vocab) -> None:
    v = _vocab_of(kind, vocab)
    tag = StructuralTag.from_dict(_tag_dict(grammar=grammar))
    cached = tag.compile(v)
    assert tag.compile(v) is cached
    clear_cache()
    fresh = StructuralTag.from_dict(_tag_dict(grammar=grammar)).compile(v)
    assert fresh is not cached
    texts = ["hi ", "a<tool_call>", '<tool_call>{"a":3}', '<tool_call>{"a":7}</tool_call>']
    texts += ["<g>((x))</g> ok", "<g>(x</g>"] if grammar else []
    for text in texts:
        assert cached.matches(text) == fresh.matches(text), text
        if v is None:
            continue
        ids = [2 + b for b in text.encode()]
        if kind == "special" and text.startswith(BEGIN):
            ids = [1] + ids[len(BEGIN) :]  # the begin as its special token
        for a, b in zip(_masks(cached, ids), _masks(fresh, ids), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=text)


def test_key_digest_of_plain_keys_only() -> None:
    plain = ("tag", ("a", 1, 2.5, None, True), ("b",))
    assert tag_format.key_digest(plain) == tag_format.key_digest(copy.deepcopy(plain))
    assert tag_format.key_digest(plain) != tag_format.key_digest(("tag", ("a", 1), ("b",)))
    assert isinstance(tag_format.key_digest(plain), str)
    odd = ("tag", object())  # a repr that need not tell values apart: kept as it is
    assert tag_format.key_digest(odd) is odd
