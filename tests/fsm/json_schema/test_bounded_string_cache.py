"""Bounded string bodies (``format``/``pattern`` with a length) kept per process and replayed.

References: the body built in place, with no cache (``string_length._build_body``), must give
the very same regex texts; membership of copied email values against a brute force over the
text's spans (``re.fullmatch`` of the format, the length, the span rule); ``renumber_many``
against ``renumber_placeholders``.
"""

from __future__ import annotations

import json
import random
import re
import threading

import pytest

from structgen.fsm.compiler import compile_spec
from structgen.fsm.json_schema import copy as schema_copy
from structgen.fsm.json_schema import scalars, string_length
from structgen.fsm.json_schema.copy import CopyJsonSchema
from structgen.fsm.json_schema.formats import FORMATS
from structgen.fsm.regex import definitions, reused
from structgen.fsm.regex.definitions import (
    PLACEHOLDER_BASE,
    renumber_many,
    renumber_placeholders,
)
from structgen.fsm.spec import JsonSchema

from ..test_copy import _spans

EMAIL = FORMATS["email"]


def _obj(**fields) -> dict:
    return {"type": "object", "properties": fields, "required": sorted(fields)}


SCHEMAS = [
    {"type": "string", "format": "email", "maxLength": 40},
    _obj(a={"type": "string", "format": "email", "maxLength": 30}, b={"type": "string"}),
    # the same body twice, and two bodies sharing character classes
    _obj(
        a={"type": "string", "format": "email", "maxLength": 20},
        b={"type": "string", "format": "email", "maxLength": 20},
        c={"type": "string", "pattern": "^[a-z]+@x$", "minLength": 3, "maxLength": 12},
        d={"type": "string", "pattern": "[A-Z]{2}[0-9]*", "maxLength": 9},
    ),
    # a pattern spelled as the format's regex: its product states share keys with it
    _obj(
        a={"type": "string", "pattern": "^" + EMAIL + "$", "maxLength": 16},
        b={"type": "string", "format": "email", "maxLength": 16},
    ),
    _obj(a={"type": "string", "format": "date", "minLength": 10}),
]
TEXT = "Write to Ann Lee at ann.lee@example.com or sales@shop.example.org; AB12 x@y.io ref 2026"


def _texts(lowered) -> tuple:
    return lowered.pattern, lowered.definitions, lowered.warnings


def _lower(spec):
    schema_copy._LOWERED.clear()
    schema_copy._ACCEPTORS.clear()  # every lowering builds its fields' grammars (y1's cache apart)
    return spec.lower()


def _specs():
    for schema in SCHEMAS:
        yield JsonSchema(schema)
        yield CopyJsonSchema(schema, copy_from=(TEXT,))


@pytest.mark.parametrize("index", range(2 * len(SCHEMAS)))
def test_kept_bodies_give_the_texts_of_a_build_in_place(index, monkeypatch) -> None:
    spec = list(_specs())[index]
    string_length.clear_bodies()
    reused.clear()
    cold = _texts(_lower(spec))
    warm = _texts(_lower(spec))
    with monkeypatch.context() as patch:
        patch.setattr(scalars, "bounded_string_body", string_length._build_body)
        in_place = _texts(_lower(spec))
    assert cold == in_place
    assert warm == in_place


def _email_field_grammar(text: str, hi: int):
    schema = _obj(v={"type": "string", "format": "email", "maxLength": hi})
    spec = CopyJsonSchema(schema, copy_from=(text,))
    return spec, compile_spec(spec)


@pytest.mark.parametrize("hi", [8, 15, 40])
def test_copied_email_accepts_exactly_the_fitting_spans_warm(hi) -> None:
    """Texts with emails shorter and longer than the bound; the second and third documents
    compile from the kept body and the restored lowering.
    """
    documents = [
        TEXT,
        "Mail bo@ab.cd, then a.very.long.address@subdomain.example.com today",
        "x@y.io é@ü.de and q@w.er",
    ]
    string_length.clear_bodies()
    reused.clear()
    for text in documents:
        spec, grammar = _email_field_grammar(text, hi)
        every = {text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)}
        spans = _spans(text)
        expected = {s for s in spans if re.fullmatch(EMAIL, s) and len(s) <= hi}
        assert (spec.copied_fields() == ("/properties/v",)) == bool(expected)
        if not expected:
            continue
        for value in every | {"nobody@example.com", ""}:
            doc = json.dumps({"v": value}, ensure_ascii=False, separators=(",", ":"))
            assert grammar.matches(doc) == (value in expected), (text, value)


def test_copy_spec_converts_once_for_copied_fields_and_compile(monkeypatch) -> None:
    calls = []
    convert = CopyJsonSchema._convert

    def counting(self, seconds):
        calls.append(self.copy_from)
        return convert(self, seconds)

    monkeypatch.setattr(CopyJsonSchema, "_convert", counting)
    schema_copy._LOWERED.clear()
    schema_copy._ACCEPTORS.clear()  # a fresh conversion below builds its fields' grammars too
    spec = CopyJsonSchema(SCHEMAS[1], copy_from=("only this text " + TEXT,))
    assert spec.copied_fields() == ("/properties/a", "/properties/b")
    compile_spec(spec)
    assert len(calls) == 1
    schema_copy._ACCEPTORS.clear()
    assert _texts(spec.lower()) == _texts(convert(spec, None)[0])


def test_concurrent_conversions_agree() -> None:
    string_length.clear_bodies()
    reused.clear()
    spec = JsonSchema(SCHEMAS[2])
    expected = _texts(spec.lower())
    string_length.clear_bodies()
    results: list = []

    def run() -> None:
        results.append(_texts(spec.lower()))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4


def test_renumber_many_equals_renumber_placeholders() -> None:
    rng = random.Random(7)
    alphabet = ["a", "(", "|", ")", "é", "\\"] + [chr(PLACEHOLDER_BASE + i) for i in range(40)]
    for _ in range(200):  # few texts (one by one) and more (one array pass)
        texts = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
            for _ in range(rng.randint(0, 30) + rng.choice([0, 2 * definitions._FEW_TEXTS]))
        ]
        keys = rng.sample(range(PLACEHOLDER_BASE, PLACEHOLDER_BASE + 40), rng.randint(0, 40))
        table = {k: rng.choice([PLACEHOLDER_BASE + rng.randrange(80), k + 0x10000]) for k in keys}
        want = [t.translate(table) for t in texts]  # the contract both keep
        assert renumber_many(texts, table) == [renumber_placeholders(t, table) for t in texts]
        assert renumber_many(texts, table) == want
