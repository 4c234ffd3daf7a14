"""Templates (typed values, forward-pass bound), token healing, and early clear errors."""

from __future__ import annotations

import pytest

import structgen
from structgen import Regex, SamplingParams, gen, select, template
from structgen.errors import ProgramError, RegexError, RequestError, SchemaError
from structgen.lang.backend import as_backend
from structgen.lang.healing import heal
from structgen.lang.state import ProgramState

FORM = (
    "Name: {name}\nAge: {age:int}\nScore: {score:float}\nActive: {active:bool}\n"
    "Kind: {kind:choice=cat|dog|fox}\nCode: {code:regex=[A-Z]{2}[0-9]}\nNote {{x}}: {note:str}."
)


def test_template_syntax_and_pattern():
    t = template("A {{b}} {x:int}, {y:regex=[a-z]{2,3}}!")
    assert [h.name for h in t.holes] == ["x", "y"]
    assert t.prefix == "A {b} "
    assert t.pattern.endswith("!")
    v = t.parse("12, ab!")
    assert v == {"x": 12, "y": "ab"} and v.text == "A {b} 12, ab!"


@pytest.mark.parametrize(
    "src, err",
    [
        ("{a} and {a}", RequestError),
        ("{a:int}{b:nope}", RequestError),
        ("x {a", RequestError),
        ("x } y {a}", RequestError),
        ("{a}{b:int}", RequestError),  # str hole needs fixed text after it
        ("{a:regex=x{2}", RequestError),  # unbalanced braces: the hole never closes
        ("{a:regex=[}", RegexError),
        ("{a:regex=(}", RegexError),
        ("{a:json}", RequestError),  # schema not passed as keyword
        ("plain text", RequestError),
    ],
)
def test_template_errors_are_early(src, err):
    with pytest.raises(err):
        template(src)


def test_template_runs_typed_with_few_forward_passes(tiny_engine):
    t = template(FORM, max_chars=12)
    res = t.run(prompt="Maria Lopez, 34, nurse.\n", backend=tiny_engine)
    assert isinstance(res["age"], int) and isinstance(res["score"], float)
    assert isinstance(res["active"], bool) and res["kind"] in ("cat", "dog", "fox")
    assert len(res["code"]) == 3 and isinstance(res["name"], str)
    assert res.text.startswith("Name: ") and res.text.endswith(".")
    # forward passes: sampled tokens in the holes + one per hole (+1); fixed text is free
    out = tiny_engine.generate(
        [tiny_engine.tokenizer.encode("Maria Lopez, 34, nurse.\n" + t.prefix)],
        SamplingParams(max_tokens=400, temperature=0.0, logprobs=0),
        Regex(t.pattern),
    )[0]
    assert out.finish_reason == "stop"
    sampled = sum(1 for d in out.logprobs if next(iter(d.values())) != 0.0)
    assert out.metrics.num_forward_passes <= sampled + len(t.holes) + 1
    assert out.metrics.num_generated_tokens > out.metrics.num_forward_passes  # jump-forward
    t.parse(out.text)


def test_template_in_a_program_captures_holes(tiny_engine):
    from pydantic import BaseModel, Field

    class P(BaseModel):
        n: int = Field(ge=0, le=9)

    t = template("Kind: {kind:choice=a|b}\nData: {d:json}\n", d=P)

    @structgen.function
    def prog(s):
        s += "Go.\n" + t

    s = prog.run(backend=tiny_engine)
    assert s["kind"] in ("a", "b") and isinstance(s["d"], P)


def test_token_healing_backs_up_a_trailing_space(tiny_engine):
    b = as_backend(tiny_engine)
    ids = b.encode("The quick brown fox jumps over the ")
    h = heal(b, ids)
    assert h.removed.endswith(" ") and h.prompt_ids == ids[:-1]
    assert heal(b, b.encode("Answer:\n")).removed == ""

    s = ProgramState(b)
    s += "The quick brown fox jumps over the " + gen("x", max_tokens=4)
    ref = tiny_engine.generate(
        [ids[:-1]], SamplingParams(max_tokens=5, temperature=0.0), h.constraint(None)
    )[0].text
    assert ref.startswith(h.removed) and s["x"] == ref[len(h.removed) :]
    s2 = ProgramState(b)
    s2 += "The quick brown fox jumps over the " + gen("x", max_tokens=4, token_healing=False)
    assert (
        s2["x"]
        == tiny_engine.generate([ids], SamplingParams(max_tokens=4, temperature=0.0))[0].text
    )


def test_definition_errors_are_early():
    with pytest.raises(RequestError):
        gen("a") + "x" + gen("a")
    with pytest.raises(RegexError):
        gen("a", regex="(")
    with pytest.raises(SchemaError):
        gen("a", json_schema={"type": "object", "properties": {"a": {"type": "nope"}}})
    with pytest.raises(RequestError):
        gen("a", regex="a", choices=["a"])
    with pytest.raises(RequestError):
        select("a", [])
    with pytest.raises(RequestError):
        structgen.user(structgen.assistant("x"))
    with pytest.raises(RequestError):

        @structgen.function
        def bad(s, backend):
            pass


def test_program_errors_name_the_line_and_engine_keeps_running(tiny_engine):
    @structgen.function
    def prog(s):
        s += "Hi:" + gen("a", max_tokens=2)
        s += "again:" + gen("a", max_tokens=2)  # capture name used twice

    with pytest.raises(ProgramError) as info:
        prog.run(backend=tiny_engine)
    assert "already set" in str(info.value)
    assert info.value.lineno == prog.fn.__code__.co_firstlineno + 3
    assert "test_template_errors.py" in str(info.value)

    @structgen.function
    def boom(s):
        s += "x:" + gen("a", max_tokens=2)
        raise ZeroDivisionError("user bug")

    with pytest.raises(ProgramError) as info:
        boom.run(backend=tiny_engine)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    with pytest.raises(ProgramError):
        list(boom.run(backend=tiny_engine, stream=True))
    states = boom.run_batch([{}, {}], backend=tiny_engine, progress_bar=False, errors="return")
    assert all(isinstance(s, ProgramError) for s in states)
    assert tiny_engine.stats()["running"] == 0
    assert tiny_engine.generate(["ok:"], SamplingParams(max_tokens=2))[0].finish_reason


def test_chat_and_plain_text_do_not_mix(tiny_engine):
    @structgen.function
    def prog(s):
        s += structgen.user("hi")
        s += "loose text"

    with pytest.raises(ProgramError, match="outside a role"):
        prog.run(backend=tiny_engine)


@pytest.mark.parametrize(
    "prompt, removed",
    [
        ("The quick brown fo", "o"),  # a partial word
        ('He said "', '"'),  # a quote the tokenizer merges with what follows
        ("The quick brown fox jumps over the ", " "),  # a trailing space
    ],
)
def test_token_healing_matches_a_constrained_engine_call(tiny_engine, prompt, removed):
    """The healed gen = one Engine.generate on the prompt less its last token, with the
    removed text required first (then cut from the capture)."""
    b = as_backend(tiny_engine)
    ids = b.encode(prompt)
    h = heal(b, ids)
    assert h.removed == removed and h.prompt_ids == ids[:-1]
    s = ProgramState(b)
    s += prompt + gen("x", max_tokens=5, regex="[a-z ]+")
    ref = tiny_engine.generate(
        [ids[:-1]], SamplingParams(max_tokens=6, temperature=0.0), h.constraint(Regex("[a-z ]+"))
    )[0].text
    assert ref.startswith(removed) and s["x"] == ref[len(removed) :]
    assert s.text() == prompt + s["x"]
