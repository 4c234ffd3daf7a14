"""Flexible whitespace: every run between two tokens is at most the bound, and no shorter.

Brute force against a reference predicate: a document is accepted exactly when
``json.loads`` reads it, ``jsonschema`` finds it valid, and its longest whitespace run is at
most ``n`` (the documented contract of ``whitespace=n``). The documents are the canonical
spellings of small instances (members in the schema's order, as ``json.dumps`` writes
them, the one form the grammars write) with whitespace runs of 0 to ``2n`` characters put
between their tokens: every combination where a document has at most ``FULL_GAPS`` gaps,
else every pair of gaps (the rest empty) and every gap at once at ``n``. Both the regex path
and the grammar (CFG) path of a recursive schema are checked.
"""

from __future__ import annotations

import itertools
import json
import re

import jsonschema
import pytest

from structgen.fsm import compile_json_schema
from structgen.fsm.grammar.compile import CompiledCFG

FULL_GAPS = 4  # documents with at most this many gaps get every combination of runs
_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|[\[\]{}:,]'
)
_RUN = re.compile(r"[ \t\n\r]+")

INT = {"type": "integer"}
STR = {"type": "string"}

# (schema, instances): instances valid or not; each is spelled canonically
CASES = [
    ({"type": "array", "items": INT}, [[], [1], [1, 2], [1, "x"], {}]),
    ({"type": "array", "items": INT, "minItems": 1, "maxItems": 2}, [[], [1], [1, 2], [1, 2, 3]]),
    ({"type": "array", "items": INT, "maxItems": 0}, [[], [1]]),
    ({"type": "array", "prefixItems": [INT], "items": False}, [[], [1], [1, 2]]),
    ({"type": "array", "prefixItems": [INT, STR]}, [[], [1], [1, "x"], [1, "x", None]]),
    ({"type": "array", "contains": {"const": 1}}, [[], [1], [2, 1], [2]]),
    ({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True}, [[], [1], [2, 1], [1, 1]]),
    ({"type": "array", "items": {"type": "array", "items": INT}}, [[], [[]], [[], []], [[1], []]]),
    (
        {"type": "object", "properties": {"a": INT, "b": STR}},
        [{}, {"a": 1}, {"b": "x"}, {"a": 1, "b": "x"}],
    ),
    (
        {"type": "object", "properties": {"a": INT, "b": STR, "c": INT}, "required": ["b"]},
        [{}, {"b": "x"}, {"a": 1, "b": "x"}, {"b": "x", "c": 2}, {"a": 1, "b": "x", "c": 2}],
    ),
    (
        {"type": "object", "properties": {"a": INT, "b": INT}, "maxProperties": 1},
        [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}],
    ),
    (
        {"type": "object", "properties": {"a": INT}, "additionalProperties": INT},
        [{}, {"a": 1}, {"k": 2}, {"a": 1, "k": 2}],
    ),
    ({"type": "object", "additionalProperties": INT, "minProperties": 1}, [{}, {"k": 1}]),
    (
        {"type": "object", "additionalProperties": INT, "maxProperties": 1},
        [{}, {"k": 1}, {"k": 1, "j": 2}],
    ),
    ({"type": "object", "additionalProperties": INT}, [{}, {"k": 1}, {"k": 1, "j": 2}, {"k": "x"}]),
    ({"type": "object", "maxProperties": 0}, [{}, {"k": 1}]),
    (
        {"type": "object", "patternProperties": {"^x": INT}, "additionalProperties": False},
        [{}, {"x": 1}, {"x": 1, "xy": 2}, {"k": 1}],
    ),
    (
        {
            "type": "object",
            "properties": {"a": INT},
            "propertyNames": {"maxLength": 1},
            "additionalProperties": True,
        },
        [{}, {"a": 1}, {"b": []}, {"a": 1, "b": {}}, {"bc": 1}],
    ),
    (
        {"type": "object", "properties": {"a": INT, "b": INT}, "dependentRequired": {"a": ["b"]}},
        [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}],
    ),
    (
        {
            "type": "object",
            "properties": {
                "x": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"y": {"type": "array", "items": INT}},
                    },
                }
            },
        },
        [{}, {"x": []}, {"x": [{}]}, {"x": [{"y": []}]}, {"x": [{}, {"y": [1]}]}],
    ),
    (
        {
            "anyOf": [
                {"type": "array", "items": INT},
                {"type": "object", "additionalProperties": True},
            ]
        },
        [[], {}, [1], {"k": []}],
    ),
    ({"const": {"a": [], "b": {}}}, [{"a": [], "b": {}}, {"a": []}]),
    ({"enum": [[], {}, [[]], {"a": {}}]}, [[], {}, [[]], {"a": {}}, [{}]]),
    ({}, [[], {}, [[]], {"a": {}}, [1, {}], {"a": [], "b": {"c": []}}]),
]

TREE = {
    "type": "object",
    "properties": {"v": INT, "kids": {"type": "array", "items": {"$ref": "#"}}},
}
LINKED = {"type": "object", "properties": {"data": {}, "next": {"$ref": "#"}}}
# recursive schemas: compiled as grammar rules (max_recursion_depth=None)
CFG_CASES = [
    (TREE, [{}, {"v": 1}, {"kids": []}, {"kids": [{}]}, {"v": 1, "kids": [{"kids": []}]}]),
    (LINKED, [{}, {"data": []}, {"data": {}}, {"next": {}}, {"data": [{}], "next": {"next": {}}}]),
]


def _run(length: int, salt: int) -> str:
    return "".join(" \n\t\r"[(salt + i) % 4] for i in range(length))


def _spellings(instance, n: int):
    """The canonical spelling of ``instance`` with whitespace runs between its tokens."""
    compact = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    tokens = _TOKEN.findall(compact)
    assert "".join(tokens) == compact, compact
    gaps = len(tokens) - 1
    lengths = sorted({0, 1, n, n + 1, 2 * n})
    if gaps <= FULL_GAPS:
        runs_list = itertools.product(lengths, repeat=gaps)
    else:
        runs_list = [tuple([n] * gaps)]
        for i, j in itertools.combinations(range(gaps), 2):
            for a, b in itertools.product(lengths, repeat=2):
                runs = [0] * gaps
                runs[i], runs[j] = a, b
                runs_list.append(tuple(runs))
    for runs in runs_list:
        parts = [tokens[0]]
        for k, (length, token) in enumerate(zip(runs, tokens[1:])):
            parts += [_run(length, k), token]
        yield "".join(parts)


def _reference(text: str, schema, n: int) -> bool:
    """JSON, valid under ``schema``, and no whitespace run longer than ``n``."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if not cls(schema).is_valid(value):
        return False
    return max((len(r) for r in _RUN.findall(text)), default=0) <= n


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


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_regex_path_runs_match_reference(case: int, n: int) -> None:
    schema, instances = CASES[case]
    grammar = compile_json_schema(schema, whitespace=n)
    assert not isinstance(grammar, CompiledCFG)
    assert _check(grammar, schema, instances, n) > len(instances)


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("case", range(len(CFG_CASES)))
def test_grammar_path_runs_match_reference(case: int, n: int) -> None:
    schema, instances = CFG_CASES[case]
    grammar = compile_json_schema(schema, whitespace=n)
    assert isinstance(grammar, CompiledCFG)
    assert _check(grammar, schema, instances, n) > len(instances)


def test_empty_containers_under_flexible() -> None:
    from structgen.fsm.json_schema import FLEXIBLE_WS_MAX as n

    for schema in [{"type": "array", "items": INT}, {"type": "object", "properties": {"a": INT}}]:
        grammar = compile_json_schema(schema, whitespace="flexible")
        empty = "[]" if schema["type"] == "array" else "{}"
        assert grammar.matches(empty[0] + " " * n + empty[1])
        assert not grammar.matches(empty[0] + " " * (n + 1) + empty[1])
        assert not grammar.matches(empty[0] + " " * (2 * n) + empty[1])


@pytest.mark.parametrize("pattern", [r"[ \t\n\r]{0,2}", r"\s{0,3}"])
def test_server_whitespace_pattern_holds_in_empty_containers(pattern: str) -> None:
    """A request's ``whitespace_pattern``: every run of an accepted document matches it."""
    from structgen.fsm import compile_spec
    from structgen.server.protocol import CompletionRequest
    from structgen.server.serving import request_constraint

    for schema, empty in [({"type": "array", "items": INT}, "[]"), ({"type": "object"}, "{}")]:
        so = {"json": schema, "whitespace_pattern": pattern}
        term, _ = request_constraint(
            CompletionRequest(model="m", prompt="x", structured_outputs=so)
        )
        grammar = compile_spec(term)
        for k in range(8):
            text = empty[0] + " " * k + empty[1]
            assert grammar.matches(text) == bool(re.fullmatch(pattern, " " * k)), (schema, text)
