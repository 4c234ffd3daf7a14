"""``definitions.placeholder_indices`` and ``renumber_placeholders`` against the per-character
references they replace (a scan, ``str.translate``)."""

from __future__ import annotations

import random

from structgen.fsm.regex.definitions import (
    COMPLEMENT,
    INTERSECT,
    PLACEHOLDER_BASE,
    RAW_BYTES,
    placeholder_indices,
    renumber_placeholders,
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


def test_renumber_placeholders_equals_translate() -> None:
    """Tables as ``lower._Definitions`` builds them (needed definitions numbered in order),
    and others: permutations whose new code points the text holds, identities, more moves
    than ``str.replace`` takes, marker code points, ASCII and empty texts.
    """
    rng = random.Random(11)
    slots = [PLACEHOLDER_BASE + i for i in range(40)]
    alphabet = ["a", "(", "|", "\\", "é", INTERSECT, COMPLEMENT, RAW_BYTES] + [
        chr(c) for c in slots
    ]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        kind = rng.randrange(4)
        if kind == 0:  # the bundle's table: a sorted subset numbered from 0
            order = sorted(rng.sample(range(40), rng.randint(0, 40)))
            table = {
                PLACEHOLDER_BASE + old: PLACEHOLDER_BASE + new for new, old in enumerate(order)
            }
        elif kind == 1:  # a permutation (new code points the text may hold)
            perm = slots[:]
            rng.shuffle(perm)
            table = dict(zip(slots, perm))
        elif kind == 2:  # a shift up (add_block's)
            base = rng.randint(0, 50)
            table = {c: c + base for c in slots}
        else:  # a partial identity
            table = {c: c for c in rng.sample(slots, 5)}
        assert renumber_placeholders(text, table) == text.translate(table), (text, table)
    many = "".join(chr(c) for c in slots) * 3
    table = {c: c + 100 for c in slots}
    assert renumber_placeholders(many, table) == many.translate(table)


def test_probe_and_scan_paths_agree_on_long_texts(monkeypatch) -> None:
    """Each text and table through both ways of finding the placeholders (one search per
    code point, ``_few_probes``; one ``re`` scan): the same answers as the references, on
    texts up to a few hundred characters (a key trie's definition) and tables of every size.
    """
    import structgen.fsm.regex.definitions as definitions

    rng = random.Random(23)
    slots = [PLACEHOLDER_BASE + i for i in range(60)]
    alphabet = ["a", "(", "|", "é", "\u4e00", chr(0x10FFFF), INTERSECT] + [chr(c) for c in slots]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 400)))
        order = sorted(rng.sample(range(60), rng.randint(0, 60)))
        table = {PLACEHOLDER_BASE + old: PLACEHOLDER_BASE + new for new, old in enumerate(order)}
        if rng.random() < 0.3:  # moves onto code points the text holds
            perm = slots[:]
            rng.shuffle(perm)
            table = dict(zip(slots, perm))
        num = rng.randint(0, 70)
        for bounds in ((0, 1, 0), (10**6, 1, 10**6)):  # every call scans; every call probes
            monkeypatch.setattr(definitions, "_MIN_PROBES", bounds[0])
            monkeypatch.setattr(definitions, "_CHARS_PER_PROBE", bounds[1])
            monkeypatch.setattr(definitions, "_MAX_PROBES", bounds[2])
            assert placeholder_indices(text, num) == _reference(text, num)
            assert renumber_placeholders(text, table) == text.translate(table)
