"""The HTTP server over data-parallel replicas: in process (TestClient) and through
``structgen serve --tp 2 --dp 2`` (a subprocess, 2 replicas x 2 ranks)."""

from __future__ import annotations

import json
import os
import time

import pytest

pytest.importorskip("fastapi")

SETTINGS = {"dtype": "float32", "max_kv_tokens": 2048, "page_size": 4, "dist_timeout_s": 20}
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
}


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


@pytest.fixture(scope="module")
def dp_client(tiny_model_dirs):
    from fastapi.testclient import TestClient

    from structgen.runtime.async_engine import AsyncEngine
    from structgen.runtime.distributed import AsyncDataParallelEngine
    from structgen.server import create_app

    engine = AsyncEngine(tiny_model_dirs["llama_gqa"], data_parallel_size=2, **SETTINGS)
    assert isinstance(engine, AsyncDataParallelEngine)
    try:
        with TestClient(create_app(engine, served_model_name="tiny")) as client:
            yield client, engine
    finally:
        engine.shutdown()


@pytest.mark.timeout(60)
def test_dp_server_completions_schema_stream_and_stats(dp_client, tiny_model_dirs):
    import jsonschema

    from structgen import Engine, SamplingParams

    client, _ = dp_client
    body = {
        "model": "tiny",
        "prompt": "The quick brown fox",
        "max_tokens": 6,
        "temperature": 0,
        "ignore_eos": True,
    }
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    single = Engine(tiny_model_dirs["llama_gqa"], **SETTINGS)
    ref = single.generate(
        "The quick brown fox", SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    )[0]
    assert r.json()["choices"][0]["text"] == ref.text
    r = client.post(
        "/v1/chat/completions",
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "Who?"}],
            "max_tokens": 40,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "p", "schema": SCHEMA},
            },
        },
    )
    assert r.status_code == 200, r.text
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), SCHEMA)
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as s:
        chunks = [
            json.loads(line[6:])
            for line in s.iter_lines()
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
    assert "".join(c["choices"][0]["text"] for c in chunks) == ref.text
    stats = client.get("/stats").json()
    assert len(stats["replicas"]) == 2 and sum(stats["routed"]) >= 3
    assert stats["pages_total"] == sum(r["pages_total"] for r in stats["replicas"])
    assert client.get("/metrics").status_code == 200


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_structgen_serve_tp2_dp2(tiny_model_dirs, tmp_path):
    import httpx

    from structgen.runtime.distributed.group import owner_alive
    from tests.server.conftest import TINY, start_server

    proc, base = start_server(
        ["--model", tiny_model_dirs["llama_gqa"], *TINY, "--tp", "2", "--dp", "2"],
        tmp_path / "serve.log",
        timeout_s=200,
    )
    try:
        outs = []
        for prompt in ["The quick brown fox", "Maria Lopez, 34", "def f(x):"]:
            r = httpx.post(
                base + "/v1/completions",
                timeout=60,
                json={
                    "model": tiny_model_dirs["llama_gqa"],
                    "prompt": prompt,
                    "max_tokens": 5,
                    "temperature": 0,
                    "ignore_eos": True,
                },
            )
            assert r.status_code == 200, r.text
            outs.append(r.json()["choices"][0]["text"])
        stats = httpx.get(base + "/stats", timeout=30).json()
        assert len(stats["replicas"]) == 2 and sorted(stats["routed"]) == [1, 2]
        # 2 replicas + 2 TP workers (+ fork servers) under the server
        kids = descendants(proc.pid)
        assert len(kids) >= 4
    finally:
        proc.terminate()
        proc.wait(30)
    # uvicorn re-raises SIGTERM (no finally runs): the children notice their owner is gone
    deadline = time.monotonic() + 15
    while any(owner_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [k for k in kids if owner_alive(k)]
