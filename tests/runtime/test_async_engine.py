"""AsyncEngine on the tiny random Llama: streaming equals the sync result, abort frees pages,
many concurrent tasks, bad requests fail alone, pause/resume at a step boundary.

Tests that abort at a given point pause the loop there with a ``StepGate``, never by
sleeping: what they see does not depend on the machine's speed."""

from __future__ import annotations

import asyncio
import time

import pytest

from structgen import AsyncEngine, SamplingParams
from structgen.errors import RequestError
from tests.step_gate import StepGate

GREEDY = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def gate():
    return StepGate()


@pytest.fixture(scope="module")
def async_engine(tiny_llama_dir, gate):
    engine = gate.attach(
        AsyncEngine(
            str(tiny_llama_dir), step_hook=gate, dtype="float32", page_size=4, max_kv_tokens=2048
        )
    )
    yield engine
    engine.shutdown()


async def _collect(engine, prompt, params=GREEDY, request_id=None):
    outs = [o async for o in engine.generate(prompt, params, request_id=request_id)]
    return outs


def test_stream_matches_sync_generate(async_engine, tiny_engine):
    prompts = ["Maria Lopez", "The quick brown", "Héllo wörld"]

    async def main():
        return await asyncio.gather(*(_collect(async_engine, p) for p in prompts))

    streams = asyncio.run(main())
    sync = tiny_engine.generate(prompts, GREEDY)
    for outs, ref in zip(streams, sync):
        final = outs[-1]
        assert final.finish_reason == "length"
        assert final.token_ids == ref.token_ids
        assert "".join(o.delta_text for o in outs) == final.text == ref.text
        assert all(o.finish_reason is None for o in outs[:-1])


def test_abort_mid_decode_frees_pages(async_engine, gate):
    """Paused after 5 steps (prefill + 4 decodes) the request has 5 of its 200 tokens; the
    abort sent then ends it there."""
    gate.pause_after(5)

    async def main():
        params = SamplingParams(max_tokens=200, temperature=0.0, ignore_eos=True)
        seen = []

        async def consume():
            async for out in async_engine.generate("Maria", params, request_id="victim"):
                seen.append(out)

        task = asyncio.ensure_future(consume())
        try:
            await asyncio.to_thread(gate.wait_paused)
            await async_engine.abort("victim")
            await task
        finally:
            gate.resume()
        return seen

    outs = asyncio.run(main())
    assert outs[-1].finish_reason == "abort"
    assert len(outs[-1].token_ids) == 5
    stats = async_engine.stats()
    assert stats["pages_free"] + stats["pages_cached"] == stats["pages_total"]
    assert stats["running"] == 0


def test_bad_request_raises_and_others_continue(async_engine):
    async def main():
        good = asyncio.create_task(_collect(async_engine, "Maria"))
        with pytest.raises(RequestError):
            await _collect(async_engine, 3.5)
        too_long = await _collect(async_engine, [5] * 700)
        return await good, too_long

    good, too_long = asyncio.run(main())
    assert good[-1].finish_reason == "length"
    assert too_long[-1].finish_reason == "error"


def test_abort_mid_prefill_frees_everything(tiny_llama_dir):
    gate = StepGate()
    engine = gate.attach(
        AsyncEngine(
            str(tiny_llama_dir),
            step_hook=gate,
            dtype="float32",
            page_size=4,
            chunked_prefill_tokens=4,
            max_kv_tokens=1024,
        )
    )
    try:
        gate.pause_after(3)  # three 4-token prefill chunks of the 300-token prompt

        async def main():
            params = SamplingParams(max_tokens=50, temperature=0.0, ignore_eos=True)
            gen = engine.generate([7] * 300, params, request_id="p")
            task = asyncio.ensure_future(gen.__anext__())
            await asyncio.to_thread(gate.wait_paused)
            (req,) = engine.engine.scheduler.running
            computed = req.num_computed_tokens
            await engine.abort("p")
            return await task, computed

        out, computed = asyncio.run(main())
        assert computed == 12
        assert out.finish_reason == "abort" and out.token_ids == []
        stats = engine.stats()
        assert stats["running"] == 0 and stats["waiting"] == 0
        assert stats["pages_free"] + stats["pages_cached"] == stats["pages_total"]
        engine.engine.flush_cache()
        assert engine.engine.pool.num_free_pages == engine.engine.pool.num_usable_pages
    finally:
        engine.shutdown()


def test_pause_queues_requests_and_resume_runs_them(async_engine, gate):
    """While paused no step is taken (requests wait, counted by ``stats``); after
    ``resume`` they run to the same result as unpaused."""

    async def main():
        async_engine.pause()
        try:
            assert async_engine.is_paused
            # the loop's own count, raised before a step's outputs are published (the
            # gate's hook runs after them: it may not have seen the last step yet)
            steps = async_engine.num_steps
            task = asyncio.ensure_future(_collect(async_engine, "Maria Lopez"))
            deadline = time.monotonic() + 60
            while async_engine.stats()["waiting"] == 0:  # polled: the add is queued
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            assert async_engine.num_steps == steps and not task.done()
        finally:
            async_engine.resume()
        return await task

    outs = asyncio.run(main())
    assert not async_engine.is_paused
    assert outs[-1].finish_reason == "length"
    assert outs[-1].token_ids == asyncio.run(_collect(async_engine, "Maria Lopez"))[-1].token_ids
