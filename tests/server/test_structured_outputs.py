"""vLLM's ``structured_outputs``, SGLang's ``ebnf`` / ``structural_tag``, ``response_format``
of type ``grammar`` and ``guided_whitespace_pattern``: parsed to the constraint specs they
name (checked against the spec built directly), and through the real ``openai`` client
(the output checked by ``re`` / ``jsonschema`` / the grammar's own ``matches``).
"""

from __future__ import annotations

import json
import re

import pytest

import structgen
from structgen.fsm.spec import Choice, Grammar, JsonSchema, Regex
from structgen.server.protocol import APIError, ChatCompletionRequest, CompletionRequest
from structgen.server.serving import request_constraint
from tests.server.conftest import API_KEY

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
EBNF = 'root ::= "(" item ("," item)* ")"\nitem ::= [a-z] | root'
MSGS = [{"role": "user", "content": "Answer."}]


def _same(a, b) -> bool:
    """Two specs that compile to the same grammar (``cache_key``)."""
    return type(a) is type(b) and a.cache_key() == b.cache_key()


def _constraint(**fields):
    return request_constraint(CompletionRequest(model="m", prompt="x", **fields))


@pytest.mark.parametrize(
    ("so", "want"),
    [
        ({"json": SCHEMA}, JsonSchema(SCHEMA, allow_extra_properties=True)),
        ({"json": json.dumps(SCHEMA)}, JsonSchema(SCHEMA, allow_extra_properties=True)),
        (
            {"json": SCHEMA, "disable_additional_properties": True},
            JsonSchema(SCHEMA, allow_extra_properties=False),
        ),
        (
            {"json": SCHEMA, "whitespace_pattern": r"[ \n\t\r]*"},
            JsonSchema(SCHEMA, whitespace=12, allow_extra_properties=True),
        ),
        (
            {"json": SCHEMA, "whitespace_pattern": " ?"},
            JsonSchema(SCHEMA, whitespace="compact", allow_extra_properties=True),
        ),
        (
            {"json": SCHEMA, "whitespace_pattern": r"\s{0,3}", "disable_any_whitespace": True},
            JsonSchema(SCHEMA, whitespace="compact", allow_extra_properties=True),
        ),
        (
            {"json_object": True},
            JsonSchema({"type": "object"}, allow_extra_properties=True),
        ),
        ({"regex": "[0-9]+"}, Regex("[0-9]+")),
        ({"choice": ["up", "down"]}, Choice(["up", "down"])),
        ({"grammar": EBNF}, Grammar(EBNF)),
    ],
)
def test_structured_outputs_kinds(so, want):
    term, name = _constraint(structured_outputs=so)
    assert name == "structured_outputs" and _same(term, want)


def test_whitespace_pattern_bounds_the_run():
    # every run of at most 3 of space/tab/CR/LF matches \s{0,3}; a run of 4 does not
    term, _ = _constraint(structured_outputs={"json": SCHEMA, "whitespace_pattern": r"\s{0,3}"})
    assert term.whitespace == 3
    term, _ = _constraint(guided_json=SCHEMA, guided_whitespace_pattern=r"[ \t\n\r]{0,2}")
    assert _same(term, JsonSchema(SCHEMA, whitespace=2, allow_extra_properties=True))
    term, _ = _constraint(guided_json=SCHEMA)
    assert term.whitespace == "compact"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"structured_outputs": {}}, "structured_outputs"),
        ({"structured_outputs": {"json_object": False}}, "structured_outputs"),
        ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs"),
        ({"structured_outputs": {"json": SCHEMA, "grammar": EBNF}}, "structured_outputs"),
        ({"structured_outputs": {"json": "{no"}}, "structured_outputs.json"),
        (
            {"structured_outputs": {"json": SCHEMA, "whitespace_pattern": " +"}},
            "structured_outputs.whitespace_pattern",
        ),
        (
            {"structured_outputs": {"json": SCHEMA, "whitespace_pattern": "(?<=a)"}},
            "structured_outputs.whitespace_pattern",
        ),
        ({"structured_outputs": {"regex": "a"}, "regex": "b"}, "structured_outputs"),
        ({"ebnf": EBNF, "guided_grammar": EBNF}, "ebnf"),
        ({"response_format": {"type": "grammar"}}, "response_format.grammar"),
    ],
)
def test_not_exactly_one_is_an_error(fields, param):
    with pytest.raises(APIError) as info:
        _constraint(**fields)
    assert info.value.param == param, str(info.value)


def test_ebnf_and_response_format_grammar():
    term, name = _constraint(ebnf=EBNF)
    assert name == "ebnf" and _same(term, Grammar(EBNF, syntax="ebnf"))
    req = ChatCompletionRequest(
        model="m", messages=MSGS, response_format={"type": "grammar", "grammar": EBNF}
    )
    term, name = request_constraint(req)
    assert name == "response_format" and _same(term, Grammar(EBNF))
    assert term.compile(None).matches("(a,(b,c))") and not term.compile(None).matches("(a,)")


TAG = {
    "type": "structural_tag",
    "structures": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}],
    "triggers": ["<f>"],
}


@pytest.mark.parametrize("as_text", [False, True])
@pytest.mark.parametrize("field", ["structural_tag", "structured_outputs"])
def test_structural_tag_fields(field, as_text):
    tag_cls = structgen.fsm.spec.StructuralTag
    value = json.dumps(TAG) if as_text else TAG
    fields = {field: value} if field == "structural_tag" else {field: {"structural_tag": value}}
    term, name = _constraint(**fields)
    assert name == field and _same(term, tag_cls.from_dict(TAG))
    with pytest.raises(APIError):
        _constraint(**fields, constraint_trigger="#")


# ---- through the openai client ------------------------------------------------------


@pytest.fixture(scope="module")
def oa(tiny_server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=tiny_server + "/v1", api_key=API_KEY, max_retries=0, timeout=60)


def test_openai_client_structured_outputs(oa):
    import jsonschema
    import openai

    kw = {"model": "tiny", "prompt": "x", "max_tokens": 24, "temperature": 0}
    r = oa.completions.create(**kw, extra_body={"structured_outputs": {"regex": "[0-9]{3}"}})
    assert re.fullmatch("[0-9]{3}", r.choices[0].text)
    r = oa.completions.create(**kw, extra_body={"structured_outputs": {"choice": ["up", "down"]}})
    assert r.choices[0].text in ("up", "down")
    r = oa.chat.completions.create(
        model="tiny",
        messages=MSGS,
        max_tokens=40,
        temperature=0,
        extra_body={"structured_outputs": {"json": SCHEMA, "whitespace_pattern": r"\s*"}},
    )
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)
    grammar = Grammar(EBNF, syntax="ebnf").compile(None)
    for extra in ({"structured_outputs": {"grammar": EBNF}}, {"ebnf": EBNF}):
        r = oa.completions.create(**kw, extra_body=extra)
        assert grammar.matches(r.choices[0].text), r.choices[0].text
    r = oa.chat.completions.create(
        model="tiny",
        messages=MSGS,
        max_tokens=24,
        temperature=0,
        response_format={"type": "grammar", "grammar": EBNF},
    )
    assert grammar.matches(r.choices[0].message.content)
    for extra in (
        {"structured_outputs": {"regex": "a", "choice": ["a"]}},
        {"structured_outputs": {}},
        {"structured_outputs": {"json": SCHEMA, "whitespace_pattern": "x"}},
    ):
        with pytest.raises(openai.BadRequestError) as info:
            oa.completions.create(**kw, extra_body=extra)
        assert "structured_outputs" in str(info.value)
