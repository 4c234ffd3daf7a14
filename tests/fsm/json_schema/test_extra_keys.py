"""Extra (undeclared) keys under ``allow_extra_properties=True``: never a declared name.

An object's extra keys are the JSON strings outside its declared names (``properties``
and ``required``), spelled canonically; ``propertyNames`` narrows them further. A repeated
declared key would make the parsed object (last value wins) differ from the one the
grammar checked, so it is never generated. ``""`` is a key like any other: an extra key
where the schema allows extra keys, unless declared or refused by ``propertyNames``.
Extra keys may repeat one another (no automaton keeps an unbounded set of keys
distinct); both values then follow the same subschema.

Reference: ``jsonschema`` on every object of at most three members over the declared
names, a new name and ``""`` (brute force): a text the grammar matches has no repeated
declared key and parses to a valid instance; a valid instance without repeated keys,
written in the canonical order (``benchmarks.corpus.canonical``), is matched.
"""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from benchmarks.corpus import canonical, dump
from structgen.fsm import compile_json_schema

INT = {"type": "integer"}
STR = {"type": "string"}
SCHEMAS = {
    "open": {"type": "object", "properties": {"a": INT}},
    "required": {"type": "object", "properties": {"a": INT, "b": STR}, "required": ["b"]},
    "additional": {"type": "object", "properties": {"a": INT}, "additionalProperties": STR},
    "pattern": {"type": "object", "properties": {"a": INT}, "patternProperties": {"^a|^z": INT}},
    "names-max": {"type": "object", "properties": {"a": INT}, "propertyNames": {"maxLength": 1}},
    "names-min": {"type": "object", "properties": {"a": INT}, "propertyNames": {"minLength": 1}},
    "names-enum": {
        "type": "object",
        "properties": {"a": INT},
        "propertyNames": {"enum": ["a", "z"]},
    },
    "names-any": {"type": "object", "properties": {"a": INT}, "propertyNames": {}},
    "names-required": {"type": "object", "required": ["a"], "propertyNames": {"pattern": "^[az]$"}},
    "names-pattern": {
        "type": "object",
        "properties": {"a": INT},
        "patternProperties": {"^[ab]": INT},
        "propertyNames": {"maxLength": 1},
    },
    "names-pattern-closed": {
        "type": "object",
        "patternProperties": {"^[ab]": INT},
        "additionalProperties": False,
        "propertyNames": {"not": {"const": "b"}},
    },
    "names-false": {"type": "object", "properties": {"a": INT}, "propertyNames": False},
    "empty-declared": {"type": "object", "properties": {"": INT}},
    "dependent": {"type": "object", "properties": {"a": INT}, "dependentRequired": {"a": ["z"]}},
}
KEYS = ["a", "b", "z", ""]
VALUES = ["1", '"x"']


def _texts() -> list[str]:
    out = []
    for n in range(4):
        for keys in itertools.product(KEYS, repeat=n):
            for values in itertools.product(VALUES, repeat=n):
                out.append("{" + ",".join(f'"{k}":{v}' for k, v in zip(keys, values)) + "}")
    return out


TEXTS = _texts()


def _declared(schema: dict) -> set[str]:
    return set(schema.get("properties", {})) | set(schema.get("required", []))


@pytest.mark.parametrize("name", SCHEMAS)
def test_extra_keys_against_jsonschema(name: str) -> None:
    schema = SCHEMAS[name]
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    validator = jsonschema.Draft202012Validator(schema)
    declared = _declared(schema)
    for text in TEXTS:
        keys = [k for k, _ in json.loads(text, object_pairs_hook=lambda pairs: pairs)]
        repeated = {k for k in keys if keys.count(k) > 1}
        instance = json.loads(text)
        if grammar.matches(text):
            assert not repeated & declared, f"{text}: a declared key written twice"
            assert validator.is_valid(instance), f"{text}: matched but invalid"
        elif not repeated and validator.is_valid(instance):
            assert dump(canonical(instance, schema, schema)) != text, f"{text}: valid, refused"


@pytest.mark.parametrize("strict", [True, False])
def test_named_cases(strict: bool) -> None:
    open_object = compile_json_schema(
        {"type": "object", "properties": {"a": INT}}, allow_extra_properties=True, strict=strict
    )
    assert not open_object.matches('{"a":1,"a":2}')
    assert not open_object.matches('{"a":1,"a":"x"}')
    assert not open_object.matches('{"b":1,"a":2}')  # a declared key is written in its place
    assert open_object.matches('{"a":1,"b":2}')  # a new key
    assert open_object.matches('{"a":1,"":2}')  # "" is a key JSON and the schema allow
    assert not open_object.matches('{"a":1,"\\u0061":2}')  # extra keys are spelled canonically
    named = compile_json_schema(
        {"type": "object", "properties": {"a": INT}, "propertyNames": {"minLength": 1}},
        allow_extra_properties=True,
        strict=strict,
    )
    assert named.matches('{"a":1,"b":2}')
    assert not named.matches('{"a":1,"a":2}')
    assert not named.matches('{"a":1,"":2}')  # propertyNames refuses ""
    assert not named.warnings


@pytest.mark.parametrize("listed", [0, 1])
def test_min_properties_needing_two_extra_keys(listed: int) -> None:
    """Two equal extra keys would count twice where the parsed object holds one: a minimum
    that needs two undeclared keys or more compiles (exact for distinct keys) with a
    warning naming the keyword and its pointer; one extra key is exact, no warning."""
    props = {"a": INT} if listed else {}
    inner = {
        "type": "object",
        "properties": props,
        "required": list(props),
        "minProperties": 2 + listed,
        "additionalProperties": INT,
    }
    schema = {"type": "object", "properties": {"o": inner}, "required": ["o"]}
    head = '{"o":{"a":1,' if listed else '{"o":{'
    counted = compile_json_schema(schema, allow_extra_properties=True)
    assert [w for w in counted.warnings if "minProperties at /properties/o" in w]
    assert counted.matches(head + '"y":1,"z":2}}')  # two distinct extra keys: valid
    assert not counted.matches(head + '"z":1}}')  # too few
    inner["minProperties"] = 1 + listed  # one extra key: exact, nothing to note
    exact = compile_json_schema(schema, allow_extra_properties=True)
    assert not exact.warnings
    assert exact.matches(head + '"z":1}}') and not exact.matches(head.rstrip(",") + "}}")


def test_a_key_tries_unit_is_the_negated_class_term() -> None:
    """``objects._unit_not_in`` writes "one character other than these" as an ASCII class
    plus one shared non-ASCII-or-escape group: the very term (one id in one arena) of the
    negated class it replaced, for random excluded sets (ASCII, escapes, non-ASCII)."""
    import random

    from structgen.fsm.json_schema import objects
    from structgen.fsm.regex import parse
    from structgen.fsm.regex.terms import TermArena

    def negated_class(excluded: frozenset[str]) -> str:  # the former text
        plain = sorted(u for u in excluded if len(u) == 1)
        cls = '[^"\\\\\\x00-\\x1f' + "".join("\\" + c if c in "\\]^-[" else c for c in plain)
        escapes = objects._escape_classes([e for e in objects._ESCAPES if e not in excluded])
        return "(?:" + "|".join([cls + "]", *escapes]) + ")"

    rng = random.Random(3)
    ascii_units = [chr(c) for c in range(0x20, 0x80) if chr(c) not in '"\\']
    pool = ascii_units + objects._ESCAPES[:10] + ["é", "☃"]
    cases = [frozenset(ascii_units), frozenset()]
    for k in [1, 2, 3, 5, 20, 90] * 40:
        cases.append(frozenset(rng.sample(pool, k)))
    for excluded in cases:
        arena = TermArena()
        want = parse.lower(negated_class(excluded), arena)
        assert parse.lower(objects._unit_not_in(excluded), arena) == want, sorted(excluded)


def test_key_units_are_json_dumps_spelling() -> None:
    """``objects._units`` spells each character as ``json.dumps`` (``ensure_ascii=False``)
    does, over the first 0x3000 code points, the surrogates and the last plane's end."""
    import json

    from structgen.fsm.json_schema import objects

    chars = [chr(c) for c in [*range(0x3000), *range(0xD7F0, 0xE010), *range(0x10FFF0, 0x110000)]]
    want = [json.dumps(ch, ensure_ascii=False)[1:-1] for ch in chars]
    assert objects._units("".join(chars)) == want


def test_key_trie_is_every_canonical_key_but_the_names() -> None:
    """An extra key is any canonically spelled string but a declared name (the key trie,
    each node's leaving unit written ``[class]tail|other tail``): brute force over random
    name sets (ASCII, escaped and non-ASCII characters) and keys near them (each name, its
    prefixes, one-character extensions and changes, random strings), valued ``true``
    (no declared property's value), against set membership."""
    import random

    rng = random.Random(11)
    alphabet = list("abnmz_-{") + ['"', "\\", "\n", "\x01", "é", "☃", "\U0001f600", " ", "\x7f"]
    for _ in range(40):
        names = {
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
            for _ in range(rng.randint(1, 4))
        }
        schema = {"type": "object", "properties": {n: INT for n in sorted(names)}}
        grammar = compile_json_schema(schema, allow_extra_properties=True)
        keys = set(names)
        for n in names:
            keys.update(n[:i] for i in range(len(n)))
            keys.update(n + c for c in alphabet)
            keys.update(n[:i] + c + n[i + 1 :] for i in range(len(n)) for c in 'az"é')
        keys.update("".join(rng.choice(alphabet) for _ in range(5)) for _ in range(10))
        for key in keys:
            text = "{" + json.dumps(key, ensure_ascii=False) + ":true}"
            assert grammar.matches(text) == (key not in names), (sorted(names), key)


def _unit_not_in_before(excluded: frozenset[str], other: str, then: str) -> str:
    """``objects._unit_not_in`` as it was before its two ASCII paths shared
    ``objects._ascii_left`` (session 28), kept verbatim as the reference text."""
    from structgen.fsm.json_schema import objects as o
    from structgen.fsm.regex.lower import ascii_class

    joined = "".join(excluded)
    if len(joined) == len(excluded) and "" not in excluded and joined.isascii():
        mask = o._PLAIN_UNITS
        for u in joined:
            mask &= ~(1 << ord(u))
        if len(then) == 1:
            return ascii_class(mask) + then + "|" + other + then if mask else other + then
        return o._alt_text([ascii_class(mask), other] if mask else [other]) + then
    plain = [u for u in excluded if len(u) == 1]
    escapes = (
        o._escape_classes([e for e in o._ESCAPES if e not in excluded])
        if len(plain) < len(excluded)
        else o._ALL_ESCAPES
    )
    if all(u < "\x80" for u in plain):
        mask = o._PLAIN_UNITS
        for u in plain:
            mask &= ~(1 << ord(u))
        if len(then) == 1 and escapes == o._ALL_ESCAPES:
            return ascii_class(mask) + then + "|" + other + then if mask else other + then
        rest = other if escapes == o._ALL_ESCAPES else o._alt_text([o._NON_ASCII, *escapes])
        return o._alt_text([ascii_class(mask), rest] if mask else [rest]) + then
    plain.sort()
    cls = '[^"\\\\\\x00-\\x1f' + "".join("\\" + c if c in "\\]^-[" else c for c in plain) + "]"
    return "(?:" + "|".join([cls] + escapes) + ")" + then


def test_unit_not_in_text_is_unchanged_by_the_shared_ascii_helper() -> None:
    """``objects._unit_not_in`` writes the very text it wrote before its fast path and its
    ASCII branch shared one helper: every subset of a small pool (ASCII units including the
    class's own syntax, escapes, ``""``, non-ASCII) and random subsets of every unit
    (all printable ASCII, all escapes), each with an empty, a one-code-point (placeholder)
    and a long ``then``, and the default and a placeholder ``other``."""
    import random

    from structgen.fsm.json_schema import objects

    unit_not_in = objects._unit_not_in.__wrapped__  # not the memo: the function itself
    small = ["a", "]", "-", "^", " ", "\x7f", "\\n", "\\u0001", "\\\\", "", "é", "\U0001f600"]
    cases = [
        frozenset(u for i, u in enumerate(small) if bits >> i & 1)
        for bits in range(1 << len(small))
    ]
    ascii_units = [chr(c) for c in range(0x20, 0x80) if chr(c) not in '"\\']
    pool = ascii_units + objects._ESCAPES + ["", "é", "☃", "\U0001f600"]
    rng = random.Random(28)
    cases += [frozenset(ascii_units), frozenset(ascii_units + objects._ESCAPES)]
    cases += [frozenset(rng.sample(pool, rng.randint(1, len(pool)))) for _ in range(500)]
    thens = ["", "\ue000", objects.CANON_CHAR + "*"]
    others = [objects._NON_ASCII_UNIT, "\ue001"]
    for excluded in cases:
        for then in thens:
            for other in others:
                want = _unit_not_in_before(excluded, other, then)
                assert unit_not_in(excluded, other, then) == want, (sorted(excluded), then)
