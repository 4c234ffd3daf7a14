"""``structgen serve``'s flags reach the engine and the app (no model, no socket)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def test_serve_flags_reach_engine_and_app(monkeypatch):
    import uvicorn

    import structgen.runtime.async_engine as async_engine
    import structgen.server as server
    from structgen.cli import main

    made, apps, runs = [], [], []

    class FakeEngine:
        def __init__(self, model, **settings):
            made.append((model, settings))

        def shutdown(self):
            made.append("shutdown")

    monkeypatch.setattr(async_engine, "AsyncEngine", FakeEngine)
    monkeypatch.setattr(server, "create_app", lambda engine, **kw: apps.append(kw) or "app")
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append((app, kw)))
    assert (
        main(
            [
                "serve",
                "--model",
                "m.gguf",
                "--max-running-requests",
                "8",
                "--page-size",
                "4",
                "--max-kv-tokens",
                "2048",
                "--dtype",
                "float32",
                "--api-key",
                "k",
                "--served-model-name",
                "tiny",
                "--port",
                "1234",
                "--max-n",
                "3",
            ]
        )
        == 0
    )
    assert made == [
        (
            "m.gguf",
            {"dtype": "float32", "max_running_requests": 8, "max_kv_tokens": 2048, "page_size": 4},
        ),
        "shutdown",
    ]
    assert apps == [{"served_model_name": "tiny", "api_key": "k", "max_n": 3}]
    assert runs == [("app", {"host": "127.0.0.1", "port": 1234, "log_level": "info"})]
