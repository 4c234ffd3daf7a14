"""``objects._key_not_in``'s key trie text written in C (``regex.lower.key_trie_text``,
``csrc/regexlower.c``) against the Python build it stands in for (``objects._key_trie``):
the same text and the same atom recipes kept in the same order, for plain ASCII names; the
C path declines every other name (left to Python); the text's language is the keys other
than the names (Python's ``re`` over sampled strings)."""

from __future__ import annotations

import json
import random
import re

import pytest

from structgen.fsm.json_schema import objects
from structgen.fsm.regex import lower

pytestmark = pytest.mark.skipif(not lower.HAVE_C_LOWER, reason="C extension not built")

_PLAIN = [chr(c) for c in range(0x20, 0x80) if chr(c) not in '"\\']
_TAILS = [
    (chr(0xF000C), chr(0xF000D)),  # shared definitions' placeholders (the converter's)
    (objects.CANON_CHAR + "*", objects._NON_ASCII_UNIT),  # key_not_in's defaults
    ("ab", chr(0xF0001)),  # a tail longer than one code point
]


def _name_lists() -> list[tuple[str, ...]]:
    rng = random.Random(31)
    out = [(), ("",), ("a",), ("", "a"), ("ab", "a", "abc"), ("a" * 512,), ("x.y", "x*", "(")]
    for _ in range(1500):
        pool = _PLAIN if rng.random() < 0.5 else list("abcde_.*?()[]{}|^$+\x7f ")
        names = ("".join(rng.choice(pool) for _ in range(rng.randrange(0, 7))) for _ in range(8))
        out.append(tuple(dict.fromkeys(list(names)[: rng.randrange(0, 8)])))
    return out


def _with_recipes(fn, names, tail, other):
    lower._ATOM_RECIPES.clear()
    objects._unit_not_in.cache_clear()
    text = fn(names, tail, other)
    return text, list(lower._ATOM_RECIPES.items())


def test_c_text_and_recipes_equal_the_python_build() -> None:
    for names in _name_lists():
        for tail, other in _TAILS:
            want = _with_recipes(objects._key_trie, names, tail, other)
            got = _with_recipes(lower.key_trie_text, names, tail, other)
            assert got == want, (names, tail)


@pytest.mark.parametrize("names", [("é",), ('a"',), ("a\\b",), ("tab\t",), ("a" * 513,)])
def test_other_names_are_left_to_python(names) -> None:
    assert lower.key_trie_text(names, "x", "y") is None
    assert objects._key_not_in.__wrapped__(names, "x", "y") == objects._key_trie(names, "x", "y")


def test_the_language_is_the_other_keys() -> None:
    """The default tail and unit written out: ``re`` fullmatches a sampled string iff its
    ``json.dumps`` body is not one of the names."""
    rng = random.Random(7)
    names = ("order_id", "customer", "items", "total", "", "a.b")
    regex = re.compile(objects.key_not_in(list(names)))
    samples = list(names) + [n + c for n in names for c in "_xé"] + [n[:-1] for n in names if n]
    samples += ["".join(rng.choice("abcdeilmnorstu_.é\n") for _ in range(rng.randrange(0, 9)))]
    samples += [
        "".join(rng.choice("otaldi_") for _ in range(rng.randrange(0, 9))) for _ in range(400)
    ]
    for s in samples:
        body = json.dumps(s, ensure_ascii=False)[1:-1]
        assert (regex.fullmatch(body) is not None) == (s not in names), s
