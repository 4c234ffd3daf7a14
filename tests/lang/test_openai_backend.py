"""The same programs on the local Engine and on structgen's own server through OpenAIBackend.

The server (``structgen serve`` over the tiny Llama, same settings as ``tiny_engine``)
runs in a subprocess on 127.0.0.1; greedy text, captures and select choices must agree.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

import structgen
from structgen import assistant, gen, select, system, user
from structgen.errors import ProgramError, RequestError
from structgen.fsm.spec import Choice, JsonSchema, Regex

pytest.importorskip("openai")
pytest.importorskip("fastapi")

from tests.server.conftest import TINY, start_server, stop_server


class Pet(BaseModel):
    name: str = Field(max_length=8)
    age: int = Field(ge=0, le=99)


@pytest.fixture(scope="module")
def remote(tiny_llama_dir, tmp_path_factory):
    """An OpenAIBackend on a tiny-model server in a subprocess."""
    log = tmp_path_factory.mktemp("lang-server") / "tiny.log"
    proc, base = start_server(
        [
            "--model",
            str(tiny_llama_dir),
            "--served-model-name",
            "tiny",
            "--api-key",
            "sk-lang",
            *TINY,
        ],
        log,
    )
    backend = structgen.OpenAIBackend(
        base + "/v1", api_key="sk-lang", tokenizer=str(tiny_llama_dir)
    )
    yield backend
    backend.close()
    stop_server(proc)


@structgen.function
def plain(s, name):
    s += "Name: " + name + "\nJob:" + gen("job", max_tokens=6)
    s += "\nCode: " + gen("code", regex=r"[A-Z]{2}[0-9]{2}")
    s += "\nColour: " + gen("colour", choices=["red", "green", "blue"])
    s += "\nPet:\n" + gen("pet", json_schema=Pet, max_tokens=40)
    s += "\nKind: " + select("kind", ["cat", "dog", "the lazy fox"])
    s += "\nEnd" + gen("end", max_tokens=4, stop="\n")


@structgen.function
def chat(s):
    s += system("Be brief.") + user("Name a colour.")
    s += assistant(gen("a", max_tokens=5))
    s += user("Spam or ham?")
    s += assistant("Category: " + select("c", ["spam", "ham"]) + "." + gen("b", max_tokens=3))


def test_model_name_comes_from_the_server(remote):
    assert remote.model == "tiny"


def test_plain_program_same_as_local_engine(tiny_engine, remote):
    local = plain.run("Maria", backend=tiny_engine)
    far = plain.run("Maria", backend=remote)
    assert far.text() == local.text()
    assert far.captures == local.captures
    assert isinstance(far["pet"], Pet)
    for opt, score in local.select_scores("kind").items():
        assert far.select_scores("kind")[opt] == pytest.approx(score, abs=2e-3)


def test_chat_program_same_as_local_engine(tiny_engine, remote):
    local, far = chat.run(backend=tiny_engine), chat.run(backend=remote)
    assert far.messages() == local.messages() and far.captures == local.captures


def test_fork_and_stream_same_as_local_engine(tiny_engine, remote):
    @structgen.function
    def prog(s):
        s += "Once upon a time"
        forks = s.fork(3)
        forks += gen("a", max_tokens=5, temperature=1.0, seed=3, token_healing=False)
        s.join(forks)
        s += "\nThe end:" + gen("b", max_tokens=8)

    assert prog.run(backend=remote).captures == prog.run(backend=tiny_engine).captures
    run = prog.run(backend=remote, stream=True)
    chunks = list(run)
    assert len(chunks) > 3 and "".join(chunks) == run.state.text()
    assert run.state.text() == prog.run(backend=tiny_engine).text()


def test_run_batch_and_template_on_the_server(tiny_engine, remote):
    t = structgen.template(
        "Age: {age:int}\nKind: {kind:choice=cat|dog}\nCode: {c:regex=[a-z]{3}}\n"
    )
    assert t.run(prompt="Maria, 34.\n", backend=remote) == t.run(
        prompt="Maria, 34.\n", backend=tiny_engine
    )
    states = plain.run_batch(
        [{"name": n} for n in ("Ann", "Bo")], backend=remote, progress_bar=False
    )
    assert [s.text() for s in states] == [
        plain.run(n, backend=tiny_engine).text() for n in ("Ann", "Bo")
    ]


def test_request_fields_are_the_ones_the_server_reads():
    """request_body's extra fields round-trip through the server's own request parser."""
    from structgen.lang.openai_backend import request_body
    from structgen.server.protocol import CompletionRequest, parse_request
    from structgen.server.serving import request_constraint

    params = structgen.SamplingParams(
        max_tokens=7, temperature=0.0, top_k=5, seed=3, stop=["\n"], prompt_logprobs=0
    )
    for term in (
        Regex("[a-z]+"),
        Choice(["x", "y z"]),
        JsonSchema(Pet),
        Regex("[0-9]+", trigger="Answer:"),
    ):
        body = request_body([1, 2, 3], params, term)
        req = parse_request(
            CompletionRequest, {"model": "m", **body["standard"], **body["extra_body"]}
        )
        got = request_constraint(req)
        if isinstance(got, tuple):  # (term, the field it came from)
            got = got[0]
        assert type(got) is type(term)
        if isinstance(term, JsonSchema):
            assert got.schema == Pet.model_json_schema()
            assert got.allow_extra_properties is False
        else:
            assert got == term
        assert req.echo and req.logprobs == 0 and req.top_k == 5 and req.seed == 3
        assert req.max_tokens == 7 and req.stop == ["\n"] and req.prompt == [1, 2, 3]
    with pytest.raises(RequestError, match="n must be 1"):
        request_body([1], structgen.SamplingParams(n=2), None)


def test_server_errors_are_program_errors(tiny_llama_dir, remote):
    wrong = structgen.OpenAIBackend(
        remote.base_url, model="nope", api_key="sk-lang", tokenizer=remote.tokenizer
    )
    with pytest.raises(ProgramError, match="does not exist"):
        plain.run("Maria", backend=wrong)
    unauth = structgen.OpenAIBackend(
        remote.base_url, model="tiny", api_key="bad", tokenizer=remote.tokenizer, max_retries=0
    )
    with pytest.raises(ProgramError, match="401"):
        plain.run("Maria", backend=unauth)
    assert plain.run("Maria", backend=remote)["code"]  # the server keeps serving
