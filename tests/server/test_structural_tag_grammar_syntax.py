"""The 400 for a grammar inside a structural tag whose rules do not tell its syntax: it
names the request field holding that grammar (dotted, with list indices), not the Python
keyword ``syntax=`` that a request has no field for. Checked word for word for each way a
request sends a structural tag, and once through the app."""

from __future__ import annotations

import json

import pytest

from structgen.fsm.spec import StructuralTag
from structgen.server.protocol import APIError, CompletionRequest
from structgen.server.serving import request_constraint

NO_RULE = '{"type": "object"}'  # a JSON Schema sent as a grammar
GBNF = 'root ::= "a" | "b"'


def _format(grammar: str) -> dict:
    """A ``format`` tree whose second tag holds ``grammar`` (the first one a regex)."""
    return {
        "type": "triggered_tags",
        "triggers": ["<"],
        "tags": [
            {"begin": "<f>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</f>"},
            {"begin": "<g>", "content": {"type": "grammar", "grammar": grammar}, "end": "</g>"},
        ],
    }


def _legacy(grammar: str) -> dict:
    return {"structures": [{"begin": "<f>", "grammar": grammar, "end": "</f>"}], "triggers": ["<"]}


CASES = [  # (request fields, the field that holds the grammar)
    (
        lambda g: {"response_format": {"type": "structural_tag", "format": _format(g)}},
        "response_format.format.tags[1].content.grammar",
    ),
    (
        lambda g: {"response_format": {"type": "structural_tag", **_legacy(g)}},
        "response_format.structures[0].grammar",
    ),
    (
        lambda g: {"structural_tag": json.dumps({"format": _format(g)})},
        "structural_tag.format.tags[1].content.grammar",
    ),
    (
        lambda g: {"structured_outputs": {"structural_tag": _legacy(g)}},
        "structured_outputs.structural_tag.structures[0].grammar",
    ),
]


def _message(field: str) -> str:
    return (
        f"{field}: cannot tell the grammar's syntax (it has no 'name ::=' or 'name:' rule); "
        "the server reads a structural tag's grammar as GBNF ('name ::= ...' rules, start "
        "rule 'root') or Lark ('name: ...' rules, start rule 'start'), told by which kind of "
        f"rule it has: write {field} with rules of one kind"
    )


@pytest.mark.parametrize(("fields", "field"), CASES, ids=[c[1] for c in CASES])
def test_an_untold_syntax_names_the_grammar_field(fields, field):
    with pytest.raises(APIError) as info:
        request_constraint(CompletionRequest(model="m", prompt="x", **fields(NO_RULE)))
    assert info.value.param == field
    assert str(info.value) == _message(field)
    assert "syntax=" not in str(info.value)


@pytest.mark.parametrize(("fields", "field"), CASES, ids=[c[1] for c in CASES])
def test_a_told_syntax_is_the_tag_as_before(fields, field):
    term, _ = request_constraint(CompletionRequest(model="m", prompt="x", **fields(GBNF)))
    assert isinstance(term, StructuralTag)
    assert term.compile(None).matches("<f>a</f>" if "structures" in field else "<g>b</g>")


def test_the_app_answers_400_on_the_grammar_field(client):
    r = client.post(
        "/v1/completions",
        json={"model": "tiny", "prompt": "Hi", "max_tokens": 5, **CASES[0][0](NO_RULE)},
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == CASES[0][1]
    assert err["message"] == _message(CASES[0][1])
