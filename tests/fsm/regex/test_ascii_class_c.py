"""``regex.lower.ascii_class``'s token written in C (``csrc/regexlower.c``'s
``ascii_class_text``) against the Python loop it replaces (``_ascii_class_text``), and the
class the lowering reads back from either: the same text, the same byte set."""

from __future__ import annotations

import random

import pytest

from structgen.fsm.regex import lower

pytestmark = pytest.mark.skipif(not lower.HAVE_C_LOWER, reason="C extension not built")

_PLAIN_UNITS = ((1 << 0x80) - (1 << 0x20)) & ~(1 << 0x22) & ~(1 << 0x5C)


def _masks() -> list[int]:
    rng = random.Random(20261207)
    out = [1, 1 << 63, 1 << 64, 1 << 127, (1 << 64) - 1, (1 << 128) - 1, (1 << 65) - (1 << 63)]
    out += [rng.getrandbits(128) for _ in range(3000)]
    out += [rng.getrandbits(rng.randrange(1, 129)) for _ in range(3000)]
    out += [sum(1 << b for b in rng.sample(range(128), rng.randrange(1, 12))) for _ in range(2000)]
    # a key trie node's class: the printable units but a few letters (objects._ascii_left)
    for _ in range(2000):
        mask = _PLAIN_UNITS
        for code in rng.sample(range(0x20, 0x80), rng.randrange(0, 8)):
            mask &= ~(1 << code)
        out.append(mask)
    return [m for m in out if m]


def test_c_token_equals_the_python_loop() -> None:
    """Every mask: the C text is the Python loop's, character for character."""
    for mask in _masks():
        assert lower._EXT.ascii_class_text(mask) == lower._ascii_class_text(mask), hex(mask)


def test_ascii_class_is_the_same_with_and_without_the_extension() -> None:
    """``ascii_class`` (C in use, then the Python loop) writes the same token, and the
    token's byte set read back (``_ascii_class_mask``, where it reads it) is the mask."""
    masks = _masks()[:2000]
    with_c = [lower.ascii_class(m) for m in masks]
    lower.use_extension(False)
    try:
        without = [lower.ascii_class(m) for m in masks]
    finally:
        lower.use_extension(True)
    assert with_c == without
    for mask, token in zip(masks, with_c):
        assert lower._ascii_class_mask(token[1:-1]) in (None, mask), token


@pytest.mark.parametrize("bad", [0, -1, 1 << 128, (1 << 130) | 1])
def test_bad_masks_raise_before_the_c_call(bad: int) -> None:
    with pytest.raises(ValueError):
        lower.ascii_class(bad)
