"""A program's cut outputs on structgen's server through OpenAIBackend name the same limit as
on a local engine with the same context: the API sends no token ids and no context, so the
limit is told from the response's usage (the context: its prompt + output tokens). The
server (``structgen serve --max-model-len L`` over the tiny Llama) runs in a subprocess."""

from __future__ import annotations

import pytest

import structgen
from structgen import Engine, gen
from structgen.errors import LengthLimit, ProgramError

pytest.importorskip("openai")
pytest.importorskip("fastapi")

from tests.server.conftest import TINY, start_server, stop_server

LONG = {
    "type": "object",
    "properties": {"note": {"type": "string", "minLength": 40}},
    "required": ["note"],
}
PROMPT = "Ticket:\n"


@pytest.fixture(scope="module")
def limit(tiny_engine):
    """A context that leaves 6 output tokens after PROMPT."""
    return len(tiny_engine.tokenizer.encode(PROMPT, add_special_tokens=False)) + 6


@pytest.fixture(scope="module")
def backends(tiny_llama_dir, tmp_path_factory, limit):
    """The local engine and an OpenAIBackend on a server, both with ``max_model_len=limit``."""
    log = tmp_path_factory.mktemp("cut-server") / "tiny.log"
    args = ["--model", str(tiny_llama_dir), "--served-model-name", "tiny", *TINY]
    proc, base = start_server([*args, "--max-model-len", str(limit)], log)
    remote = structgen.OpenAIBackend(base + "/v1", api_key="x", tokenizer=str(tiny_llama_dir))
    local = Engine(
        str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=4, max_model_len=limit
    )
    yield local, remote
    remote.close()
    stop_server(proc)


@structgen.function
def plain(s, max_tokens):
    s += PROMPT + gen("x", max_tokens=max_tokens)


@structgen.function
def ticket(s, max_tokens):
    s += PROMPT + gen("t", json_schema=LONG, max_tokens=max_tokens)


@pytest.mark.parametrize("max_tokens, name", [(3, "max_tokens"), (200, "context")])
def test_a_remote_cut_names_the_local_limit(backends, limit, max_tokens, name):
    local, remote = backends
    expected = LengthLimit(name, max_tokens if name == "max_tokens" else limit)
    states = [plain.run(max_tokens, backend=b) for b in (local, remote)]
    assert states[0]["x"] == states[1]["x"]
    assert [s.cut_by("x") for s in states] == [expected, expected]
    errors = []
    for b in (local, remote):
        with pytest.raises(ProgramError) as info:
            ticket.run(max_tokens, backend=b)
        errors.append(info.value)
    assert [e.cut_by for e in errors] == [expected, expected]
    assert str(errors[0].original) == str(errors[1].original)
    assert f"hit {expected} before the JSON was complete" in str(errors[1].original)
