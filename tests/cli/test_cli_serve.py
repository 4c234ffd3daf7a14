"""``structgen serve``'s flags reach the engine and the app (no model, no socket)."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def test_serve_flags_reach_engine_and_app(monkeypatch):
    import uvicorn

    import structgen.runtime.async_engine as async_engine
    import structgen.server as server
    from structgen.cli import main

    made, apps, runs = [], [], []
    port = _free_port()

    class FakeEngine:
        def __init__(self, model, **settings):
            made.append((model, settings))

        def shutdown(self):
            made.append("shutdown")

    monkeypatch.setattr(async_engine, "AsyncEngine", FakeEngine)
    monkeypatch.setattr(server, "create_app", lambda engine, **kw: apps.append(kw) or "app")

    class FakeServer:
        def __init__(self, config):
            self.config = config

        def run(self, sockets):
            (sock,) = sockets
            c = self.config
            runs.append((c.app, {"host": c.host, "port": c.port, "log_level": c.log_level}))
            runs.append(sock.getsockname()[1])

    monkeypatch.setattr(uvicorn, "Server", FakeServer)
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
                str(port),
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
    assert runs == [("app", {"host": "127.0.0.1", "port": port, "log_level": "info"}), port]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_on_a_taken_port_fails_before_the_model_loads(monkeypatch, capsys):
    import structgen.runtime.async_engine as async_engine
    from structgen.cli import main

    def no_engine(*a, **kw):
        raise AssertionError("the model must not load when the port is taken")

    monkeypatch.setattr(async_engine, "AsyncEngine", no_engine)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--model", "m.gguf", "--port", str(port)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "in use" in err
