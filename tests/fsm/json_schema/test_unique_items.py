"""``uniqueItems`` over a finite item domain (``const``/``enum``, booleans, ``null``, a small
integer range) is exact: every array of up to four items drawn from a pool of spellings
(the domain's values, their look-alikes and values outside it) is matched exactly when
``jsonschema`` says it is valid; an open domain stays the strict error."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.arrays import MAX_UNIQUE_VALUES

POOL = ['"a"', '"b"', "true", "false", "0", "1", "3", '"1"', "[1]", '{"a":1}', "null"]
SCHEMAS = [
    {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 1},
    {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 3},
        "uniqueItems": True,
        "maxItems": 2,
    },
    {
        "type": "array",
        "items": {"$ref": "#/$defs/v"},
        "uniqueItems": True,
        "minItems": 2,
        "$defs": {"v": {"enum": [1, "1", [1], {"a": 1}, None, 1.0]}},
    },
    {"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": True},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_unique_items_over_a_finite_domain_is_exact(schema):
    grammar = compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for k in range(5):
        for items in itertools.product(POOL, repeat=k):
            text = "[" + ",".join(items) + "]"
            assert grammar.matches(text) == validator.is_valid(json.loads(text)), text


def test_unique_items_over_an_open_or_large_domain_is_refused():
    for items in (
        {"type": "string"},
        {"type": "integer", "minimum": 0, "maximum": MAX_UNIQUE_VALUES},  # one value too many
        {"enum": list(range(MAX_UNIQUE_VALUES + 1))},
    ):
        schema = {"type": "array", "items": items, "uniqueItems": True}
        with pytest.raises(UnsupportedSchemaError, match="uniqueItems"):
            compile_json_schema(schema)
