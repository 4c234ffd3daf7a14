"""CUDA-graph decode runner: buckets, padding, static buffers, and the padded forward on CPU.

Capture and replay need a GPU and are not exercised here; :meth:`CudaGraphRunner.run`
without a captured graph runs the very padded static batch a graph would replay, so its
logits and KV writes are compared with the unpadded forward (the reference).
"""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.cuda_graph import CudaGraphRunner, batch_buckets
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.model_runner import ModelRunner
from structgen.runtime.models.llama import LlamaForCausalLM

PAGE = 4


def _model(device: str = "cpu"):
    from transformers import LlamaConfig

    cfg = LlamaConfig(
        vocab_size=50, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    model = LlamaForCausalLM(cfg, torch.float32, device)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(
                (1.0 if "norm" in name else 0.0)
                + 0.1 * torch.randn(p.shape, generator=g).to(device)
            )
    return model


def test_batch_buckets():
    assert batch_buckets(1) == [1]
    assert batch_buckets(5) == [1, 2, 4, 5]
    assert batch_buckets(8) == [1, 2, 4, 8]
    assert batch_buckets(30) == [1, 2, 4, 8, 16, 24, 30]
    assert batch_buckets(64)[-3:] == [48, 56, 64]
    with pytest.raises(ValueError, match="cuda_graph_max_batch"):
        batch_buckets(0)


def test_bucket_for_and_can_run():
    model = _model()
    runner = CudaGraphRunner(model, model.make_kv_pool(16, PAGE), max_batch=24, max_pages=3)
    assert [runner.bucket_for(b) for b in (1, 3, 5, 9, 17, 24, 25)] == [1, 4, 8, 16, 24, 24, None]
    decode = ForwardBatch.build([[1], [2]], [3, 8], [[1], [2, 3, 4]], PAGE)
    assert runner.can_run(decode)
    assert not runner.can_run(
        ForwardBatch.build([[1, 2], [3]], [0, 4], [[1], [2, 3]], PAGE)
    )  # extend
    assert not runner.can_run(
        ForwardBatch.build([[1]], [12], [[1, 2, 3, 4]], PAGE)
    )  # page table too wide
    assert not runner.can_run(
        ForwardBatch.build([[1]] * 25, [0] * 25, [[1]] * 25, PAGE)
    )  # batch too big
    with pytest.raises(ValueError, match="decode step"):
        runner.run(ForwardBatch.build([[1, 2]], [0], [[1]], PAGE))


def test_load_pads_into_the_scratch_page():
    model = _model()
    runner = CudaGraphRunner(model, model.make_kv_pool(16, PAGE), max_batch=8, max_pages=3)
    runner.page_table.fill_(7)  # stale values from an earlier, larger step
    runner.input_ids.fill_(7)
    batch = ForwardBatch.build([[5], [6], [9]], [2, 5, 0], [[3], [4, 5], [6]], PAGE)
    assert runner.load(batch) == 4
    assert runner.input_ids[:4].tolist() == [5, 6, 9, 0]
    assert runner.positions[:4].tolist() == [2, 5, 0, 0]
    assert runner.prefix_lens[:4].tolist() == [2, 5, 0, 0]
    # out slots of the real rows are theirs; the padded row writes slot 0 of page 0
    assert runner.out_slots[:4].tolist() == [3 * PAGE + 2, 5 * PAGE + 1, 6 * PAGE, 0]
    assert runner.page_table[:4].tolist() == [[3, 0, 0], [4, 5, 0], [6, 0, 0], [0, 0, 0]]
    sb = runner.static_batch(4)
    assert sb.extend_lens.tolist() == [1] * 4 and sb.logits_indices.tolist() == [0, 1, 2, 3]
    assert sb.plans["triton"] == (1, True)  # fixed plan: no host sync while capturing


def _prefilled(model, lens):
    pool = model.make_kv_pool(32, PAGE)
    runner = ModelRunner(model, pool, torch.device("cpu"))
    pages, seqs = [], []
    g = torch.Generator().manual_seed(1)
    for n in lens:
        pages.append(pool.alloc(-(-(n + 4) // PAGE)))
        seqs.append(torch.randint(1, 50, (n,), generator=g).tolist())
    runner.forward(seqs, [0] * len(lens), pages)
    return pool, runner, pages


@pytest.mark.parametrize(
    "lens", [[3], [5, 1, 9], [2, 7, 4, 1, 6]], ids=["b1", "b3-pad1", "b5-pad3"]
)
def test_padded_forward_equals_unpadded(lens):
    model = _model()
    pool_a, runner_a, pages = _prefilled(model, lens)  # reference: unpadded eager forward
    pool_b, _, _ = _prefilled(model, lens)  # same pages, same history
    graphs = CudaGraphRunner(model, pool_b, max_batch=8, max_pages=4)
    prefix = list(lens)
    for step in range(3):  # several decode steps: later ones read what padded steps wrote
        tokens = [[10 + step + i] for i in range(len(lens))]
        batch = ForwardBatch.build(tokens, prefix, pages, PAGE)
        assert graphs.can_run(batch)
        want = runner_a.forward(tokens, prefix, pages)
        with torch.inference_mode():
            got = graphs.run(batch)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        prefix = [p + 1 for p in prefix]
    for layer in range(len(pool_a.k)):  # every real page identical; only scratch page 0 differs
        torch.testing.assert_close(pool_b.k[layer][1:], pool_a.k[layer][1:], atol=1e-6, rtol=0)
        torch.testing.assert_close(pool_b.v[layer][1:], pool_a.v[layer][1:], atol=1e-6, rtol=0)


def test_logits_rows_subset():
    model = _model()
    pool, _, pages = _prefilled(model, [4, 6, 2])
    graphs = CudaGraphRunner(model, pool, max_batch=4, max_pages=4)
    batch = ForwardBatch.build([[1], [2], [3]], [4, 6, 2], pages, PAGE, logits_rows=[2, 0])
    with torch.inference_mode():
        got = graphs.run(batch)
    assert got.shape == (2, 50)
    _, runner2, _ = _prefilled(model, [4, 6, 2])
    want = runner2.forward([[1], [2], [3]], [4, 6, 2], pages, logits_rows=[2, 0])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_graphs_are_cuda_only():
    model = _model()
    pool = model.make_kv_pool(8, PAGE)
    runner = ModelRunner(model, pool, torch.device("cpu"), cuda_graph=True, max_model_len=32)
    assert runner.graphs is None  # ignored on CPU
    with pytest.raises(RuntimeError, match="CUDA"):
        CudaGraphRunner(model, pool, 4, 8).capture()
    with pytest.raises(ValueError, match="attention backend"):
        ModelRunner(model, pool, torch.device("cpu"), attention_backend="flash")


def test_engine_config_flags():
    from structgen.errors import ConfigError
    from structgen.runtime.config import EngineConfig

    assert EngineConfig().cuda_graph is True and EngineConfig().cuda_graph_max_batch == 64
    with pytest.raises(ConfigError, match="cuda_graph"):
        EngineConfig(cuda_graph="yes")
    with pytest.raises(ConfigError, match="cuda_graph_max_batch"):
        EngineConfig(cuda_graph_max_batch=0)


def test_cpu_engine_runs_without_graphs(tiny_engine):
    assert tiny_engine.runner.graphs is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_captured_graphs_replay_the_eager_logits():
    """On a GPU: capture, replay across buckets, and compare with the eager Triton path."""
    model = _model("cuda")
    logits = {}
    for graphs in (False, True):
        pool = model.make_kv_pool(32, PAGE)
        runner = ModelRunner(model, pool, torch.device("cuda"), cuda_graph=graphs,
                             cuda_graph_max_batch=8, max_model_len=32)  # fmt: skip
        pages = [pool.alloc(5) for _ in range(5)]
        runner.forward([[1, 2, 3], [4], [5, 6, 7, 8, 9], [3, 3], [7]], [0] * 5, pages)
        out = []
        for step, bsz in enumerate((5, 3, 1)):  # buckets 8, 4, 1
            prefix = [3, 1, 5, 2, 1][:bsz]
            prefix = [p + step for p in prefix]
            out.append(runner.forward([[10 + step]] * bsz, prefix, pages[:bsz]))
        logits[graphs] = out
        if graphs:
            assert runner.graphs is not None and runner.graphs.num_replays == 3
    for g, e in zip(logits[True], logits[False]):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
