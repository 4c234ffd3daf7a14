"""The default CPU engine's host step in numpy (#21 seam 5) against the torch path it replaced:
``ModelRunner`` over a default-kind model (numpy ``ForwardBatch`` into ``CpuDecoder``, ndarray
logits) against the per-op torch forward, and ``sample_step`` on an ndarray against the same
logits as a tensor (grammar masks, bans, penalties, logprobs)."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from structgen import SamplingParams
from structgen.fsm import compile_regex
from structgen.runtime import step
from structgen.runtime.model_runner import ModelRunner
from structgen.runtime.models import decoder as model_decoder
from structgen.runtime.sampler import make_generator
from tests.runtime.cpu.test_decoder import _model, pytestmark  # noqa: F401 (skip marker)


def _steps(runner: ModelRunner, pages: list[int]) -> list:
    """A 70-token prompt (two fused calls) in two chunks, then two decode steps of a batch of 2."""
    prompt = [(7 * i + 3) % 250 + 1 for i in range(70)]
    half = pages[: len(pages) // 2], pages[len(pages) // 2 :]
    outs = [
        runner.forward_logits([prompt[:50]], [0], [half[0]], [49]),
        runner.forward_logits([prompt[50:], prompt[:9]], [50, 0], list(half), [19, 28]),
        runner.forward_logits([[5], [9]], [70, 9], list(half), None),
        runner.forward_logits([[6], [11]], [71, 10], list(half), [0, 1]),
    ]
    return outs


def test_runner_host_logits_equal_the_torch_forward(tmp_path_factory, monkeypatch):
    model = _model(tmp_path_factory, "qwen3", "Q4_1")
    host_runner = ModelRunner(model, model.make_kv_pool(16, 16), "cpu")
    host = _steps(host_runner, host_runner.pool.alloc(12))
    assert all(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in host)
    monkeypatch.setattr(model_decoder, "cpu_decoder", lambda *a: None)  # the per-op torch path
    torch_runner = ModelRunner(model, model.make_kv_pool(16, 16), "cpu")
    assert model.host_decoder(torch_runner.pool) is None
    ref = _steps(torch_runner, torch_runner.pool.alloc(12))
    assert all(isinstance(x, torch.Tensor) for x in ref)
    for h, r in zip(host, ref):
        assert np.array_equal(h, r.numpy())
    monkeypatch.undo()
    wrapped = host_runner.forward([[5]], [0], [[1]])  # the public forward: a tensor
    assert isinstance(wrapped, torch.Tensor) and wrapped.shape[0] == 1
    seen = []  # a forward hook on the model still sees every step (through the torch call)
    handle = model.register_forward_hook(lambda _m, _i, out: seen.append(out))
    try:
        hooked = host_runner.forward_logits([[5]], [0], [[1]])
    finally:
        handle.remove()
    assert isinstance(hooked, torch.Tensor) and len(seen) == 1
    assert np.array_equal(hooked.numpy(), host_runner.forward_logits([[5]], [0], [[1]]))


def _request(params: SamplingParams, matcher=None, outputs=()):
    return types.SimpleNamespace(
        params=params,
        matcher=matcher,
        output_token_ids=list(outputs),
        prompt_token_ids=[1, 2, 3, 2],
        generator=make_generator(params.seed, "cpu") if params.seed is not None else None,
        finish=lambda *a: None,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sample_step_on_arrays_equals_tensors(tiny_engine, seed):
    vocab = tiny_engine.vocab
    width = vocab.size if hasattr(vocab, "size") else len(vocab.token_bytes)
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((5, width)) * 4).astype(np.float32)
    grammar = compile_regex(r"[a-z]{2,6} [0-9]+", vocab)

    def reqs():
        return [
            _request(SamplingParams(temperature=0.0, logprobs=3), grammar.matcher()),
            _request(SamplingParams(temperature=0.0, min_tokens=4), outputs=[5]),
            _request(
                SamplingParams(temperature=0.0, presence_penalty=1.5, logit_bias={7: 9.0}),
                outputs=[int(np.argmax(logits[2])), 7],
            ),
            _request(SamplingParams(temperature=0.0, logprobs=2), grammar.matcher()),
            _request(SamplingParams(temperature=0.8, seed=11), outputs=[3]),
        ]

    host = logits.copy()
    tensor = torch.from_numpy(logits.copy())
    got = step.sample_step(host, reqs(), frozenset({0}))
    want = step.sample_step(tensor, reqs(), frozenset({0}))
    assert got == want
    assert np.array_equal(host, tensor.numpy())  # masked, banned, penalised alike
    assert np.isinf(host[0]).sum() > 0 and np.isinf(host[1, 0])
