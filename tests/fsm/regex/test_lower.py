"""The one-pass lowering (``regex.lower``) against ``re``'s parser path of ``parse.lower``.

For every text the fast path takes, its term must denote the same language as the
``re`` path's term (checked by a bisimulation of derivatives in one arena), and ``re``
must accept the text; what it does not take returns None. Texts: the patterns and
definitions the JSON Schema converter writes for MaskBench schemas, hand-picked corner
cases of Python's syntax, and seeded random regexes.
"""

from __future__ import annotations

import json
import random
import re
import warnings

import pytest

from benchmarks.corpus import CORPORA
from structgen.errors import StructgenError
from structgen.fsm.deadline import NEVER
from structgen.fsm.json_schema import json_schema_to_shared
from structgen.fsm.regex import parse
from structgen.fsm.regex.lower import fast_lower
from structgen.fsm.regex.terms import BYTES, EMPTY, TermArena


def _same_language(arena: TermArena, a: int, b: int, limit: int = 400) -> bool:
    seen = {(a, b)}
    todo = [(a, b)]
    while todo and len(seen) < limit:
        x, y = todo.pop()
        if arena.nullable[x] != arena.nullable[y] or (x == EMPTY) != (y == EMPTY):
            return False
        masks = arena.front(x) | arena.front(y)
        classes = [(1 << 256) - 1]
        for mask in masks:
            classes = [part for c in classes for part in (c & mask, c & ~mask) if part]
        for c in classes:
            byte = (c & -c).bit_length() - 1
            pair = (arena.derivative(x, byte), arena.derivative(y, byte))
            if (pair[0] == EMPTY) != (pair[1] == EMPTY):
                return False
            if pair not in seen:
                seen.add(pair)
                todo.append(pair)
    return True


def _check(texts: list[str], use_c: bool = True) -> int:
    """Lower ``texts`` (definitions then pattern) both ways; returns how many the fast
    path took (``use_c``: its C token loop where built, else its Python loop)."""
    arena = TermArena()
    shared: list[int] = []
    memo: dict[str, int] = {}
    taken = 0
    for text in texts:
        fast = fast_lower(
            text,
            parse._Lowering(arena, text, NEVER, shared),
            memo,
            parse.MAX_NESTING,
            use_c=use_c,
        )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = parse.parse(text)
            slow = parse._Lowering(arena, text, NEVER, shared).seq(list(tree), tree.state.flags)
        except StructgenError:
            assert fast is None, text
            return taken
        if fast is not None:
            taken += 1
            assert _same_language(arena, fast, slow), text
        shared.append(slow)
    return taken


CORNERS = [
    "[]a]",
    "[^]a]",
    "[a-]",
    "[-a]",
    "[a-c-e]",
    r"[a\-z]",
    r"[\d\s-]",
    "a{,3}",
    "a{3,}",
    "a{2,5}?",
    "a*?b+?c??",
    "(a|)",
    "(|a)b",
    r"\x41\u00e9\U0001F600",
    r"[\U00010000-\U0010ffff]+",  # a range past the placeholders: taken (ranges never are)
    r"[\x80-\U0010ffff]x",
    r"[a\U000f0000]",  # a single reserved code point in a class: left to re
    r"\.\[\]\{\}\(\)\|\*\+\?",
    "}",
    "]",
    "a{2}{3}",
    "a**",
    "(?i)a",
    "(?P<x>a)",
    "^a",
    "a$",
    r"\bx",
    r"\1",
    "a{",
    "x{1,2",
    "a{}",
    "{,}",
    "[[a]",
    "[a--b]",
    r"[\b]",
    "(a",
    "a)",
    "*a",
    "a|*",
    r"[\d-z]",
    "[z-a]",
    "a{5,2}",
    r"\U00110000",
    r"\q",
    "a++",
    "(?:a|b)+?",
    "é+",
    "[é-ï]x",
    "[^é]",
    r"[\x00-\x1f\\\"]",
    r"\\u[0-9a-fA-F]{4}",
    ".",
    "[.]",
    "a.b",
    r"\w\W\s\S\d\D",
    "[^\\w]",
    "\ud800",
    "[\ud800-\udfff]",
    "x{0}",
    "x{0,0}y",
    "(?:)*",
    "()",
    "a{4294967295}",
    "a{1,4294967296}",
    "\U000f0000",
    "a{\u0663}",
    "a{1,\u0663}",
    "\\x4",
    "\\u12",
    "[a",
    "[^]",
    "[]",
    "x{,}",
    "x{3,x}",
    "(?x)",
    "d?[^bt1,][^]xb",
    "[]xb",
    "a[^]",
    "x[a\\",
    "[]a\\",
    "[^]a[b]",
]
LOOPS = [pytest.param(True, id="c-loop"), pytest.param(False, id="python-loop")]


@pytest.mark.parametrize("use_c", LOOPS)
@pytest.mark.parametrize("text", CORNERS)
def test_corner_cases(text: str, use_c: bool) -> None:
    _check([text], use_c)


def test_unicode_digits_are_not_counts() -> None:
    # re's parser reads only ASCII digits in {m,n}: "a{\u0663}" is the literal text
    for use_c in (True, False):
        arena = TermArena()
        assert fast_lower("a{\u0663}", parse._Lowering(arena, "", NEVER), {}, 9, use_c) is None
    assert re.fullmatch("a{\u0663}", "a{\u0663}")


def _random_regex(rng: random.Random, depth: int = 0) -> str:
    atoms = ["a", "b", "é", r"\.", r"\d", r"\x41", "[a-c]", "[^ab]", "[]x]", ".", "ab", '"', r"\\"]
    parts = []
    for _ in range(rng.randint(1, 4)):
        if depth < 4 and rng.random() < 0.3:
            inner = "|".join(_random_regex(rng, depth + 1) for _ in range(rng.randint(1, 3)))
            atom = rng.choice(["(?:", "("]) + inner + ")"
        else:
            atom = rng.choice(atoms)
        parts.append(
            atom + rng.choice(["", "", "*", "+", "?", "{2}", "{1,3}", "{,2}", "{2,}", "*?", "{0}"])
        )
    return "".join(parts)


@pytest.mark.parametrize("use_c", LOOPS)
def test_random_regexes(use_c: bool) -> None:
    rng = random.Random(3)
    taken = sum(_check([_random_regex(rng)], use_c) for _ in range(150))
    assert taken >= 145


def converter_texts(per_subset: int):
    """The definitions then the pattern the converter writes for the first ``per_subset``
    MaskBench schemas of each subset (skips the test without the corpus)."""
    plain = CORPORA / "jsonschemabench" / "plain"
    if not plain.exists():
        pytest.skip(f"{plain} not found")
    for sub in sorted(p for p in plain.iterdir() if p.is_dir()):
        for f in sorted(sub.glob("*.json"))[:per_subset]:
            try:
                pattern, defs = json_schema_to_shared(
                    json.loads(f.read_text())["schema"], strict=False, allow_extra_properties=True
                )
            except StructgenError:
                continue
            if len(pattern) + sum(map(len, defs)) <= 200_000:
                yield defs + [pattern]


@pytest.mark.parametrize("use_c", LOOPS)
def test_converter_output(use_c: bool) -> None:
    taken = total = 0
    for texts in converter_texts(2):
        taken += _check(texts, use_c)
        total += len(texts)
    assert taken >= 0.9 * total  # the converter's output takes the fast path


def test_lower_uses_re_errors() -> None:
    for bad in ("(a", "a**", "(?<=a)b"):
        with pytest.raises(StructgenError):
            parse.lower(bad, TermArena())
    assert re.fullmatch("[]a]+", "a]a")
    arena = TermArena()
    assert _same_language(arena, parse.lower("[]a]+", arena), parse.lower("(?:]|a)+", arena))


@pytest.mark.parametrize("use_c", LOOPS)
def test_astral_ranges_stay_on_the_fast_path(use_c: bool) -> None:
    """A class range past U+F0000 is never a placeholder: the JSON Schema converter's big
    classes (``[\\U00010000-\\U0010ffff]``) do not send the whole text to re's parser."""
    assert _check([r'"[\U00010000-\U0010ffff]+"', r"[\x80-\U0010ffff]x"], use_c) == 2
    assert _check([r"[a\U000f0000]"], use_c) == 0  # a single one is left to re


def test_ascii_class_writes_the_mask_re_reads() -> None:
    """``lower.ascii_class`` on seeded random ASCII masks (runs of every length, control
    codes, the class's own syntax, 0x7F): ``re`` matches exactly the mask's bytes in the
    token it writes, ``_ascii_class_mask`` reads it back (or leaves it to the slow reader),
    and the term a lowering takes from the recipe it leaves is the one byte set that
    lowering the token from scratch (a fresh arena, the recipes emptied) builds."""
    from structgen.fsm.regex import lower

    rng = random.Random(11)
    masks = [1, 1 << 0x7F, (1 << 0x80) - 1, (1 << 0x80) - (1 << 0x20), 1 << ord("-")]
    masks += [rng.getrandbits(rng.choice([8, 40, 128])) << rng.randint(0, 7) for _ in range(1500)]
    masks = [m & ((1 << 0x80) - 1) for m in masks]
    for mask in [m for m in masks if m]:
        token = lower.ascii_class(mask)
        assert sum(1 << b for b in range(0x100) if re.fullmatch(token, chr(b))) == mask, token
        assert lower._ascii_class_mask(token[1:-1]) in (None, mask), token
        taken = TermArena()
        got = parse.lower(token, taken)
        lower._ATOM_RECIPES.pop(token)
        scratch = TermArena()
        built = parse.lower(token, scratch)  # (ids differ where the slow reader interns more)
        assert (taken.kind[got], taken.args[got]) == (BYTES, (mask,)), token
        assert (scratch.kind[built], scratch.args[built]) == (BYTES, (mask,)), token
    for bad in (0, -1, 1 << 0x80):
        with pytest.raises(ValueError):
            lower.ascii_class(bad)


def test_ascii_class_mask_reads_classes_as_re_does() -> None:
    """``lower._ascii_class_mask`` on seeded random class bodies (ASCII characters, ranges,
    dashes anywhere, ``\\xHH`` and punctuation escapes, other escapes it leaves alone): each
    body it reads gives exactly the bytes ``re``'s class matches (every ASCII byte, none
    above), and ``re`` compiles the class."""
    from structgen.fsm.regex.lower import _ascii_class_mask

    rng = random.Random(5)
    pieces = [*"aAzZ09 !~{}.^_", "-", "-", "\\x7f", "\\x41", "\\x80", "\\xe9", "\\-", "\\]"]
    pieces += ["\\\\", "\\[", "\\^", "\\.", "\\ ", "\\t", "\\d", "[", "é", "a-z", "0-9", "z-a"]
    read = 0
    for _ in range(4000):
        body = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        mask = _ascii_class_mask(body)
        if mask is None:
            continue
        read += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pattern = re.compile("[" + body + "]")
        want = sum(1 << b for b in range(0x80) if pattern.fullmatch(chr(b)))
        assert mask == want, body
        assert not any(pattern.fullmatch(ch) for ch in "\x80é☃"), body
    assert read > 1000
