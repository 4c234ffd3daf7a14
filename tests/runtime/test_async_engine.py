"""AsyncEngine on the tiny random Llama: streaming equals the sync result, abort frees pages,
many concurrent tasks, bad requests fail alone."""

from __future__ import annotations

import asyncio

import pytest

from structgen import AsyncEngine, SamplingParams
from structgen.errors import RequestError

GREEDY = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def async_engine(tiny_llama_dir):
    engine = AsyncEngine(str(tiny_llama_dir), dtype="float32", page_size=4, max_kv_tokens=2048)
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


def test_abort_mid_decode_frees_pages(async_engine):
    async def main():
        params = SamplingParams(max_tokens=200, temperature=0.0, ignore_eos=True)
        seen = []
        async for out in async_engine.generate("Maria", params, request_id="victim"):
            seen.append(out)
            if len(out.token_ids) >= 3 and out.finish_reason is None:
                await async_engine.abort("victim")
        return seen

    outs = asyncio.run(main())
    assert outs[-1].finish_reason == "abort"
    assert len(outs[-1].token_ids) < 200
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
    engine = AsyncEngine(str(tiny_llama_dir), dtype="float32", page_size=4,
                         chunked_prefill_tokens=4, max_kv_tokens=1024)
    try:
        async def main():
            params = SamplingParams(max_tokens=50, temperature=0.0, ignore_eos=True)
            gen = engine.generate([7] * 300, params, request_id="p")
            task = asyncio.ensure_future(gen.__anext__())
            await asyncio.sleep(0.05)  # a few 4-token prefill chunks in
            await engine.abort("p")
            return await task

        out = asyncio.run(main())
        assert out.finish_reason == "abort" and out.token_ids == []
        stats = engine.stats()
        assert stats["running"] == 0 and stats["waiting"] == 0
        assert stats["pages_free"] + stats["pages_cached"] == stats["pages_total"]
        engine.engine.flush_cache()
        assert engine.engine.pool.num_free_pages == engine.engine.pool.num_usable_pages
    finally:
        engine.shutdown()
