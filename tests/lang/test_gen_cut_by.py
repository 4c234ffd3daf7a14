"""The DSL's cut outputs carry the limit that cut them (``errors.LengthLimit``), as extract's
do: a ``gen(json_schema=...)`` whose JSON a limit cut raises an ExtractionError (wrapped in
the program's ProgramError) whose ``cut_by`` and message name ``max_tokens`` or the end of
the model's context; ``state.cut_by(name)`` tells it for a captured cut output; a template
fill cut before it matched names it too. Checked word for word on the tiny Llama, with the
limit told from the engine's own output for the same request (its token count against
``max_tokens``, and ``engine.max_request_tokens()``), and on hand-made outputs."""

from __future__ import annotations

import jsonschema
import pytest

import structgen
from structgen import SamplingParams, gen, template
from structgen.errors import ExtractionError, LengthLimit, ProgramError, RequestError
from structgen.fsm.spec import JsonSchema
from structgen.lang.driver import _parse_calls, _parse_json, cut_by
from structgen.runtime.outputs import RequestMetrics, RequestOutput
from tests.lang._short_context import short_context_engine

# a string of 40 characters at least: its JSON cannot close within a few tokens
LONG = {
    "type": "object",
    "properties": {"note": {"type": "string", "minLength": 40}},
    "required": ["note"],
}
TICKET = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "prio": {"type": "integer"}},
    "required": ["summary", "prio"],
}
PROMPT = "Ticket:\n"
CONTEXT_LEFT = 6  # output tokens the short-context engine leaves after PROMPT


@pytest.fixture(scope="module")
def short_engine(tiny_llama_dir, tiny_engine):
    """The tiny Llama with a context that leaves CONTEXT_LEFT tokens after PROMPT."""
    return short_context_engine(tiny_llama_dir, tiny_engine.tokenizer, PROMPT, CONTEXT_LEFT)


def _json_prog(schema, max_tokens):
    @structgen.function
    def prog(s):
        s += PROMPT + gen("t", json_schema=schema, max_tokens=max_tokens)

    return prog


def _reference_limit(engine, schema, max_tokens):
    """The limit that cut the engine's own output for the program's request: max_tokens
    when it has max_tokens tokens, else the context (the rule written out)."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    (ref,) = engine.generate([PROMPT], params, JsonSchema(schema) if schema else None)
    assert ref.finish_reason == "length"
    if len(ref.token_ids) >= max_tokens:
        return LengthLimit("max_tokens", max_tokens)
    return LengthLimit("context", engine.max_request_tokens())


def test_a_json_gen_cut_by_max_tokens_names_max_tokens(tiny_engine):
    assert _reference_limit(tiny_engine, LONG, 3) == LengthLimit("max_tokens", 3)
    with pytest.raises(ProgramError) as info:
        _json_prog(LONG, 3).run(backend=tiny_engine)
    err = info.value
    assert isinstance(err.original, ExtractionError)
    assert err.cut_by == err.original.cut_by == LengthLimit("max_tokens", 3)
    assert err.original.finish_reason == "length"
    assert str(err.original) == (
        "gen(json_schema=...) hit max_tokens=3 before the JSON was complete; "
        "raise the gen's max_tokens"
    )
    assert str(err).split("\n")[0].endswith(f"ExtractionError: {err.original}")


def test_a_json_gen_cut_by_the_context_names_the_context(short_engine):
    limit = short_engine.max_request_tokens()
    assert _reference_limit(short_engine, LONG, 200) == LengthLimit("context", limit)
    with pytest.raises(ProgramError) as info:
        _json_prog(LONG, 200).run(backend=short_engine)
    err = info.value
    assert err.cut_by == err.original.cut_by == LengthLimit("context", limit)
    assert str(err.original) == (
        f"gen(json_schema=...) hit the end of the model's context ({limit} tokens, prompt "
        "included) before the JSON was complete; shorten the prompt, or raise the model's "
        "max_model_len"
    )
    assert str(err).split("\n")[0].endswith(f"ExtractionError: {err.original}")


def test_a_budget_closed_json_tells_its_limit(tiny_engine):
    s = _json_prog(TICKET, 24).run(backend=tiny_engine)
    jsonschema.validate(s["t"], TICKET)
    assert s.truncated("t") is True
    assert s.cut_by("t") == _reference_limit(tiny_engine, TICKET, 24)
    assert s.cut_by("t") == LengthLimit("max_tokens", 24)


@pytest.mark.parametrize("max_tokens", [3, 200])
def test_a_plain_gen_tells_which_limit_cut_it(tiny_engine, short_engine, max_tokens):
    @structgen.function
    def prog(s):
        s += PROMPT + gen("x", max_tokens=max_tokens)

    for engine in (tiny_engine, short_engine):
        expected = _reference_limit(engine, None, max_tokens)
        s = prog.run(backend=engine)
        assert s.truncated("x") is True
        assert s.cut_by("x") == expected
    assert _reference_limit(tiny_engine, None, 3).name == "max_tokens"
    assert _reference_limit(short_engine, None, 200).name == "context"


def test_an_output_not_cut_has_no_limit(tiny_engine):
    small = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    s = _json_prog(small, 30).run(backend=tiny_engine)
    assert s.truncated("t") is False and s.cut_by("t") is None
    with pytest.raises(KeyError, match="no generation captured as 'b'"):
        s.cut_by("b")
    forks = s.fork(2)
    assert forks[0].cut_by("t") is None  # a branch copies the state's limits


def test_a_cut_capture_keeps_its_limit_in_a_fork(tiny_engine):
    s = _json_prog(TICKET, 24).run(backend=tiny_engine)
    assert [f.cut_by("t") for f in s.fork(2)] == [LengthLimit("max_tokens", 24)] * 2


def test_a_template_fill_cut_before_it_matched_names_the_limit(tiny_engine, short_engine):
    tpl = template("Name: {name}\nAge: {age:int}\n")
    with pytest.raises(RequestError) as info:
        tpl.run(prompt="Ann.\n", backend=tiny_engine, max_tokens=3)
    msg = str(info.value)
    assert msg.startswith(
        "the template's output was cut by max_tokens=3 before it matched the template; "
        "raise max_tokens (output: "
    )
    # a tail longer than the context's room: no budget can close the fill
    long_tail = template("{note:str}. " + "This fixed tail is longer than the room left. " * 3)
    limit = short_engine.max_request_tokens()
    with pytest.raises(RequestError) as info:
        long_tail.run(prompt=PROMPT, backend=short_engine, max_tokens=200)
    assert str(info.value).startswith(
        f"the template's output was cut by the end of the model's context ({limit} tokens, "
        "prompt included) before it matched the template; shorten the prompt, or raise the "
        "model's max_model_len (output: "
    )
    # a fill that fits is closed by the context's budget, as by max_tokens's, and reports it
    short = template("{note:str}.", max_chars=200)
    res = short.run(prompt=PROMPT, backend=short_engine, max_tokens=200)
    assert res.output.text.endswith(".") and res.truncated
    assert res.cut_by == LengthLimit("context", limit)


# ------------------------------------------------------------------ hand-made outputs
def _out(n_ids, finish_reason="length", generated=0, prompt=0):
    metrics = RequestMetrics(num_prompt_tokens=prompt, num_generated_tokens=generated)
    return RequestOutput(text="", token_ids=[0] * n_ids, finish_reason=finish_reason,
                         metrics=metrics)  # fmt: skip


@pytest.mark.parametrize(
    "out, sent, max_tokens, context, expected",
    [
        (_out(20), 20, 20, 512, LengthLimit("max_tokens", 20)),
        (_out(7), 20, 20, 512, LengthLimit("context", 512)),
        # token healing sends max_tokens + 1: the gen's own value is named
        (_out(21), 21, 20, 512, LengthLimit("max_tokens", 20)),
        (_out(20), 21, 20, 512, LengthLimit("context", 512)),
        # a remote backend: no token ids (usage's count), no context (prompt + output)
        (_out(0, generated=20, prompt=90), 20, 20, None, LengthLimit("max_tokens", 20)),
        (_out(0, generated=7, prompt=93), 20, 20, None, LengthLimit("context", 100)),
        (_out(0), 20, 20, None, LengthLimit("max_tokens", 20)),  # length unknown: as before
        (_out(20, finish_reason="stop"), 20, 20, 512, None),
        (_out(3, finish_reason="error"), 20, 20, 512, None),
    ],
)
def test_cut_by_follows_length_limits_rule(out, sent, max_tokens, context, expected):
    assert cut_by(out, sent, max_tokens, context) == expected


def test_a_closed_json_a_limit_cut_that_is_not_schema_valid():
    limit = LengthLimit("context", 300)
    with pytest.raises(ExtractionError) as info:
        _parse_json('{"summary":"a"}', TICKET, "length", limit)
    ref = next(jsonschema.Draft202012Validator(TICKET).iter_errors({"summary": "a"}))
    assert str(info.value) == (
        "gen(json_schema=...) was cut by the end of the model's context (300 tokens, prompt "
        f"included) and its JSON is not schema-valid at /: {ref.message}"
    )
    assert info.value.cut_by == limit and info.value.finish_reason == "length"
    assert _parse_json('{"summary":"a","prio":1}', TICKET, "length", limit) == {
        "summary": "a",
        "prio": 1,
    }
    with pytest.raises(ExtractionError) as info:
        _parse_json('{"summary":', TICKET, "stop", None)
    assert info.value.cut_by is None and str(info.value).startswith("generated text is not JSON")


def test_a_tool_call_a_limit_cut_names_it():
    from structgen.tools import FORMATS

    fmt = FORMATS["hermes"]
    text = '<tool_call>\n{"name": "f", "arguments": {"a": '
    for limit, words in (
        (LengthLimit("max_tokens", 9), "max_tokens=9 inside a call; raise the gen's max_tokens"),
        (
            LengthLimit("context", 64),
            "the end of the model's context (64 tokens, prompt included) inside a call; "
            "shorten the prompt, or raise the model's max_model_len",
        ),
    ):
        with pytest.raises(ExtractionError) as info:
            _parse_calls(text, fmt, "auto", "length", limit)
        assert str(info.value) == f"gen(tools=...) was cut by {words}"
        assert info.value.cut_by == limit
