"""``$ref`` within one document (``json_schema.ids``): JSON pointers with percent-encoding, empty
tokens and ``~`` escapes, ``$id`` base URIs, ``$anchor`` / draft-7 ``"$id": "#foo"`` anchors,
``$dynamicRef`` where the dynamic scope cannot matter, and draft 3-7 "``$ref`` overrides its
siblings". Every instance's expected validity is
written out and checked against ``jsonschema`` too; the grammar must agree with both."""

from __future__ import annotations

import pytest

from benchmarks.corpus import canonical, dump
from structgen.errors import InvalidSchemaError, UnsupportedSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.ids import RefIndex

from .._reference import jsonschema_valid as _valid

D7 = "http://json-schema.org/draft-07/schema#"
D4 = "http://json-schema.org/draft-04/schema#"

CASES = [
    # percent-encoded pointer tokens, ~0 / ~1 escapes
    (
        {
            "$defs": {
                "a%b": {"type": "integer"},
                'c"d': {"type": "string"},
                "t~/s": {"type": "null"},
            },
            "properties": {
                "x": {"$ref": "#/$defs/a%25b"},
                "y": {"$ref": "#/$defs/c%22d"},
                "z": {"$ref": "#/$defs/t~0~1s"},
            },
        },
        [
            ({"x": 1, "y": "s", "z": None}, True),
            ({"x": "1"}, False),
            ({"y": 2}, False),
            ({"z": 0}, False),
        ],
    ),
    # empty pointer tokens name the key ""
    (
        {
            "$defs": {"": {"$defs": {"": {"type": "boolean"}}}},
            "allOf": [{"$ref": "#/$defs//$defs/"}],
        },
        [(True, True), (1, False), ("", False)],
    ),
    # a $ref into an array of subschemas
    (
        {
            "type": "object",
            "properties": {
                "q": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "p": {"$ref": "#/properties/q/anyOf/1"},
            },
        },
        [({"p": None}, True), ({"q": "s", "p": None}, True), ({"p": "s"}, False)],
    ),
    # 2020-12 $anchor, also under a base URI change
    (
        {"$ref": "#num", "$defs": {"n": {"$anchor": "num", "type": "integer"}}},
        [(3, True), ("3", False)],
    ),
    (
        {
            "$id": "http://example.com/root.json",
            "$ref": "http://example.com/other.json#s",
            "$defs": {
                "o": {"$id": "other.json", "$defs": {"x": {"$anchor": "s", "type": "string"}}}
            },
        },
        [("a", True), (1, False)],
    ),
    # "#items" is an anchor, never the pointer "/items" (that would be this very schema)
    (
        {
            "type": "array",
            "items": {"$ref": "#items"},
            "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"}},
        },
        [(["a", "b"], True), (["a", 1], False), ([[]], False)],
    ),
    # a relative $ref resolves against the enclosing $id, and a pointer is relative to
    # the resource its URI names
    (
        {
            "$id": "http://example.com/a/root.json",
            "properties": {"n": {"$ref": "b/node.json#/$defs/leaf"}},
            "$defs": {
                "node": {"$id": "b/node.json", "$defs": {"leaf": {"type": "boolean"}}},
                "leaf": {"type": "string"},
            },
        },
        [({"n": True}, True), ({"n": "s"}, False)],
    ),
    # URN base
    (
        {
            "$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed",
            "properties": {"f": {"$ref": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed#/$defs/b"}},
            "$defs": {"b": {"type": "integer"}},
        },
        [({"f": 1}, True), ({"f": "1"}, False)],
    ),
    # recursion across resources by relative URI
    (
        {
            "$id": "http://example.com/tree",
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "node"}}},
            "$defs": {
                "node": {
                    "$id": "http://example.com/node",
                    "type": "object",
                    "properties": {"v": {"type": "integer"}, "sub": {"$ref": "tree"}},
                    "required": ["v"],
                }
            },
        },
        [
            ({"kids": [{"v": 1, "sub": {"kids": [{"v": 2}]}}]}, True),
            ({"kids": [{"v": 1, "sub": {"kids": [{"v": "x"}]}}]}, False),
        ],
    ),
    # 2020-12: $ref's siblings apply
    (
        {"$defs": {"arr": {"type": "array"}}, "$ref": "#/$defs/arr", "maxItems": 1},
        [([1], True), ([1, 2], False), ("s", False)],
    ),
    # draft 7: $ref overrides its siblings, "$id": "#foo" is an anchor, an $id beside $ref
    # does not change the base
    (
        {
            "$schema": D7,
            "definitions": {"arr": {"type": "array"}},
            "properties": {"a": {"$ref": "#/definitions/arr", "maxItems": 1}},
        },
        [({"a": [1, 2, 3]}, True), ({"a": "s"}, False)],
    ),
    (
        {
            "$schema": D7,
            "allOf": [{"$ref": "#foo"}],
            "definitions": {"A": {"$id": "#foo", "type": "integer"}},
        },
        [(1, True), ("a", False)],
    ),
    (
        {
            "$schema": D7,
            "$id": "http://example.com/base/",
            "definitions": {
                "abs": {"$id": "http://example.com/foo.json", "type": "string"},
                "rel": {"$id": "foo.json", "type": "number"},
            },
            "allOf": [{"$id": "http://example.com/", "$ref": "foo.json"}],
        },
        [(1, True), ("a", False)],
    ),
    # draft 4 spells the identifier "id"
    (
        {
            "$schema": D4,
            "id": "http://example.com/r.json",
            "properties": {"p": {"$ref": "s.json"}},
            "definitions": {"s": {"id": "s.json", "type": "null"}},
        },
        [({"p": None}, True), ({"p": 1}, False)],
    ),
    # $dynamicRef where the dynamic scope cannot matter: a pointer fragment, an anchor no
    # $dynamicAnchor made, the only $dynamicAnchor of its name
    (
        {
            "$id": "http://example.com/root",
            "type": "array",
            "items": {"$dynamicRef": "#it"},
            "$defs": {"foo": {"$dynamicAnchor": "it", "type": "string"}},
        },
        [(["a"], True), ([1], False)],
    ),
    (
        {
            "$id": "http://example.com/root",
            "$ref": "list",
            "$defs": {
                "foo": {"$dynamicAnchor": "it", "type": "string"},
                "list": {
                    "$id": "list",
                    "type": "array",
                    "items": {"$dynamicRef": "#it"},
                    "$defs": {"it": {"$anchor": "it", "type": "integer"}},
                },
            },
        },
        [([1], True), (["a"], False)],
    ),
    (
        {"properties": {"f": {"$dynamicRef": "#/$defs/f"}}, "$defs": {"f": False}},
        [({}, True), ({"f": 1}, False)],
    ),
    # an "$id" inside enum data is not an identifier
    (
        {
            "$defs": {"real": {"$id": "http://example.com/id.json", "type": "integer"}},
            "anyOf": [
                {"$ref": "http://example.com/id.json"},
                {"enum": [{"$id": "http://example.com/id.json", "type": "string"}]},
            ],
        },
        [(1, True), ({"$id": "http://example.com/id.json", "type": "string"}, True), ("s", False)],
    ),
]


@pytest.mark.parametrize(("schema", "instances"), CASES)
def test_in_document_refs_agree_with_jsonschema(schema, instances) -> None:
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    for instance, expected in instances:
        assert _valid(schema, instance) == expected, instance  # the case itself is right
        text = dump(canonical(instance, schema, schema))
        assert grammar.matches(text) == expected, text


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ({"$ref": "#nowhere", "$defs": {"a": {"$anchor": "here"}}}, InvalidSchemaError),
        ({"$ref": "#/$defs/missing", "$defs": {}}, InvalidSchemaError),
        ({"$ref": "http://example.com/elsewhere.json"}, UnsupportedSchemaError),
        ({"$id": "http://example.com/r.json", "$ref": "other.json#/x"}, UnsupportedSchemaError),
        # two $dynamicAnchor "it": which one depends on the dynamic scope
        (
            {
                "$id": "http://example.com/root",
                "$ref": "list",
                "$defs": {
                    "foo": {"$dynamicAnchor": "it", "type": "string"},
                    "list": {
                        "$id": "list",
                        "type": "array",
                        "items": {"$dynamicRef": "#it"},
                        "$defs": {"it": {"$dynamicAnchor": "it"}},
                    },
                },
            },
            UnsupportedSchemaError,
        ),
    ],
)
def test_unresolvable_refs_raise(schema, error) -> None:
    with pytest.raises(error) as info:
        compile_json_schema(schema)
    if error is UnsupportedSchemaError:
        assert info.value.keyword in ("$ref", "$dynamicRef")


def test_rewritten_document_names_targets_by_pointer() -> None:
    schema = {
        "$id": "http://example.com/r.json",
        "$ref": "#a",
        "$defs": {
            "x~y": {"$anchor": "a", "type": "integer"},
            "sub": {
                "$id": "sub.json",
                "properties": {"p": {"$ref": "#/$defs/q"}},
                "$defs": {"q": {"type": "null"}},
            },
        },
    }
    index = RefIndex(schema)
    assert index.root["$ref"] == "#/$defs/x~0y"
    assert "$id" not in index.root and "$anchor" not in index.root["$defs"]["x~y"]
    sub = index.root["$defs"]["sub"]
    assert sub["properties"]["p"]["$ref"] == "#/$defs/sub/$defs/q"  # relative to sub.json
    assert index.resolve("#/$defs/sub/$defs/q", "") == {"type": "null"}
    assert schema["$defs"]["x~y"]["$anchor"] == "a"  # the input is not modified
    assert schema["$defs"]["sub"]["properties"]["p"]["$ref"] == "#/$defs/q"
