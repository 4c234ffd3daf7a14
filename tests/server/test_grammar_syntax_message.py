"""The 400 for a grammar field whose syntax its rules do not tell: it names what a request
can send (the field's two syntaxes, told by the rules, and the ``ebnf`` field), not the
Python keyword ``syntax=`` that a request has no field for. Checked word for word for each
field read with syntax auto, and once through the app."""

from __future__ import annotations

import pytest

from structgen.fsm.spec import Grammar
from structgen.server.protocol import APIError, ChatCompletionRequest, CompletionRequest
from structgen.server.serving import request_constraint

NO_RULE = '{"type": "object"}'  # a JSON Schema sent as a grammar
BOTH = 'root ::= "a" | b\nb: "b"'
GBNF = 'root ::= "a" | "b"'
LARK = 'start: "a" | "b"'


def _message(param: str, what: str) -> str:
    return (
        f"{param}: cannot tell the grammar's syntax (it has {what}); the server reads "
        f"{param} as GBNF ('name ::= ...' rules, start rule 'root') or Lark ('name: ...' "
        "rules, start rule 'start'), told by which kind of rule it has; send an EBNF "
        "grammar in the 'ebnf' field"
    )


def _fields(param: str, text: str) -> dict:
    if param == "response_format.grammar":
        return {"response_format": {"type": "grammar", "grammar": text}}
    if param == "structured_outputs.grammar":
        return {"structured_outputs": {"grammar": text}}
    return {param: text}


PARAMS = ["grammar", "guided_grammar", "response_format.grammar", "structured_outputs.grammar"]


@pytest.mark.parametrize("param", PARAMS)
@pytest.mark.parametrize(
    ("text", "what"),
    [(NO_RULE, "no 'name ::=' or 'name:' rule"), (BOTH, "both '::=' rules and 'name:' rules")],
)
def test_an_untold_syntax_names_what_a_request_can_send(param, text, what):
    req = ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "x"}], **_fields(param, text)
    )
    with pytest.raises(APIError) as info:
        request_constraint(req)
    assert info.value.param == param
    assert str(info.value) == _message(param, what)
    assert "syntax=" not in str(info.value)


@pytest.mark.parametrize("param", PARAMS)
@pytest.mark.parametrize("text", [GBNF, LARK])
def test_a_told_syntax_is_the_grammar_as_before(param, text):
    req = CompletionRequest(model="m", prompt="x", **_fields(param, text))
    term, _ = request_constraint(req)
    assert isinstance(term, Grammar) and term.cache_key() == Grammar(text).cache_key()
    assert term.compile(None).matches("a") and not term.compile(None).matches("c")


def test_the_ebnf_field_reads_the_text_as_ebnf():
    ebnf = 'root ::= "a" x\nx ::= "b"\n/* an EBNF comment, which GBNF has not */'
    term, name = request_constraint(CompletionRequest(model="m", prompt="x", ebnf=ebnf))
    assert name == "ebnf" and term.cache_key() == Grammar(ebnf, syntax="ebnf").cache_key()
    assert term.compile(None).matches("ab") and not term.compile(None).matches("a")


def test_the_app_answers_400_on_the_field(client):
    r = client.post(
        "/v1/chat/completions",
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 5,
            "grammar": NO_RULE,
        },
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "grammar"
    assert err["message"] == _message("grammar", "no 'name ::=' or 'name:' rule")
