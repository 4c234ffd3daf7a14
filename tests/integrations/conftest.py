"""Reuse the fsm tests' session fixture for the real SmolLM2 tokenizer."""

from tests.fsm.conftest import smollm2_tokenizer  # noqa: F401
