"""What OpenAIBackend sends for each spec: the spec's own wire form, never a compiled grammar."""

from __future__ import annotations

import pytest

from structgen import SamplingParams
from structgen.errors import RequestError
from structgen.fsm import compile_json_schema, compile_regex
from structgen.fsm.spec import Choice, Concatenation, JsonSchema, Regex
from structgen.lang.openai_backend import request_body
from tests.fsm._digit_run import DigitRun

PARAMS = SamplingParams(max_tokens=4)


def _extra(constraint) -> dict:
    return request_body([1, 2], PARAMS, constraint)["extra_body"]


def test_a_healed_concatenation_goes_as_its_regex_text():
    healed = Concatenation([Choice([' "']), JsonSchema({"type": "integer"})], trigger="A:")
    extra = _extra(healed)
    assert extra["constraint_trigger"] == "A:"
    sent = compile_regex(extra["regex"], trigger="A:")
    for text in ('A: "12', 'xA: "-3', "A:12", 'A: "1.5'):
        assert sent.matches(text) == healed.compile(None).matches(text), text


def test_a_compiled_grammar_goes_as_its_spec():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert _extra(compile_json_schema(schema))["response_format"]["json_schema"]["schema"] == schema
    assert _extra(compile_regex("[a-z]+", trigger="go"))["regex"] == "[a-z]+"
    assert "regex" in _extra(Regex("[a-z]+"))


def test_a_spec_without_a_wire_form_is_refused():
    for spec in (DigitRun(3), DigitRun(3).compile(None)):
        with pytest.raises(RequestError, match="DigitRun constraint: it has no wire form"):
            _extra(spec)
    with pytest.raises(RequestError, match="server's defaults"):
        _extra(JsonSchema({"type": "integer"}, max_recursion_depth=3))
