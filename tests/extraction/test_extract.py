"""Extraction on the tiny random Llama: the schema's grammar (with the token budget) makes
every output a complete, schema-valid object, whatever the model's weights."""

from __future__ import annotations

import json
import warnings

import jsonschema
import pytest
from pydantic import BaseModel, Field

from structgen import SamplingParams
from structgen.errors import ExtractionError, ExtractionTruncatedWarning, InvalidSchemaError
from structgen.extraction import ExtractionResult, extract, extraction_messages

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


WORDY = {
    "type": "object",
    "properties": {"note": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["note", "n"],
}


def test_an_output_closed_by_the_budget_is_returned_with_a_warning(tiny_engine):
    # the random model never ends a free string (copy constraints off: a copied span would
    # end within the text); the token budget closes the JSON in time
    params = SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True)
    with pytest.warns(ExtractionTruncatedWarning) as caught:
        got = tiny_engine.extract(WORDY, ["Ann is 3.", "Bo is 40."], params=params, copy=False)
    assert sorted(w.message.index for w in caught) == [0, 1]
    for obj in got:
        jsonschema.validate(obj, WORDY)
    with pytest.warns(ExtractionTruncatedWarning):
        res = tiny_engine.extract(
            WORDY, "Ann is 3.", params=params, return_details=True, copy=False
        )
    assert isinstance(res, ExtractionResult)
    assert (res.truncated, res.finish_reason, res.copied_fields) == (True, "length", ())
    assert res.value == got[0] and json.loads(res.raw_text) == res.value


def test_details_of_a_complete_output(tiny_engine):
    params = SamplingParams(max_tokens=24, temperature=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExtractionTruncatedWarning)
        res = tiny_engine.extract(SCHEMA, "Ann is 3 and fine.", params=params, return_details=True)
    assert (res.truncated, res.finish_reason) == (False, "stop")
    assert json.loads(res.raw_text) == res.value
    jsonschema.validate(res.value, SCHEMA)


def test_on_result_reports_each_text_once_with_what_is_returned(tiny_engine):
    params = SamplingParams(max_tokens=24, temperature=0.0)
    texts = ["Ann, 3.", "Bo, 40.", "Cy, 7.", "Di, 12."]
    seen = []
    got = extract(
        tiny_engine, Person, texts, params=params, on_result=lambda i, r: seen.append((i, r))
    )
    assert sorted(i for i, _ in seen) == [0, 1, 2, 3]
    assert all(got[i] is r for i, r in seen)
    assert got == extract(tiny_engine, Person, texts, params=params)  # same as unstreamed


def test_a_cut_output_that_is_not_json_still_raises_in_details_mode(tiny_engine):
    params = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
    (err,) = tiny_engine.extract(
        WORDY, ["Ann is 3."], params=params, errors="return", return_details=True
    )
    assert isinstance(err, ExtractionError) and err.finish_reason == "length"
    assert "max_tokens" in str(err)


def test_an_empty_text_fails_in_its_place_without_model_work(tiny_engine):
    """An empty or whitespace text gets an ExtractionError at its index (the others are
    extracted exactly as alone, ``on_result`` sees every index once); ``errors="raise"``
    raises it; a text that is not a string is a RequestError."""
    from structgen.errors import InvalidSchemaError, RequestError

    params = SamplingParams(max_tokens=24, temperature=0.0)
    texts = ["Ann, 3.", "", "Cy, 7.", " \n\t"]
    seen = []
    got = extract(
        tiny_engine, Person, texts, params=params, errors="return",
        on_result=lambda i, r: seen.append((i, r)),
    )  # fmt: skip
    assert sorted(i for i, _ in seen) == [0, 1, 2, 3]
    assert all(got[i] is r for i, r in seen)
    for i in (1, 3):
        assert isinstance(got[i], ExtractionError) and f"text {i} is empty" in str(got[i])
    assert got[0] == extract(tiny_engine, Person, "Ann, 3.", params=params)
    assert got[2] == extract(tiny_engine, Person, "Cy, 7.", params=params)
    with pytest.raises(ExtractionError, match="text 0 is empty"):
        extract(tiny_engine, Person, "  ", params=params)
    with pytest.raises(ExtractionError, match="text 1 is empty"):
        extract(tiny_engine, Person, ["Ann, 3.", ""], params=params)
    with pytest.raises(RequestError, match="text 1 is a int"):
        extract(tiny_engine, Person, ["Ann, 3.", 5], params=params)
    assert extract(tiny_engine, Person, [], params=params) == []
    with pytest.raises(InvalidSchemaError, match="/type"):
        extract(tiny_engine, {"type": "strng"}, [], params=params)
    for bad in (None, 5, b"Ann, 3.", {"text": "Ann, 3."}):
        with pytest.raises(RequestError, match="a string or a list of strings"):
            extract(tiny_engine, Person, bad, params=params)


def test_an_unknown_errors_mode_is_a_request_error(tiny_engine):
    """``errors`` other than "raise" / "return" (a typo such as "ignore") is refused
    before any work, not silently treated as "raise"."""
    from structgen.errors import RequestError

    for bad in ("ignore", "Return", None):
        with pytest.raises(RequestError, match="errors must be 'raise' or 'return'"):
            extract(tiny_engine, Person, "Ann, 3.", errors=bad)
        with pytest.raises(RequestError, match="errors must be 'raise' or 'return'"):
            tiny_engine.extract(Person, ["Ann, 3.", ""], errors=bad)


def test_params_and_copy_of_the_wrong_type_are_request_errors(tiny_engine):
    """A dict for ``params`` (as the server's JSON body) and a non-bool ``copy`` (a
    truthy "no") are refused with a RequestError naming the argument, not an
    AttributeError from inside the job nor a silent copy=True."""
    from structgen.errors import RequestError

    with pytest.raises(RequestError, match="params must be SamplingParams, got dict"):
        extract(tiny_engine, Person, "Ann, 3.", params={"max_tokens": 5})
    for bad in ("no", 0, "false"):
        with pytest.raises(RequestError, match="copy must be True, False or None"):
            tiny_engine.extract(Person, "Ann, 3.", copy=bad)
    for switch in ("score_options", "score_numbers", "evidence", "return_details",
                   "score_array_ends", "score_overlaps", "write_nulls"):  # fmt: skip
        with pytest.raises(RequestError, match=f"{switch} must be True(,| or) False"):
            tiny_engine.extract(Person, "Ann, 3.", **{switch: "no"})
    with pytest.raises(RequestError, match="instructions must be a string .*got int"):
        tiny_engine.extract(Person, "Ann, 3.", instructions=5)
    with pytest.raises(RequestError, match="on_result must be callable, got list"):
        tiny_engine.extract(Person, ["Ann, 3."], on_result=[])


def test_ignored_keywords_warn_the_caller_once(tiny_engine):
    """An unknown keyword (a misspelling) reaches the user of generate and extract as a
    GrammarWarning naming it, once per distinct message; the documented default note
    (objects generated without unlisted keys) does not."""
    from structgen.errors import GrammarWarning
    from structgen.fsm.spec import JsonSchema

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLen": 5}},
        "required": ["name"],
    }
    params = SamplingParams(max_tokens=16, temperature=0.0)
    for run in (
        lambda: extract(tiny_engine, schema, ["Ann, 3.", "Bo, 4."], params=params),
        lambda: tiny_engine.generate(["hi"], params, JsonSchema(schema)),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            run()
        got = [str(w.message) for w in caught if issubclass(w.category, GrammarWarning)]
        assert len(got) == 1, got
        assert "'maxLen'" in got[0] and "maxLength" in got[0]


def test_engine_extract_takes_every_keyword_of_extract():
    """``Engine.extract`` forwards to :func:`structgen.extraction.extract`: a switch added
    there and not here would be unreachable from the engine (score_array_ends was)."""
    import inspect

    from structgen.extraction import extract
    from structgen.runtime.base_engine import BaseEngine

    want = set(inspect.signature(extract).parameters) - {"engine"}
    have = set(inspect.signature(BaseEngine.extract).parameters) - {"self"}
    assert want - have == set()
