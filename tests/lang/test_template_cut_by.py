"""A template fill cut by a limit reports it as a captured gen does: ``TemplateResult``'s
``truncated`` and ``cut_by`` (``max_tokens`` or the end of the model's context), the same
limit ``state.cut_by(hole)`` names for the fill appended to a program; an uncut fill says
None. Reference: the engine's own output for the same request (its token count against
``max_tokens``, and ``engine.max_request_tokens()``), the rule ``errors.length_limit``
writes out."""

from __future__ import annotations

import pytest

import structgen
from structgen import SamplingParams, template
from structgen.errors import LengthLimit
from structgen.lang.expr import TemplateFill
from tests.lang._short_context import short_context_engine

PROMPT = "Ann.\n"
CONTEXT_LEFT = 6  # output tokens the short-context engine leaves after PROMPT


@pytest.fixture(scope="module")
def short_engine(tiny_llama_dir, tiny_engine):
    """The tiny Llama with a context that leaves CONTEXT_LEFT tokens after PROMPT."""
    return short_context_engine(tiny_llama_dir, tiny_engine.tokenizer, PROMPT, CONTEXT_LEFT)


def _reference(engine, tpl, max_tokens):
    """The limit that cut the engine's own output for the template's request (None: not
    cut); the template has no prefix and the prompt ends a token, so the fill sends
    exactly this request."""
    assert not tpl.prefix
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    (ref,) = engine.generate([PROMPT], params, tpl.constraint)
    if ref.finish_reason != "length":
        return None
    if len(ref.token_ids) >= max_tokens:
        return LengthLimit("max_tokens", max_tokens)
    return LengthLimit("context", engine.max_request_tokens())


def test_a_fill_cut_by_max_tokens_names_it(tiny_engine):
    tpl = template("{name}\nAge: {age:int}\n")
    expected = _reference(tiny_engine, tpl, 10)
    assert expected == LengthLimit("max_tokens", 10)
    res = tpl.run(prompt=PROMPT, backend=tiny_engine, max_tokens=10, token_healing=False)
    assert res.truncated and res.cut_by == expected
    assert res.output.finish_reason == "length"

    @structgen.function
    def prog(s):
        s += PROMPT + TemplateFill(tpl, max_tokens=10, token_healing=False)

    s = prog.run(backend=tiny_engine)
    assert {k: s[k] for k in res} == dict(res)
    assert [s.cut_by(k) for k in res] == [expected] * len(res)


def test_a_fill_cut_by_the_context_names_it(short_engine):
    tpl = template("{word:regex=[a-z]{0,80}}")  # any prefix of the output matches
    expected = _reference(short_engine, tpl, 200)
    assert expected == LengthLimit("context", short_engine.max_request_tokens())
    res = tpl.run(prompt=PROMPT, backend=short_engine, max_tokens=200, token_healing=False)
    assert res.truncated and res.cut_by == expected


def test_a_fill_not_cut_says_none(tiny_engine):
    tpl = template("{ok:bool}")
    assert _reference(tiny_engine, tpl, 50) is None
    res = tpl.run(prompt=PROMPT, backend=tiny_engine, max_tokens=50, token_healing=False)
    assert not res.truncated and res.cut_by is None
    assert res.output.finish_reason == "stop"
