"""A tiny-Llama engine whose context ends a few tokens after a prompt, for the tests of
what a program sees when the context, not ``max_tokens``, cut a gen or a template."""

from __future__ import annotations

from pathlib import Path

from structgen import Engine


def short_context_engine(model_dir: Path, tokenizer, prompt: str, room: int) -> Engine:
    """The tiny Llama of ``tiny_engine`` (float32, 2048 KV tokens, pages of 4) with
    ``max_model_len`` = the tokens of ``prompt`` (encoded by ``tokenizer`` without special
    tokens) + ``room``, so a request of that prompt may generate ``room`` tokens at most.
    """
    limit = len(tokenizer.encode(prompt, add_special_tokens=False)) + room
    engine = Engine(
        str(model_dir), dtype="float32", max_kv_tokens=2048, page_size=4, max_model_len=limit
    )
    assert engine.max_request_tokens() == limit
    return engine
