"""Recursive and mutually recursive ``$ref`` at the default depth 10, checked by jsonschema.

Instances are built to an exact nesting depth, validated with ``jsonschema`` and
serialized canonically (schema property order, compact); depth 10 must be accepted,
depth 11 rejected with the depth named in the warnings. Size must grow linearly with
the depth (shared definitions), also for nodes with several recursive references.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.errors import GrammarTooComplexError, UnsupportedSchemaError
from structgen.fsm import compile_json_schema, compile_regex, json_schema_to_regex

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "left": {"$ref": "#/$defs/node"},
                "right": {"$ref": "#/$defs/node"},
            },
            "required": ["value"],
        }
    },
    "$ref": "#/$defs/node",
}
LINKED = {
    "type": "object",
    "properties": {"v": {"type": "string"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    "required": ["v", "next"],
}
MUTUAL = {
    "definitions": {  # draft-07 spelling; A holds Bs, B holds an A
        "A": {
            "type": "object",
            "properties": {
                "x": {"type": "integer"},
                "bs": {"type": "array", "items": {"$ref": "#/definitions/B"}},
            },
            "required": ["x"],
        },
        "B": {
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/A"}, "tag": {"enum": ["p", "q"]}},
            "required": ["tag"],
        },
    },
    "$ref": "#/definitions/A",
}
WIDE = {
    "$defs": {
        "n": {
            "type": "object",
            "properties": {  # three recursive refs per level
                "a": {"$ref": "#/$defs/n"},
                "b": {"$ref": "#/$defs/n"},
                "c": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2},
            },
        }
    },
    "$ref": "#/$defs/n",
}


def _tree(depth: int) -> dict:
    node: dict = {"value": depth}
    for i in range(depth - 1):
        node = (
            {"value": -i, "left": {"value": 0}, "right": node}
            if i % 2
            else {"value": i, "left": node}
        )
    return node


def _linked(depth: int) -> dict:
    node: dict = {"v": "end", "next": None}
    for i in range(depth - 1):
        node = {"v": f"n{i}\n\u00e9", "next": node}
    return node


def _mutual(depth: int) -> dict:
    """An A nested ``depth`` times (each through a B)."""
    node: dict = {"x": 0}
    for i in range(depth - 1):
        node = {"x": i, "bs": [{"tag": "p"}, {"a": node, "tag": "q"}]}
    return node


def _wide(depth: int) -> dict:
    node: dict = {}
    for i in range(depth - 1):
        node = [{"a": node}, {"b": node, "c": [{}]}, {"c": [{}, node]}][i % 3]
    return node


def _canonical(instance, schema) -> str:
    jsonschema.validate(instance, schema)
    return json.dumps(instance, separators=(",", ":"), ensure_ascii=False)


CASES = [
    ("tree", TREE, _tree),
    ("linked", LINKED, _linked),
    ("mutual", MUTUAL, _mutual),
    ("wide", WIDE, _wide),
]


@pytest.mark.parametrize("name,schema,build", CASES, ids=[c[0] for c in CASES])
def test_default_depth_10_accepted_11_rejected(name, schema, build) -> None:
    grammar = compile_json_schema(schema, max_recursion_depth=10)  # unrolled (regular)
    assert grammar.matches(_canonical(build(10), schema))
    for depth in range(1, 10):
        assert grammar.matches(_canonical(build(depth), schema)), depth
    assert not grammar.matches(_canonical(build(11), schema))
    assert any("unrolled to depth 10" in w for w in grammar.warnings), grammar.warnings


@pytest.mark.parametrize("name,schema,build", CASES, ids=[c[0] for c in CASES])
def test_invalid_deep_instances_rejected(name, schema, build) -> None:
    grammar = compile_json_schema(schema)
    text = _canonical(build(9), schema)
    # break the innermost value: every mutation below is jsonschema-invalid
    for bad in (
        text.replace('"x":0', '"x":"0"'),
        text.replace('"v":"end"', '"v":1'),
        text.replace('"value":9', '"value":9.5'),
        text.replace('"tag":"q"', '"tag":"r"'),
        text.replace("{}", "[]", 1),
    ):
        if bad == text:
            continue
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(bad), schema)
        assert not grammar.matches(bad), bad


@pytest.mark.parametrize("name,schema,build", CASES, ids=[c[0] for c in CASES])
def test_size_linear_in_depth(name, schema, build) -> None:
    sizes = {}
    for depth in (5, 10, 20):
        grammar = compile_json_schema(schema, max_recursion_depth=depth)
        sizes[depth] = (len(grammar.definitions), grammar.dfa.arena.num_terms)
        assert grammar.matches(_canonical(build(depth), schema))
        assert not grammar.matches(_canonical(build(depth + 1), schema))
    # the written-out regex would grow like 3**depth for WIDE; shared, it is linear
    assert sizes[20][0] <= 2.5 * sizes[10][0] and sizes[20][1] <= 2.5 * sizes[10][1], sizes
    assert sizes[10][0] <= 2.5 * sizes[5][0], sizes


def test_written_out_regex_same_language_when_small() -> None:
    schema, build = TREE, _tree
    text = json_schema_to_regex(schema, max_recursion_depth=4)
    grammar = compile_regex(text)
    assert grammar.matches(_canonical(build(4), schema))
    assert not grammar.matches(_canonical(build(5), schema))
    assert compile_json_schema(schema, max_recursion_depth=4).pattern == text


def test_written_out_regex_too_large_is_a_clear_error() -> None:
    with pytest.raises(GrammarTooComplexError, match="max_recursion_depth"):
        json_schema_to_regex(WIDE, max_recursion_depth=12)


def test_uncuttable_recursion_names_the_depth() -> None:
    schema = {"type": "object", "properties": {"child": {"$ref": "#"}}, "required": ["child"]}
    with pytest.raises(UnsupportedSchemaError, match="max_recursion_depth=10") as info:
        compile_json_schema(schema, max_recursion_depth=10)
    assert info.value.keyword == "$ref"


def test_reserved_code_points_are_text_not_placeholders() -> None:
    # raw U+F0000.. in pattern texts are placeholders; user text there must stay literal
    pua = "\U000f0000\U000f0001"
    schema = {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {
                    "k": {"enum": [pua, "plain"]},
                    "p": {"type": "string", "pattern": "^\U000f0000+$"},
                    "n": {"$ref": "#/$defs/n"},
                },
            }
        },
        "$ref": "#/$defs/n",
    }
    grammar = compile_json_schema(schema)
    ok = {"k": pua, "p": "\U000f0000\U000f0000", "n": {"n": {"k": "plain"}}}
    assert grammar.matches(_canonical(ok, schema))
    for bad in ({"k": "\U000f0001"}, {"p": "\U000f0001"}, {"n": {"k": "\U000f0000"}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        assert not grammar.matches(json.dumps(bad, separators=(",", ":"), ensure_ascii=False))


def test_depth_option_validated() -> None:
    with pytest.raises(ValueError, match="max_recursion_depth"):
        compile_json_schema(TREE, max_recursion_depth=0)


# A -> B -> C -> A, and A -> C, C -> B: one recursive group of three references
TRIO = {
    "$defs": {
        "A": {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"$ref": "#/$defs/B"},
                "c": {"$ref": "#/$defs/C"},
            },
            "required": ["a"],
        },
        "B": {
            "type": "object",
            "properties": {"b": {"enum": ["x", "y"]}, "c": {"$ref": "#/$defs/C"}},
            "required": ["b"],
        },
        "C": {
            "type": "object",
            "properties": {
                "c": {"type": "boolean"},
                "k": {"type": "array", "items": {"$ref": "#/$defs/A"}},
                "b": {"$ref": "#/$defs/B"},
            },
            "required": ["c"],
        },
    },
    "$ref": "#/$defs/A",
}


def _trio(entries: int) -> dict:
    """An A whose chain A -> B -> C -> A ... has ``entries`` group expansions in all."""
    kinds = ["A", "B", "C"]
    node: dict = {"A": {"a": 0}, "B": {"b": "x"}, "C": {"c": True}}[kinds[(entries - 1) % 3]]
    for i in range(entries - 2, -1, -1):
        kind = kinds[i % 3]
        node = (
            {"a": i, "b": node}
            if kind == "A"
            else {"b": "y", "c": node}
            if kind == "B"
            else {"c": False, "k": [{"a": 1}, node]}
        )
    return node


def test_group_of_three_unrolled_max_depth_in_all() -> None:
    """A group of 3+ mutually recursive references is expanded max_recursion_depth times
    along a path in all (the memo key is the group depth: WashingtonPost's group of 7
    had millions of per-reference count vectors and ran past the time budget)."""
    grammar = compile_json_schema(TRIO, max_recursion_depth=10)
    for entries in range(1, 11):
        assert grammar.matches(_canonical(_trio(entries), TRIO)), entries
    assert not grammar.matches(_canonical(_trio(11), TRIO))
    assert any("unrolled to depth 10" in w for w in grammar.warnings), grammar.warnings
    bad = _canonical(_trio(9), TRIO).replace('"c":true', '"c":1')
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(bad), TRIO)
    assert not grammar.matches(bad)
    # each reference expanded at most once per group depth
    assert len(grammar.definitions) <= 3 * 11 + 10, len(grammar.definitions)


def test_washington_post_recursive_group_compiles_small() -> None:
    """WashingtonPost wp_8 (bench full sample): 7 mutually recursive definitions; the
    conversion ran past its 10 s budget (the same expansions redone ~200k times)."""
    from pathlib import Path

    path = (
        Path(__file__).resolve().parents[3].parent
        / "shared"
        / "corpora"
        / "jsonschemabench"
        / "plain"
        / "WashingtonPost"
        / "WashingtonPost---wp_8_Normalized.json"
    )
    if not path.exists():
        pytest.skip("corpus not present")
    from structgen.fsm.json_schema import json_schema_to_shared

    doc = json.loads(path.read_text())
    pattern, definitions = json_schema_to_shared(
        doc["schema"], strict=False, allow_extra_properties=True
    )
    # what makes it fast: text and definitions (was 12 MB / 1,190 definitions)
    assert sum(map(len, definitions)) + len(pattern) < 600_000
    assert len(definitions) < 1000


THROUGH_ALLOF = {
    "$defs": {
        "n": {
            "type": "object",
            "properties": {
                "k": {"allOf": [{"$ref": "#/$defs/n"}, {"required": ["v"]}]},
                "v": {"type": "integer"},
            },
        }
    },
    "$ref": "#/$defs/n",
}


def _through_allof(depth: int) -> dict:
    node: dict = {"v": 0}
    for i in range(depth - 1):
        node = {"k": node, "v": i}
    return node


def test_recursion_through_allof_is_cut_like_ref() -> None:
    """A reference merged by allOf is on the path like a $ref (Handwritten mod309 recursed
    through allOf until Python's RecursionError)."""
    grammar = compile_json_schema(THROUGH_ALLOF, max_recursion_depth=10)
    for depth in range(1, 12):  # the root is one expansion; the allOf adds one per level
        assert grammar.matches(_canonical(_through_allof(depth), THROUGH_ALLOF)) == (depth <= 10), (
            depth
        )
    bad = _canonical(_through_allof(6), THROUGH_ALLOF).replace('"v":0', '"v":"0"')
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(bad), THROUGH_ALLOF)
    assert not grammar.matches(bad)
    missing = {"k": {"k": {"v": 1}}}  # the outer k lacks the required v
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(missing, THROUGH_ALLOF)
    assert not grammar.matches(json.dumps(missing, separators=(",", ":")))
