"""The packaged SmolLM2 under the default extract (copy constraints on): README's example
gives the values README promises, and two more of this directory's documents
(``data/copy_docs.json``, written for these tests: a number written in words, an invoice
total with a decimal comma) give their expected values; every output is schema-valid
(``jsonschema``). Slow: the real model.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
PERSON = json.loads((HERE.parents[1] / "examples/schemas/person.json").read_text(encoding="utf-8"))
DOCS = json.loads((HERE / "data" / "copy_docs.json").read_text(encoding="utf-8"))


def test_readme_example_and_a_number_in_words(smollm2_engine):
    maria, aiko = smollm2_engine.extract(PERSON, [DOCS[0]["text"], DOCS[1]["text"]])
    assert DOCS[0]["text"] == "Maria Lopez, 34, works as a nurse in Lyon."  # README's text
    for got in (maria, aiko):
        jsonschema.validate(got, PERSON)
    assert maria == {"name": "Maria Lopez", "age": 34, "occupation": "nurse", "city": "Lyon"}
    assert aiko["age"] == 41 and aiko["name"] == "Aiko Tanaka"


def test_invoice_numbers_from_the_text(smollm2_engine):
    doc = DOCS[4]
    got = smollm2_engine.extract(doc["schema"], doc["text"])
    jsonschema.validate(got, doc["schema"])
    assert got["invoice_number"] == 88213 and got["total"] == 1250.75
