"""One context length per engine: a model whose config says N (its positions, a smaller
position field, or its positions times a YaRN factor) and ``EngineConfig(max_model_len=M)``
give the same number everywhere it is read: the loader, ``Engine.max_model_len``, the
scheduler and step context, the prompt checks of ``Engine.generate`` and ``Scheduler.add``,
the server's ``/v1/models`` and 400, and the CLI's messages; M past N is refused.

References: N worked out by hand from each config by vLLM's rule
(``_get_and_verify_max_len``; ``model_context_limit``'s own tests cover more configs),
and the engine's behaviour at the limit (a prompt of ``limit - 1`` tokens gets one output
token, one of ``limit`` tokens is refused).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from structgen import Engine, SamplingParams
from structgen.errors import ConfigError, PromptTooLongError
from structgen.runtime.config import (
    DEFAULT_CONTEXT_LENGTH,
    EngineConfig,
    model_context_length,
    model_context_limit,
)
from structgen.runtime.loader import load_model

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
# name: (config fields of the tiny Llama, N by hand, M below N)
MODELS = {
    "positions": ({"max_position_embeddings": 128}, 128, 100),
    "smaller_field": ({"max_position_embeddings": 256, "seq_length": 96}, 96, 80),
    "yarn": ({"max_position_embeddings": 64, "rope_scaling": YARN}, 256, 200),
}
SETTINGS = {"dtype": "float32", "max_kv_tokens": 2048, "page_size": 4}
GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory, tiny_tokenizer):
    """``(folder, N, M)`` of a tiny Llama whose config says N."""
    from tests.tiny_llama import save_tiny_llama

    fields, n, m = MODELS[request.param]
    path = tmp_path_factory.mktemp(request.param)
    return save_tiny_llama(path, tiny_tokenizer, **fields), n, m


def test_the_loader_gives_the_configs_limit(model):
    path, n, _ = model
    loaded = load_model(str(path), torch.float32, "cpu")
    assert model_context_limit(loaded.config)[0] == n
    assert loaded.max_model_len == n


@pytest.mark.parametrize("given", ["unset", "M"])
def test_engine_scheduler_and_prompt_checks_agree(model, given):
    path, n, m = model
    limit = n if given == "unset" else m
    engine = Engine(str(path), **SETTINGS, **({} if given == "unset" else {"max_model_len": m}))
    assert engine.max_model_len == limit
    assert engine.max_request_tokens() == engine.scheduler.max_request_tokens() == limit
    assert engine.step_context.max_request_tokens == limit
    fits = engine.generate([[5] * (limit - 1)], GREEDY)[0]
    assert fits.finish_reason == "length" and len(fits.token_ids) == 1  # room for one
    with pytest.raises(PromptTooLongError) as info:
        engine.generate([[5] * limit], GREEDY)
    assert str(info.value) == (
        f"prompt has {limit} tokens; this engine's context allows at most {limit - 1} "
        "(max_model_len, or the KV cache's size where smaller)"
    )
    (failed,) = engine.run_requests([engine.make_request([5] * limit, GREEDY)])
    assert failed.finish_reason == "error"
    assert failed.error == str(info.value)  # the scheduler's refusal in the same words


def test_max_model_len_past_the_configs_limit_is_refused(model):
    path, n, _ = model
    with pytest.raises(ConfigError, match=rf"^EngineConfig.max_model_len={n + 1} is more "):
        Engine(str(path), max_model_len=n + 1, **SETTINGS)
    assert Engine(str(path), max_model_len=n, **SETTINGS).max_request_tokens() == n


def test_the_cli_names_the_same_context(model, capsys):
    from structgen.cli import main

    path, n, _ = model
    argv = ["generate", "--model", str(path), "--raw", "--max-tokens", "1000", "--prompt", "x y"]
    assert main(argv) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        f"structgen: warning: cut by the end of the model's context ({n} tokens, prompt "
        "included); shorten the prompt for a longer output"
    )


@pytest.mark.parametrize("given", ["unset", "M"])
def test_the_server_reports_and_enforces_the_same_context(model, given, monkeypatch):
    """``structgen serve [--max-model-len M]``: its app's ``/v1/models`` and its 400."""
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    from fastapi.testclient import TestClient

    from structgen.cli import main

    path, n, m = model
    limit = n if given == "unset" else m
    seen = []

    class InProcessServer:  # the app through TestClient, no socket served
        def __init__(self, config):
            self.app = config.app

        def run(self, sockets):
            with TestClient(self.app) as client:
                seen.append(client.get("/v1/models").json()["data"][0]["max_model_len"])
                for num in (limit - 1, limit):
                    # greedy, EOS ignored: the one token the context leaves is always
                    # generated (a sampled EOS made it 0 tokens now and then)
                    body = {
                        "model": "t", "prompt": [5] * num, "max_tokens": 4,
                        "temperature": 0.0, "ignore_eos": True,
                    }  # fmt: skip
                    r = client.post("/v1/completions", json=body)
                    seen.append((r.status_code, r.json()))

    monkeypatch.setattr(uvicorn, "Server", InProcessServer)
    flags = ["--dtype", "float32", "--max-kv-tokens", "2048", "--page-size", "4", "--port", "0"]
    if given == "M":
        flags += ["--max-model-len", str(m)]
    assert main(["serve", "--model", str(path), "--served-model-name", "t", *flags]) == 0
    reported, (ok_status, ok), (status, refused) = seen
    assert reported == limit
    assert ok_status == 200 and ok["usage"]["completion_tokens"] == 1, json.dumps(ok)
    assert status == 400 and refused["error"]["code"] == "context_length_exceeded"
    assert refused["error"]["message"] == (
        f"the prompt has {limit} tokens; this model's context allows at most {limit - 1}"
    )


def test_the_cli_names_the_flag_past_the_configs_limit(model, capsys):
    from structgen.cli import main

    path, n, _ = model
    pytest.importorskip("fastapi")
    code = main(["serve", "--model", str(path), "--port", "0", "--max-model-len", str(n + 1)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"structgen: error: --max-model-len {n + 1} is more than this model's context of {n} "
    )


# ------------------------------------------------- a config that names no limit
class _Tokenizer(SimpleNamespace):
    pass


@pytest.mark.parametrize(
    "tokenizer, expected",
    [
        (None, DEFAULT_CONTEXT_LENGTH),
        (_Tokenizer(model_max_length=4096), 4096),
        (_Tokenizer(model_max_length=int(1e30)), DEFAULT_CONTEXT_LENGTH),  # transformers' unset
    ],
)
def test_a_config_without_a_limit_takes_the_tokenizers_or_2048(tokenizer, expected):
    config = SimpleNamespace(hidden_size=64)
    assert model_context_length(config, tokenizer) == expected
    assert EngineConfig().context_length(config, expected) == expected
    assert EngineConfig(max_model_len=10**6).context_length(config, expected) == 10**6


def test_a_config_limit_wins_over_the_tokenizers():
    config = SimpleNamespace(max_position_embeddings=512)
    assert model_context_length(config, _Tokenizer(model_max_length=4096)) == 512
