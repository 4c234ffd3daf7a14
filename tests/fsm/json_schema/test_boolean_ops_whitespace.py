"""``not``, ``oneOf``, ``if``/``then``/``else`` and ``allOf`` follow the schema's whitespace
rule inside their operands, as every other keyword does: under ``whitespace=n`` (and
``"flexible"``) a value checked by a complemented operand (``boolean_ops``' canonical
mode) takes the same whitespace runs as the rest of the document, under ``"compact"``
none.

Brute force against the reference predicate of ``test_whitespace_runs``: a document is
accepted exactly when ``json.loads`` reads it, ``jsonschema`` finds it valid, and its
longest whitespace run is at most ``n`` (0 for compact). The documents are the canonical
spellings of small instances (keys in the schemas' order, integers and plain strings:
the one spelling canonical mode writes) with whitespace runs between their tokens: each
gap alone at 1, ``n`` and ``n + 1`` characters, every gap at once at each of those, and
every pair of gaps at ``n`` (where a document has at most 3 gaps, every combination).
Each construct is checked at the root and as a member value and
an array item, next to keywords that take whitespace themselves; ``strict=True`` (an
operand that is not exact raises) and ``allow_extra_properties=True`` (an object schema
without properties takes any keys, as ``additionalProperties`` absent means inside the
constructs' canonical mode).
"""

from __future__ import annotations

import itertools
import json

import pytest

from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema import FLEXIBLE_WS_MAX
from tests.fsm.json_schema.test_whitespace_runs import _TOKEN, _reference, _run

INT = {"type": "integer"}
STR = {"type": "string"}
ARR = {"type": "array", "items": INT}

# (schema, instances): constructs lowered by boolean_ops, and the shortcuts beside them
CASES = [
    # not of types: combine's shortcut (no complement)
    ({"not": STR}, [1, "x", [], [1, 2], {}, {"a": [1]}]),
    # not of an array/object schema: complemented in canonical mode
    ({"not": {"type": "array", "maxItems": 1}}, [1, [], [1], [1, 2], [[], [1]], {"a": []}]),
    (
        {"not": {"type": "object", "properties": {"a": INT}, "required": ["a"]}},
        [{}, {"a": 1}, {"a": "x"}, {"a": [1, 2]}, {"b": []}, [1]],
    ),
    (
        {"type": "array", "items": INT, "not": {"type": "array", "maxItems": 1}},
        [[], [1], [1, 2], [1, 2, 3], ["x", 1]],
    ),
    (
        {
            "oneOf": [
                {"type": "array", "items": INT, "maxItems": 2},
                {"type": "array", "items": INT, "minItems": 2},
            ]
        },
        [[], [1], [1, 2], [1, 2, 3], {}],
    ),
    (
        {
            "oneOf": [
                {"type": "object", "properties": {"a": INT, "b": ARR}, "required": ["a"]},
                {"type": "object", "properties": {"a": INT, "b": ARR}, "required": ["b"]},
            ]
        },
        [{}, {"a": 1}, {"b": []}, {"a": 1, "b": [2]}, {"b": [1, 2]}],
    ),
    (
        {
            "if": {"type": "object", "properties": {"a": INT}, "required": ["a"]},
            "then": {"properties": {"b": ARR}},
            "else": {"type": "array", "items": STR},
        },
        [{"a": 1}, {"a": 1, "b": [1]}, {"a": 1, "b": ["x"]}, [], ["x", "y"], [1], {}],
    ),
    (
        {"allOf": [ARR, {"not": {"type": "array", "items": {"const": 1}, "minItems": 1}}]},
        [[], [1], [1, 1], [1, 2], [[1]]],
    ),
    (
        {"allOf": [{"type": "object", "properties": {"a": ARR}}, {"not": {"required": ["a"]}}]},
        [{}, {"a": []}, {"a": [1, 2]}, [1]],
    ),
    # nested: a complement inside a complemented operand
    (
        {"not": {"type": "array", "items": {"not": INT}}},
        [[], [1], ["x"], [1, [2]], [[1, 2]], {"a": [1]}],
    ),
]


def _placed(schema):
    """``schema`` at the root, as a member value after a plain member, as an array item."""
    member = {
        "type": "object",
        "properties": {"k": INT, "v": schema},
        "required": ["v"],
        "additionalProperties": False,
    }
    return [
        ("root", schema, lambda x: x),
        ("member", member, lambda x: {"k": 1, "v": x}),
        ("item", {"type": "array", "items": schema}, lambda x: [x]),
    ]


def _spellings(instance, n: int):
    """The canonical spelling of ``instance`` with whitespace runs between its tokens."""
    compact = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    tokens = _TOKEN.findall(compact)
    assert "".join(tokens) == compact, compact
    gaps = len(tokens) - 1
    lengths = sorted({0, 1, n, n + 1})
    if gaps <= 3:
        runs_list = set(itertools.product(lengths, repeat=gaps))
    else:
        runs_list = {(length,) * gaps for length in lengths}
        for i, length in itertools.product(range(gaps), lengths):
            runs_list.add(tuple(length if k == i else 0 for k in range(gaps)))
        for i, j in itertools.combinations(range(gaps), 2):
            runs_list.add(tuple(n if k in (i, j) else 0 for k in range(gaps)))
    for runs in sorted(runs_list):
        parts = [tokens[0]]
        for k, (length, token) in enumerate(zip(runs, tokens[1:])):
            parts += [_run(length, k), token]
        yield "".join(parts)


def _check(grammar, schema, instances, n: int) -> int:
    wrong, seen = [], 0
    for instance in instances:
        for text in _spellings(instance, n):
            seen += 1
            want = _reference(text, schema, n)
            if grammar.matches(text) != want:
                wrong.append((text, want))
    assert not wrong, (schema, n, len(wrong), wrong[:5])
    return seen


@pytest.mark.parametrize("whitespace", ["compact", 2, "flexible"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_boolean_operands_take_the_schemas_whitespace(case: int, whitespace) -> None:
    schema, instances = CASES[case]
    n = {"compact": 0, "flexible": FLEXIBLE_WS_MAX}.get(whitespace, whitespace)
    for where, placed, wrap in _placed(schema):
        grammar = compile_json_schema(placed, whitespace=whitespace, allow_extra_properties=True)
        wrapped = [wrap(x) for x in instances]
        assert _check(grammar, placed, wrapped, n) > len(instances), where
