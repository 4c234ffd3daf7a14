"""Regression tests for the MaskBench instances ``benchmarks/bench_grammar.py --quick`` saw
rejected (issue 3): each valid instance, serialized as the bench and the corpus tests do
(schema property order, compact, spec reading of ``additionalProperties``), is accepted,
and ``jsonschema`` agrees it is valid; the schema's invalid instances stay rejected.

* Github_trivial o45018: extra keys under ``additionalProperties: true`` nest 3 containers
  deep (object > array > object); any-value was cut at 2 levels (fixed: ANY_VALUE_DEPTH).
* Github_easy o90919: ``params: {"type": "object"}`` holds keys; the bench compiled without
  ``allow_extra_properties`` (bench fixed: spec reading, as the corpus tests).
* MCPspec JSONRPCMessage: the instance lists ``id`` last; the bench fed it in instance key
  order, the compiler writes schema order (bench fixed: canonical order).
* MCPspec GetPromptResult (full sample): ``content`` is an anyOf of objects listing their
  properties in different orders; the canonical order was the union of all branches'
  (``type`` before ``data``), not the order of the branch the instance is valid under
  (fixed in ``benchmarks/corpus.canonical``, which the bench uses)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from benchmarks.corpus import CORPORA, canonical, dump
from structgen.fsm import compile_json_schema

PLAIN = CORPORA / "jsonschemabench" / "plain"
CASES = [
    "Github_trivial/Github_trivial---o45018.json",
    "Github_easy/Github_easy---o90919.json",
    "MCPspec/MCPspec---JSONRPCMessage.json",
    "MCPspec/MCPspec---GetPromptResult.json",
]

ORDER = {
    "effective_date": "2022-01-01T12:00:00Z",
    "grand_total": 100.0,
    "items": [{"discount_amt": 10.0, "quantity": 1, "sku": "SKU123"}],
    "shipping_address": {"city": "San Diego", "state": "CA"},
}
EMBEDDED = [  # reduced copies (schema, instance), run without the corpus
    (
        {"type": "object", "properties": {}, "additionalProperties": True},
        {"action": "catalog_get_config", "order": ORDER},
    ),
    (
        {
            "type": "object",
            "properties": {
                "commands": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "params": {"type": "object"}},
                        "required": ["name"],
                    },
                }
            },
        },
        {"commands": [{"name": "command1", "params": {"key1": "value1", "key2": "value2"}}]},
    ),
    (
        {
            "definitions": {"Id": {"type": ["string", "integer"]}},
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "id": {"$ref": "#/definitions/Id"},
                        "jsonrpc": {"const": "2.0"},
                        "method": {"type": "string"},
                    },
                    "required": ["id", "jsonrpc", "method"],
                },
                {
                    "type": "object",
                    "properties": {"jsonrpc": {"const": "2.0"}, "method": {"type": "string"}},
                    "required": ["jsonrpc", "method"],
                    "additionalProperties": False,
                },
            ],
        },
        {"jsonrpc": "2.0", "method": "m", "id": 1},
    ),
    (
        {
            "type": "object",
            "properties": {
                "c": {
                    "anyOf": [
                        {
                            "type": "object",
                            "properties": {
                                "ann": {"type": "integer"},
                                "text": {"type": "string"},
                                "type": {"const": "text"},
                            },
                            "required": ["text", "type"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {
                                "ann": {"type": "integer"},
                                "data": {"type": "string"},
                                "type": {"const": "image"},
                            },
                            "required": ["data", "type"],
                            "additionalProperties": False,
                        },
                    ]
                }
            },
        },
        {"c": {"ann": 1, "type": "image", "data": "x"}},
    ),
]


def _accepts(schema, instance, **options) -> bool:
    grammar = compile_json_schema(schema, allow_extra_properties=True, **options)
    return grammar.matches(dump(canonical(instance, schema, schema)))


def _valid(schema, instance) -> bool:
    return jsonschema.validators.validator_for(schema)(
        schema, format_checker=jsonschema.FormatChecker()
    ).is_valid(instance)


@pytest.mark.parametrize(("schema", "instance"), EMBEDDED)
def test_embedded_valid_instance_accepted(schema, instance) -> None:
    assert _valid(schema, instance)
    assert _accepts(schema, instance)


def test_any_value_depth_bound_rejects_past_it() -> None:
    schema = EMBEDDED[0][0]
    deep = {"k": json.loads("[" * 11 + "]" * 11)}  # 11 containers under the root object
    assert _valid(schema, deep)
    assert not _accepts(schema, deep)  # the documented ANY_VALUE_DEPTH bound (10)
    assert not _accepts(schema, []), "a non-object root"


@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
@pytest.mark.parametrize("path", CASES)
def test_corpus_instances(path) -> None:
    doc = json.loads((PLAIN / path).read_text(encoding="utf-8"))
    schema = doc["schema"]
    grammar = compile_json_schema(schema, strict=False, allow_extra_properties=True)
    for t in doc["tests"]:
        if t["valid"]:  # (some invalid ones fail only a format jsonschema has no checker for)
            assert _valid(schema, t["data"]), "jsonschema agrees the instance is valid"
        assert grammar.matches(dump(canonical(t["data"], schema, schema))) == t["valid"], t["data"]


def _wide_object(n: int) -> dict:
    uuid = {"type": "string", "format": "uuid"}
    return {
        "type": "object",
        "additionalProperties": True,
        "properties": {
            f"p{i}": {"type": "object", "additionalProperties": True, "properties": {"id": uuid}}
            if i % 2
            else uuid
            for i in range(n)
        },
    }


def _text_chars(schema) -> int:
    from structgen.fsm.json_schema import json_schema_to_shared

    pattern, definitions = json_schema_to_shared(schema, allow_extra_properties=True)
    return len(pattern) + sum(len(d) for d in definitions)


def test_optional_members_with_extras_linear_text() -> None:
    """Snowplow sp_384 (7 optional properties, extras allowed at two levels) wrote 551 kB
    of pattern and overran the 10 s compile budget: every optional member's tail was copied
    into every earlier member's branch (quadratic) and each extra key spelled the 33 JSON
    escapes as alternatives per name-trie node. Now linear, escapes as byte classes."""
    small, large = _text_chars(_wide_object(8)), _text_chars(_wide_object(16))
    assert large < 2.5 * small, (small, large)  # quadratic text would be ~4x
    assert large < 40_000
    schema = _wide_object(6)
    u = "123e4567-e89b-12d3-a456-426614174000"
    good = [
        {},
        {"p0": u},
        {"p1": {"id": u, "x": [1, {"y": None}]}, "p4": u, "zz": {"p0": 1}},
        {"p0": u, "p1": {}, "p2": u, "p3": {"id": u}, "p4": u, "p5": {}, "q\n": "\u0001"},
    ]
    bad = [{"p0": "x"}, {"p1": {"id": 3}}, {"p3": []}]
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    for inst in good + bad:
        valid = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.FormatChecker()
        ).is_valid(inst)
        assert valid == (inst in good)
        assert grammar.matches(dump(canonical(inst, schema, schema))) == valid, inst


@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
def test_snowplow_sp_384_pattern_is_small() -> None:
    doc = json.loads((PLAIN / "Snowplow/Snowplow---sp_384_Normalized.json").read_text())
    from structgen.fsm.json_schema import json_schema_to_shared

    pattern, definitions = json_schema_to_shared(
        doc["schema"], strict=False, allow_extra_properties=True
    )
    assert len(pattern) + sum(len(d) for d in definitions) < 50_000  # was 551,149 chars
    grammar = compile_json_schema(doc["schema"], strict=False, allow_extra_properties=True)
    for t in doc["tests"]:
        assert _valid(doc["schema"], t["data"]) == t["valid"]
        assert (
            grammar.matches(dump(canonical(t["data"], doc["schema"], doc["schema"]))) == t["valid"]
        )


def test_conversion_time_budget() -> None:
    """A schema whose conversion runs long ends in GrammarTooComplexError at the budget
    (WashingtonPost wp_8/17/78 converted for 155-369 s before failing), never a hang."""
    from structgen.errors import GrammarTooComplexError
    from structgen.fsm.json_schema import json_schema_to_shared

    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(600)}}
    assert json_schema_to_shared(schema)[0]  # within the default budget
    with pytest.raises(GrammarTooComplexError, match="time budget"):
        json_schema_to_shared(schema, max_convert_seconds=0.0)
