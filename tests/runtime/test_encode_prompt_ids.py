"""``encode_prompt`` of token-id prompts: the same ids and errors as the element-wise check
it shortcuts (plain ``int`` lists checked by their extremes)."""

from __future__ import annotations

import pytest

from structgen.errors import RequestError


def reference(prompt, vocab_size: int) -> list[int]:
    """The element-wise check: every id an ``int`` (``bool`` included), each in range."""
    if not isinstance(prompt, (list, tuple)) or not all(isinstance(t, int) for t in prompt):
        raise RequestError("not token ids")
    ids = [int(t) for t in prompt]
    if any(t < 0 or t >= vocab_size for t in ids):
        raise RequestError(f"prompt token ids must be in [0, {vocab_size})")
    if not ids:
        raise RequestError("prompt is empty")
    return ids


@pytest.mark.parametrize(
    "make",
    [
        lambda v: [0],
        lambda v: [v - 1, 0, 5],
        lambda v: list(range(v)),
        lambda v: (1, 2, 3),  # a tuple
        lambda v: [True, 2],  # bool is an int
        lambda v: [v],
        lambda v: [3, -1],
        lambda v: [],
        lambda v: [1, 2.0],
        lambda v: [1, "a"],
    ],
)
def test_token_id_prompts_as_the_elementwise_check(tiny_engine, make):
    vocab = tiny_engine.vocab_size
    prompt = make(vocab)
    try:
        want = reference(prompt, vocab)
    except RequestError as exc:
        with pytest.raises(RequestError) as got:
            tiny_engine.encode_prompt(prompt)
        if "must be in" in str(exc) or "empty" in str(exc):
            assert str(got.value) == str(exc)
        return
    got = tiny_engine.encode_prompt(prompt)
    assert got == want and all(type(t) is int for t in got)
    assert got is not prompt  # a copy: the caller's list is not the request's
