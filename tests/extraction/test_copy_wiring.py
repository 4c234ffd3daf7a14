"""Copy constraints wired through extract (copy=, x-structgen-copy, pydantic) on the
tiny random Llama: whatever its weights, a copied value is a span or numeral of the text
(brute-force references: every substring judged by the span rule, ``fsm.numerals``), and
copy=False is the schema's own grammar (the output equals the plain JsonSchema output).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from structgen import JsonSchema, SamplingParams
from structgen.extraction import extraction_messages
from structgen.extraction.copy import copy_constraint, field_path
from structgen.fsm.numerals import numerals
from tests.extraction._copy_reference import SCHEMA, TEXT
from tests.extraction._copy_reference import spans as _spans

PARAMS = SamplingParams(max_tokens=40, temperature=0.0)


def test_extract_copy_true_copies_strings_and_numbers(tiny_engine):
    got = tiny_engine.extract(SCHEMA, TEXT, params=PARAMS, copy=True)
    assert got["name"] in _spans(TEXT) and len(got["name"]) <= 12
    assert got["age"] in {int(v) for v in numerals(TEXT)}
    assert copy_constraint(SCHEMA, TEXT, True).copied_fields == ("name", "age")


def test_extract_copy_false_is_the_schema_grammar(tiny_engine):
    got = tiny_engine.extract(SCHEMA, TEXT, params=PARAMS, copy=False)
    msgs = extraction_messages(SCHEMA, TEXT)
    (ref,) = tiny_engine.generate([msgs], PARAMS, JsonSchema(SCHEMA))
    assert got == json.loads(ref.text)
    assert copy_constraint(SCHEMA, TEXT, False).copied_fields == ()


def test_per_field_keyword_from_pydantic(tiny_engine):
    class Person(BaseModel):
        name: str = Field(max_length=12, json_schema_extra={"x-structgen-copy": False})
        age: int = Field(ge=0, le=120)

    sd = Person.model_json_schema()
    assert copy_constraint(sd, TEXT).copied_fields == ("age",)
    person = tiny_engine.extract(Person, TEXT, params=PARAMS)
    assert person.age in {int(v) for v in numerals(TEXT)}
    only = {**sd, "properties": {**sd["properties"]}}
    only["properties"]["name"] = {**sd["properties"]["name"], "x-structgen-copy": True}
    assert copy_constraint(only, TEXT, False).copied_fields == ()  # copy=False: none
    assert copy_constraint(only, TEXT, None).copied_fields == ("name", "age")


def test_field_paths():
    assert field_path("/properties/a/properties/b") == "a.b"
    assert field_path("/properties/tags/items") == "tags[]"
    assert field_path("/$defs/x/properties/y") == "/$defs/x/properties/y"
    assert field_path("/properties/a/anyOf/0") == "a"


def _fits(schema, text, copy, vocab, n):
    """True when the document's grammar (copy or not) can close its JSON in ``n`` tokens."""
    return copy_constraint(schema, text, copy).spec.compile(vocab).matcher(max_tokens=n).is_budgeted


def test_copy_grammar_over_budget_falls_back_to_the_schema_grammar(tiny_engine):
    # the copied spans / numerals need more tokens than the schema's shortest values: at a
    # budget only the schema's own grammar meets, the copy grammar would be cut before its
    # JSON closes; extract uses the schema's grammar for that document instead
    vocab = tiny_engine.vocab
    n = next(k for k in range(1, 200) if _fits(SCHEMA, TEXT, False, vocab, k))
    assert not _fits(SCHEMA, TEXT, True, vocab, n)  # the case under test exists
    params = SamplingParams(max_tokens=n, temperature=0.0)
    (res,) = tiny_engine.extract(SCHEMA, [TEXT], params=params, return_details=True)
    assert res.copied_fields == ()
    assert set(res.value) == set(SCHEMA["required"])
    # with budget enough for the copy grammar, the copy grammar stays
    m = next(k for k in range(n, 400) if _fits(SCHEMA, TEXT, True, vocab, k))
    params = SamplingParams(max_tokens=m, temperature=0.0)
    (res,) = tiny_engine.extract(SCHEMA, [TEXT], params=params, return_details=True)
    assert res.copied_fields == ("name", "age")
