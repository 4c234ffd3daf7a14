"""``definitions.placeholder_indices`` against the per-character reference it replaces."""

from __future__ import annotations

import random

from structgen.fsm.regex.definitions import (
    COMPLEMENT,
    INTERSECT,
    PLACEHOLDER_BASE,
    RAW_BYTES,
    placeholder_indices,
)


def _reference(text: str, num_defined: int) -> set[int]:
    return {ord(c) - PLACEHOLDER_BASE for c in text if 0 <= ord(c) - PLACEHOLDER_BASE < num_defined}


def test_placeholder_indices_equal_the_per_character_scan() -> None:
    rng = random.Random(5)
    alphabet = [
        "a",
        "(",
        "\\",
        "é",
        "\u4e00",
        chr(PLACEHOLDER_BASE - 1),  # just below the placeholders: never one
        INTERSECT,
        COMPLEMENT,
        RAW_BYTES,
        chr(0x10FFFF),
        "\ud800",  # a lone surrogate (a regex text may carry one)
    ] + [chr(PLACEHOLDER_BASE + i) for i in (0, 1, 2, 7, 300, 4095)]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        for num in (0, 1, 3, 8, 301, 5000, 0xFFFFD - PLACEHOLDER_BASE):
            assert placeholder_indices(text, num) == _reference(text, num), (text, num)


def test_ascii_text_holds_none() -> None:
    assert placeholder_indices("(?:a|b)*" * 100, 10) == set()
