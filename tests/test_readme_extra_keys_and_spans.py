"""README statements a new user's first hour ran into, checked against the code.

A non-strict ``json_schema`` request came back from ``structgen serve`` with one extra key
three times (``"city":"New York","city":"New York","city":""``): extra keys may repeat one
another, a declared key never does, and a strict schema or ``copy_from`` adds no extra key
to an object without ``additionalProperties`` (README, "Constraints"). ``copy_from`` alone
answered ``"Lyon."``: a punctuation mark is a unit of the text, so a span may end with one,
and a span still never cuts a word nor starts or ends with whitespace (README, "The
server"). ``return_details=True`` printed ``ExtractionResult`` with a ``cut_by`` field
README did not list; ``OpenAIBackend`` needs ``openai``, which structgen does not install.
No model is loaded (``matches`` answers for a grammar's language).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from structgen.fsm import compile_spec
from structgen.fsm.copy import with_copy
from structgen.fsm.spec import JsonSchema

README = Path(__file__).resolve().parents[1] / "README.md"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TEXT = "Maria Lopez, 34, works as a nurse in Lyon."


def readme_text() -> str:
    """README.md with its line breaks and indentation folded to single spaces."""
    return re.sub(r"\s+", " ", README.read_text(encoding="utf-8"))


def test_readme_example_with_a_repeated_extra_key_is_what_non_strict_accepts():
    """The server's non-strict spec (``allow_extra_properties=True``) takes the README's
    repeated extra key; the strict one and the ``copy_from`` one take no extra key."""
    example = '{"name":"Ann","city":"Oslo","city":"Oslo"}'
    assert example in readme_text()
    non_strict = compile_spec(JsonSchema(PERSON, allow_extra_properties=True))
    assert non_strict.matches(example)
    assert non_strict.matches('{"name":"Ann","city":"Oslo"}')
    assert not non_strict.matches('{"name":"Ann","name":"Bo"}')
    assert not non_strict.matches('{"name":"Ann","city":"Oslo","name":"Bo"}')
    strict = compile_spec(JsonSchema(PERSON))
    assert strict.matches('{"name":"Ann"}')
    assert not strict.matches('{"name":"Ann","city":"Oslo"}')
    copied = compile_spec(with_copy(JsonSchema(PERSON), ("Ann lives in Oslo.",)))
    assert copied.matches('{"name":"Ann"}')
    assert not copied.matches('{"name":"Ann","city":"Oslo"}')


@pytest.mark.parametrize(
    ("span", "is_span"),
    [
        ("Lyon", True),
        ("Lyon.", True),
        ("Maria Lopez, 34", True),
        ("Maria Lopez, 34, works as a nurse in Lyon.", True),
        ("ria", False),
        ("Lyo", False),
        (" Lyon", False),
        ("Lyon. ", False),
        ("Lyon, Maria", False),
    ],
)
def test_copy_from_alone_is_one_span_and_may_end_in_punctuation(span, is_span):
    """README's spans of the example text, ``"Lyon."`` included, and what is not one."""
    assert '`"Lyon."` is a span too' in readme_text()
    assert compile_spec(with_copy(None, (TEXT,))).matches(span) is is_span


def test_readme_lists_every_field_of_extraction_result():
    """README's ``ExtractionResult(...)`` names the dataclass's fields, in order
    (``cut_by`` was missing: a first-hour ``return_details=True`` printed it)."""
    import dataclasses

    from structgen.extraction.result import ExtractionResult

    listed = re.findall(r"`ExtractionResult\(([^)]*)\)`", readme_text())
    assert listed, "README no longer shows ExtractionResult's fields"
    names = [f.name for f in dataclasses.fields(ExtractionResult)]
    assert [[n.strip() for n in group.split(",")] for group in listed] == [names] * len(listed)


def test_readme_says_openai_backend_needs_the_openai_package():
    """``OpenAIBackend`` imports ``openai``, which ``pip install -e .`` does not install
    (only the ``test`` extra has it); without it the first call was a bare
    ``ModuleNotFoundError``, and README now says to install it."""
    import tomllib

    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    core = [re.split(r"[<>=;\[ ]", dep, maxsplit=1)[0] for dep in project["dependencies"]]
    assert "openai" not in core
    source = (README.parent / "structgen" / "lang" / "openai_backend.py").read_text()
    assert "import openai" in source
    assert re.search(r"OpenAIBackend\([^)]*\)` \(it needs `pip install openai`", readme_text())
