"""Extraction on the tiny random Llama: the schema's grammar (with the token budget) makes
every output a complete, schema-valid object, whatever the model's weights."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import BaseModel, Field

from structgen import SamplingParams
from structgen.errors import ExtractionError, InvalidSchemaError
from structgen.extraction import extract, extraction_messages

SCHEMA = {
    "type": "object",
    "properties": {
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "ok": {"type": "boolean"},
    },
    "required": ["age", "ok"],
}


class Person(BaseModel):
    name: str = Field(max_length=6)
    age: int = Field(ge=0, le=99)


def test_messages_carry_the_schema_and_the_text():
    msgs = extraction_messages(SCHEMA, "Ann is 3.", instructions="Be exact.")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert json.dumps(SCHEMA) in msgs[0]["content"]
    assert msgs[1]["content"] == "Be exact.\n\nAnn is 3."


def test_extract_returns_schema_valid_objects(tiny_engine):
    params = SamplingParams(max_tokens=24, temperature=0.0)
    one = tiny_engine.extract(SCHEMA, "Ann is 3 and fine.", params=params)
    jsonschema.validate(one, SCHEMA)
    both = extract(tiny_engine, Person, ["Ann, 3.", "Bo, 40."], params=params)
    assert len(both) == 2 and all(isinstance(p, Person) for p in both)


def test_cut_output_raises_or_is_returned(tiny_engine):
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    with pytest.raises(ExtractionError):
        tiny_engine.extract(SCHEMA, "Ann is 3.", params=params)
    (err,) = tiny_engine.extract(SCHEMA, ["Ann is 3."], params=params, errors="return")
    assert isinstance(err, ExtractionError) and err.finish_reason == "length"


def test_a_schema_that_is_not_one_is_refused(tiny_engine):
    with pytest.raises(InvalidSchemaError):
        tiny_engine.extract(42, "text")
