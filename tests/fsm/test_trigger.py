"""Constraints that start after a trigger string (``trigger=``): language, masks, walks.

References: Python's ``re`` on the split at the trigger's first occurrence, and the
inner grammar compiled on its own.
"""

from __future__ import annotations

import itertools
import json
import random
import re

import jsonschema
import pytest
import torch

from benchmarks.support import allowed_ids
from structgen.errors import RegexError
from structgen.fsm import Vocabulary, compile_choice, compile_json_schema, compile_regex


def _reference(text: bytes, trigger: bytes, inner: str) -> bool:
    i = text.find(trigger)
    if i < 0:
        return False
    try:
        rest = text[i + len(trigger) :].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return re.fullmatch(inner, rest) is not None


@pytest.mark.parametrize("trigger", ["aab", "abab", "aa", "b1", "a"])
def test_language_matches_first_occurrence_split(trigger: str) -> None:
    """Every string over {a, b, 0, 1} up to length 7: the automaton agrees with the
    reference (self-overlapping triggers exercise the KMP fallback)."""
    inner = r"[01]+"
    grammar = compile_regex(inner, trigger=trigger)
    for n in range(8):
        for chars in itertools.product("ab01", repeat=n):
            s = "".join(chars)
            assert grammar.matches(s) == _reference(s.encode(), trigger.encode(), inner), s


def test_free_text_any_bytes_and_empty_trigger() -> None:
    g = compile_regex(r"\d+", trigger="</think>")
    assert g.matches("I think \xe9\u4e2d, </thin></think>42")
    assert not g.matches("no trigger 42")
    assert not g.matches("</think>42</think>")  # after the first trigger: the regex only
    assert g.matches(b"\xff\xfe</think>7")  # free text: any bytes
    assert compile_choice(["yes", "no"], trigger="#").matches("x#no")
    with pytest.raises(RegexError, match="trigger"):
        compile_regex("a", trigger="")


TOKENS = [
    b"<eos>",
    b"<sp>",
    b"</t",
    b"hink>",
    b"</think>",
    b'</think>{"',
    b'>{"a":',
    b"x",
    b"{",
    b'"a":',
    b"1",
    b"}",
    b"</think>}",
    b"\n",
    b"think",
    b">",
    b"<",
    b"/",
    b'"',
    b"a",
    b"2}",
    b"</think></think>",
]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.fixture
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=[0, 1])


def test_mask_before_trigger_is_free_except_bad_straddles(vocab: Vocabulary) -> None:
    inner = compile_json_schema(SCHEMA, vocab)
    grammar = compile_json_schema(SCHEMA, vocab, trigger="</think>")
    m = grammar.matcher()
    mask = torch.zeros(1, 1, dtype=torch.int32)
    m.fill_bitmask(mask, 0)
    expected = set()
    for tid, data in enumerate(TOKENS):
        if tid in (0, 1):
            continue  # EOS (free text cannot end the output) and special tokens
        i = data.find(b"</think>")
        if i < 0 or inner.dfa.walk(inner.dfa.initial, data[i + 8 :]) >= 0:
            expected.add(tid)
    assert set(allowed_ids(mask[0], len(TOKENS))) == expected
    assert 12 not in expected and 21 not in expected and 5 in expected
    # the trigger split across tokens: "</t" + "hink>" then the constrained part
    for tid in (7, 2, 3):
        assert m.advance(tid)
    m.fill_bitmask(mask, 0)
    assert set(allowed_ids(mask[0], len(TOKENS))) == {8}  # only "{" starts the object
    assert not m.advance(7)
    for tid in (8, 9, 10, 11):
        assert m.advance(tid)
    assert m.is_accepting() and m.is_terminated()


def test_straddling_token_then_jump_forward(vocab: Vocabulary) -> None:
    m = compile_json_schema(SCHEMA, vocab, trigger="</think>").matcher()
    for tid in (14, 16):  # "think" "<": free text
        assert m.advance(tid)
    assert m.forced_bytes() == b""  # nothing forced before the trigger
    assert m.advance(5)  # '</think>{"' : trigger and the start of the answer in one token
    assert m.forced_bytes() == b'a":'
    m.rollback(1)
    assert m.advance(2) and m.advance(6)  # "</t" then ">{"a":" is not the trigger
    assert m.forced_bytes() == b""  # still free text: "</t>{\"a\":" has no trigger


def _random_walk(matcher, vocab: Vocabulary, rng: random.Random, steps: int) -> bytes:
    mask = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    out = b""
    for _ in range(steps):
        if matcher.is_terminated():
            break
        matcher.fill_bitmask(mask, 0)
        allowed = allowed_ids(mask[0], vocab.vocab_size)
        tid = rng.choice(allowed)
        assert matcher.advance(tid)
        if tid in vocab.eos_token_ids:
            break
        out += vocab.token_bytes[tid]
    return out


def test_budgeted_walks_end_with_trigger_and_valid_json(tiny_tokenizer) -> None:
    """Random walks under ``max_tokens``: the budget forces the trigger and a complete
    document in time; the part after the trigger validates with jsonschema."""
    vocab = Vocabulary.from_tokenizer(tiny_tokenizer)
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "maximum": 99}},
        "required": ["ok", "n"],
    }
    grammar = compile_json_schema(schema, vocab, trigger="</think>")
    rng = random.Random(0)
    for seed in range(6):
        rng.seed(seed)
        m = grammar.matcher(max_tokens=40)
        text = _random_walk(m, vocab, rng, 60)
        assert m.is_accepting(), text
        _, _, answer = text.partition(b"</think>")
        assert m.num_accepted_tokens <= 41  # 40 tokens and EOS
        jsonschema.validate(json.loads(answer), schema)
        assert grammar.matches(text)
