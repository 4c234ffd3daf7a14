"""What a new user of ``OpenAIBackend`` is told: a missing ``openai`` package, and a copy
constraint the server cannot build (copy_from needs a local engine, naming the gen or the
template's copied holes), raised before any request is sent (the URL is unreachable)."""

from __future__ import annotations

import sys

import pytest

import structgen
from structgen import gen
from structgen.errors import ConfigError, ProgramError, RequestError, UnsupportedRegexError
from structgen.fsm.spec import Choice, Concatenation, JsonSchema
from structgen.lang.openai_backend import request_body
from structgen.runtime.sampling_params import SamplingParams

TEXT = "Alice Smith is 34 years old and lives in Paris."
NOWHERE = "http://127.0.0.1:9/v1"  # nothing listens: a request sent would fail differently


def test_without_the_openai_package_the_error_says_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # import openai raises ImportError
    with pytest.raises(
        ConfigError, match=r"OpenAIBackend needs the openai package.*pip install openai"
    ):
        structgen.OpenAIBackend(NOWHERE, model="m")


@pytest.fixture(scope="module")
def remote(tiny_llama_dir):
    pytest.importorskip("openai")
    backend = structgen.OpenAIBackend(
        NOWHERE, model="m", tokenizer=str(tiny_llama_dir), max_retries=0
    )
    yield backend
    backend.close()


@structgen.function
def copied_regex(s):
    s += "Who? " + gen("who", max_tokens=8, regex="[A-Z][a-z]+", copy_from=TEXT)


def test_a_healed_copied_regex_names_the_gen_and_a_local_engine(remote):
    with pytest.raises(ProgramError) as info:
        copied_regex.run(backend=remote)
    message = str(info.value)
    assert "gen 'who': copy_from needs a local engine" in message
    assert "token_healing=False" in message
    assert "oneOf" not in message
    assert isinstance(info.value.original, RequestError)


def test_a_copied_template_names_its_holes_and_a_local_engine(remote):
    form = structgen.template("Name: {name:str}, age {age:int}.")
    with pytest.raises(RequestError) as info:
        form.run(prompt=TEXT + "\n", copy_from=TEXT, backend=remote)
    message = str(info.value)
    assert message.startswith(
        "template (copied holes 'name', 'age'): copy_from needs a local engine"
    )
    assert "template's holes" in message and "oneOf" not in message


def test_a_healed_schema_with_not_keeps_its_own_message():
    """Only copy constraints get the copy message: ``not`` the user wrote is named as such."""
    healed = Concatenation((Choice([" "]), JsonSchema({"type": "integer", "not": {"const": 3}})))
    with pytest.raises(UnsupportedRegexError, match="oneOf, not"):
        request_body([1, 2], SamplingParams(max_tokens=4), healed)
