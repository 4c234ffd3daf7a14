"""Keywords outside the document's draft (vendor ``x-*`` keys, other drafts' keywords,
misspellings) are ignored, as the drafts and ``jsonschema`` read them, with one warning per
keyword naming its pointers and the keyword a near miss probably means; annotations are
dropped silently; ``x-structgen-*`` keys that structgen does not define are refused."""

from __future__ import annotations

from urllib.parse import urljoin

import jsonschema
import pytest
from jsonschema_specifications import REGISTRY

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.vocabulary import DRAFT_KEYWORDS, kind_of, suggestion

from .._reference import assert_agrees_with_jsonschema

DRAFT3 = "http://json-schema.org/draft-03/schema#"
DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize("name", sorted(DRAFT_KEYWORDS))
def test_draft_keywords_are_the_metaschema_properties(name) -> None:
    """The table is what each draft's metaschema lists (2019-09+: its vocabularies) and what
    jsonschema asserts (draft 4's ``$ref`` is JSON Reference, outside its metaschema)."""
    meta = getattr(jsonschema.validators, name).META_SCHEMA
    if "allOf" in meta:
        parts = [REGISTRY.contents(urljoin(meta["$id"], s["$ref"])) for s in meta["allOf"]]
        listed = {k for part in parts for k in part.get("properties", {})}
    else:
        listed = set(meta["properties"])
    assert DRAFT_KEYWORDS[name] == listed | set(getattr(jsonschema.validators, name).VALIDATORS)


MISSPELT = {
    "type": "object",
    "properties": {
        "weight": {"type": "number", "x-unit": "kg", "maxmimum": 3},
        "name": {"type": "string", "minlength": 3, "descripton": "a name"},
        "tags": {"type": "array", "items": {"type": "string", "self": {"vendor": "x"}}},
    },
    "required": ["weight"],
    "additonalProperties": False,
    "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod"}],
}


def test_unknown_keywords_are_ignored_under_strict() -> None:
    grammar = compile_json_schema(MISSPELT, allow_extra_properties=True)
    assert_agrees_with_jsonschema(
        grammar,
        MISSPELT,
        ['{"weight":7}', '{"weight":1.5,"name":"x"}', '{"weight":0,"tags":["a"]}'],
        ['{"name":"x"}', '{"weight":"7"}', '{"weight":1,"tags":[1]}', '{"weight":1,"name":2}'],
    )
    by_key = {w.split("'")[1]: w for w in grammar.warnings if "unknown keyword" in w}
    assert set(by_key) == {
        "x-unit",
        "maxmimum",
        "minlength",
        "descripton",
        "self",
        "additonalProperties",
        "x-kubernetes-group-version-kind",
    }
    assert "/properties/weight" in by_key["x-unit"] and "did you mean" not in by_key["x-unit"]
    assert "at # " in by_key["additonalProperties"]
    assert "/properties/tags/items" in by_key["self"]
    for key, meant in [
        ("additonalProperties", "additionalProperties"),
        ("minlength", "minLength"),
        ("descripton", "description"),
        ("maxmimum", "maximum"),
    ]:
        assert f"did you mean {meant!r}?" in by_key[key], by_key[key]


@pytest.mark.parametrize("key", ["nullable", "x-nullable"])
def test_openapis_nullable_is_ignored_with_what_to_write(key) -> None:
    # not JSON Schema: null stays invalid (as jsonschema says), the warning says how to allow it
    schema = {"type": "object", "properties": {"a": {"type": "string", key: True}}}
    grammar = compile_json_schema(schema)
    assert_agrees_with_jsonschema(grammar, schema, ['{"a":"x"}'], ['{"a":null}'])
    (warning,) = [w for w in grammar.warnings if repr(key) in w]
    assert "/properties/a" in warning and '"type": [<type>, "null"]' in warning


def test_one_warning_per_keyword_with_its_pointers() -> None:
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer", "x-order": i} for i, k in enumerate("abcde")},
    }
    warnings = [w for w in compile_json_schema(schema).warnings if "x-order" in w]
    assert len(warnings) == 1
    assert "/properties/a, /properties/b, /properties/c and 2 more" in warnings[0]


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("additonalProperties", "additionalProperties"),
        ("minlength", "minLength"),
        ("descripton", "description"),
        ("comment", "$comment"),
        ("$allOf", "allOf"),
        ("x-minLength", None),  # a vendor key is not a misspelling
        ("gallery_properties", None),
    ],
)
def test_suggestion(key, meant) -> None:
    assert suggestion(key, "Draft202012Validator") == meant


def test_unknown_keywords_in_merged_subschemas() -> None:
    """allOf members and $ref targets that disagree on an unknown keyword still merge."""
    schema = {
        "allOf": [
            {"$ref": "#/components/schemas/A"},
            {"type": "object", "x-order": 2, "required": ["a"]},
        ],
        "components": {"schemas": {"A": {"properties": {"a": {"type": "integer"}}, "x-order": 1}}},
    }
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    assert_agrees_with_jsonschema(grammar, schema, ['{"a":1}'], ['{"a":"x"}', "{}"])
    assert any("'x-order'" in w for w in grammar.warnings)


def test_keywords_of_another_draft_follow_the_document() -> None:
    """``$schema`` picks the vocabulary: ``const`` asserts nothing in draft 4 (jsonschema
    ignores it there) and ``divisibleBy`` nothing in 2020-12; in draft 3 ``divisibleBy`` is a
    keyword, which structgen does not enforce, so strict refuses it."""
    schema = {"$schema": DRAFT4, "type": "integer", "const": 3}
    grammar = compile_json_schema(schema)
    assert_agrees_with_jsonschema(grammar, schema, ["3", "4"], ['"3"'])
    assert any("'const'" in w and "draft 6" in w for w in grammar.warnings), grammar.warnings
    assert kind_of("const", "Draft7Validator") == "keyword"
    schema = {"type": "integer", "divisibleBy": 3}
    assert_agrees_with_jsonschema(compile_json_schema(schema), schema, ["4"], ["4.5"])
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema({"$schema": DRAFT3, "type": "integer", "divisibleBy": 3})
    assert info.value.keyword == "divisibleBy" and info.value.pointer == ""
    draft6 = "http://json-schema.org/draft-06/schema#"  # if/then/else: keywords from draft 7
    schema = {"$schema": draft6, "type": "integer", "if": True, "then": {"minimum": 5}}
    assert_agrees_with_jsonschema(compile_json_schema(schema), schema, ["3", "6"], ["3.5"])
    schema = {"$schema": DRAFT7, "type": "integer", "if": True, "then": {"minimum": 5}}
    assert_agrees_with_jsonschema(compile_json_schema(schema), schema, ["6"], ["3"])
    schema = {"$schema": DRAFT7, "type": "integer", "$defs": {"a": {"minimum": 3}}}
    assert compile_json_schema(schema).warnings == []  # $defs: an annotation in every draft


def test_unknown_structgen_extension_is_refused() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-structgen-cpy": "b"}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == "x-structgen-cpy" and info.value.pointer == "/properties/a"
    warnings = compile_json_schema(schema, strict=False).warnings
    assert any("'x-structgen-cpy'" in w and "/properties/a" in w for w in warnings)


ANNOTATED = {
    "$id": "https://example.com/person",
    "$comment": "a person",
    "title": "Person",
    "description": "d",
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "title": "Name",
            "default": "x",
            "examples": ["a"],
            "deprecated": True,
            "readOnly": True,
            "writeOnly": False,
            "contentMediaType": "text/plain",
            "contentEncoding": "7bit",
            "$anchor": "name",
        },
        "pet": {
            "oneOf": [
                {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]},
                {"type": "object", "properties": {"kind": {"const": "dog"}}, "required": ["kind"]},
            ],
            "discriminator": {"propertyName": "kind"},
            "example": {"kind": "cat"},
        },
        "blob": {"type": "string", "contentSchema": {"type": "integer"}},
    },
    "required": ["name"],
}


def test_annotations_are_dropped_silently() -> None:
    grammar = compile_json_schema(ANNOTATED, allow_extra_properties=True)
    assert_agrees_with_jsonschema(
        grammar,
        ANNOTATED,
        ['{"name":"q"}', '{"name":"q","pet":{"kind":"dog"}}', '{"name":"q","blob":"z"}'],
        ['{"pet":{"kind":"cat"}}', '{"name":"q","pet":{"kind":"cow"}}', '{"name":1}'],
    )
    assert not [w for w in grammar.warnings if "keyword" in w], grammar.warnings


def test_pydantic_discriminated_union_compiles_under_strict() -> None:
    """pydantic writes ``oneOf`` + OpenAPI's ``discriminator`` + a ``const`` tag per branch;
    the discriminator is an annotation and the const tags make the branches disjoint."""
    from typing import Literal, Union

    from pydantic import BaseModel, Field

    class Cat(BaseModel):
        kind: Literal["cat"]
        lives: int

    class Dog(BaseModel):
        kind: Literal["dog"]
        bark: str

    class Owner(BaseModel):
        pet: Union[Cat, Dog] = Field(discriminator="kind")  # noqa: UP007 - as users write it

    schema = Owner.model_json_schema()
    assert "discriminator" in schema["properties"]["pet"]
    grammar = compile_json_schema(Owner)
    assert_agrees_with_jsonschema(
        grammar,
        schema,
        ['{"pet":{"kind":"cat","lives":9}}', '{"pet":{"kind":"dog","bark":"woof"}}'],
        ['{"pet":{"kind":"dog","lives":9}}', '{"pet":{"kind":"cow","lives":1}}', "{}"],
    )
    assert not [w for w in grammar.warnings if "discriminator" in w]
