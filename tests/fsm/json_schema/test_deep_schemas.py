"""Schemas and patterns nested 10, 1,000 and 100,000 deep (#20): the first two compile and
match exactly, the last raises ``GrammarTooComplexError`` naming the depth limit; nothing
raises ``RecursionError``.

Reference: ``jsonschema`` at depth 10 (valid and invalid instances); at depth 1,000
``jsonschema`` itself recurses past Python's limit, so the reference is the instance's
construction: exactly the nesting the schema describes is valid, one level more or less,
or a wrong leaf, is not (the same construction is checked against ``jsonschema`` at 10).
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from structgen.errors import GrammarTooComplexError
from structgen.fsm import compile_json_schema, compile_regex
from structgen.fsm.nesting import MAX_SCHEMA_DEPTH
from structgen.fsm.regex.parse import MAX_NESTING


def _arrays(n: int):
    schema: dict = {"type": "integer"}
    for _ in range(n):
        schema = {"type": "array", "items": schema, "minItems": 1, "maxItems": 1}
    return schema, lambda k, leaf="1": "[" * k + leaf + "]" * k


def _objects(n: int):
    schema: dict = {"type": "integer"}
    for _ in range(n):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema, lambda k, leaf="1": '{"a":' * k + leaf + "}" * k


def _all_of(n: int):
    schema: dict = {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
    for i in range(n):
        schema = {"allOf": [schema, {"minItems": 1}] if i == 0 else [schema]}
    # valid: 1 or 2 integers; k stands for the number of items
    return schema, lambda k, leaf="1": "[" + ",".join([leaf] * k) + "]"


def _refs(n: int):
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
    return {
        "$defs": defs,
        "$ref": "#/$defs/d0",
    }, lambda k, leaf="1": "[" + ",".join([leaf] * k) + "]"


KINDS = {"arrays": _arrays, "objects": _objects, "allOf": _all_of, "$ref": _refs}
# (instance shape parameter, valid?) for each kind, given its depth n
CASES = {
    "arrays": lambda n: [
        (n, "1", True),
        (n - 1, "1", False),
        (n + 1, "1", False),
        (n, '"x"', False),
    ],
    "objects": lambda n: [
        (n, "1", True),
        (n - 1, "1", False),
        (n + 1, "1", False),
        (n, "true", False),
    ],
    "allOf": lambda n: [
        (1, "1", True),
        (2, "7", True),
        (0, "1", False),
        (3, "1", False),
        (1, "1.5", False),
    ],
    "$ref": lambda n: [(0, "1", True), (2, "7", True), (3, "1", False), (1, "null", False)],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", list(KINDS))
def test_depth_10_matches_jsonschema(kind):
    schema, text = KINDS[kind](10)
    grammar = compile_json_schema(schema)
    for k, leaf, valid in CASES[kind](10):
        instance = text(k, leaf)
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(instance)) is valid
        assert grammar.matches(instance) is valid, (kind, instance)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", list(KINDS))
def test_depth_1000_compiles_and_matches(kind):
    schema, text = KINDS[kind](1000)
    grammar = compile_json_schema(schema)
    for k, leaf, valid in CASES[kind](1000):
        assert grammar.matches(text(k, leaf)) is valid, (kind, k, leaf)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["arrays", "objects", "allOf"])
def test_depth_100000_names_the_limit(kind):
    schema, _ = KINDS[kind](100_000)
    with pytest.raises(GrammarTooComplexError, match=f"more than {MAX_SCHEMA_DEPTH} .*depth limit"):
        compile_json_schema(schema)


@pytest.mark.timeout(60)
def test_ref_chain_past_the_limit_names_it():
    """A ``$ref`` chain nests without JSON nesting: the converter's own budget refuses it.

    The conversion's time budget is raised (within the hang guard) so that a loaded machine
    reaches the depth limit, the budget under test, rather than the 10 s default."""
    schema, _ = _refs(MAX_SCHEMA_DEPTH + 10)
    with pytest.raises(GrammarTooComplexError, match="MAX_SCHEMA_DEPTH"):
        compile_json_schema(schema, max_convert_seconds=50.0)


@pytest.mark.timeout(60)
def test_deep_invalid_schema_is_reported_with_its_pointer():
    """Past what ``jsonschema``'s recursive validator takes, the metaschema is still
    checked (subschema by subschema) and the error names the pointer."""
    schema: dict = {"type": "strnig"}
    for _ in range(500):
        schema = {"type": "array", "items": schema}
    from structgen.errors import InvalidSchemaError

    with pytest.raises(InvalidSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.pointer == "/items" * 500 + "/type"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [10, 1000])
def test_nested_groups_match_like_re(depth):
    pattern = "(" * depth + "a|b" + ")" * depth + "(?:" * depth + "c+" + ")" * depth
    grammar = compile_regex(pattern)
    flat = re.compile("(?:a|b)c+")  # re recurses per group: the same language, unnested
    if depth <= 100:
        flat = re.compile(pattern)
    for text in ["ac", "bccc", "a", "c", "abc", "acx", ""]:
        assert grammar.matches(text) is bool(flat.fullmatch(text)), text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [90, 1000])
def test_nested_repeats_are_derived_without_recursion(depth):
    """Optional groups nested ``depth`` deep: the first derivative walks the whole nesting
    (``(x?)?`` is kept as two repetitions). ``re`` is the reference where it can parse."""
    pattern = "(?:" * depth + "a" + ")?" * depth + "b"
    grammar = compile_regex(pattern)
    reference = re.compile(pattern if depth <= 100 else "a?b")
    for text in ["ab", "b", "aab", "a", "", "abb"]:
        assert grammar.matches(text) is bool(reference.fullmatch(text)), text


@pytest.mark.timeout(60)
def test_groups_100000_deep_name_the_limit():
    with pytest.raises(GrammarTooComplexError, match=f"MAX_NESTING={MAX_NESTING}"):
        compile_regex("(" * 100_000 + "a" + ")" * 100_000)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", ["const", "enum"])
def test_deep_values_name_the_limit(key):
    from structgen.fsm.nesting import MAX_VALUE_DEPTH

    shallow, deep = 1, 1
    for _ in range(MAX_VALUE_DEPTH):
        shallow = [shallow]
    for _ in range(1000):
        deep = [deep]
    wrap = (lambda v: v) if key == "const" else (lambda v: [v])
    grammar = compile_json_schema({key: wrap(shallow)})
    assert grammar.matches("[" * MAX_VALUE_DEPTH + "1" + "]" * MAX_VALUE_DEPTH)
    with pytest.raises(GrammarTooComplexError, match=f"{key} values nest more than"):
        compile_json_schema({key: wrap(deep)})
