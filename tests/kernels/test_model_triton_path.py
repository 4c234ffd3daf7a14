"""The model runner's GPU path on CPU: the Triton backend (interpreted) gives the torch path's
logits.

``attention_backend("triton")`` makes ``models.attention`` dispatch exactly as on CUDA
(``store_kv`` kernel, ``paged_decode_attention`` for pure decode steps, ``extend_attention``
otherwise, each with the layer's sliding window). Tiny random Llama (GQA 3) and Mistral
(sliding window 5 over pages of 4, sequences far longer than the window) models run
ragged prefill, mixed decode + extend, and pure decode steps; logits must equal the
torch reference path's within 1e-4 (fp32).
"""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.model_runner import ModelRunner
from structgen.runtime.models.attention import attention_backend
from structgen.runtime.models.llama import LlamaForCausalLM
from structgen.runtime.models.mistral import MistralForCausalLM
from structgen.runtime.models.testing import PagedSequences

STEPS = [
    {0: [1, 2, 3, 4, 5, 6, 7], 1: [9, 8, 7]},  # ragged prefill
    {0: [11], 1: [12, 13, 14, 15, 16, 17]},  # decode + extend together
    {0: [20], 1: [21]},  # pure decode
    {0: [22], 1: [23]},
]


def tiny_model(family: str):
    """A 2-layer random model (seeded, norms near 1) of ``family`` in fp32 on CPU."""
    import transformers

    kw = {
        "vocab_size": 64, "hidden_size": 96, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 6, "num_key_value_heads": 2, "max_position_embeddings": 64,
    }  # fmt: skip
    if family == "mistral":
        model = MistralForCausalLM(
            transformers.MistralConfig(sliding_window=5, head_dim=16, **kw), torch.float32, "cpu"
        )
    else:
        model = LlamaForCausalLM(transformers.LlamaConfig(**kw), torch.float32, "cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_((1.0 if "norm" in name else 0.0) + 0.1 * torch.randn(p.shape, generator=g))
    return model


def _run(model, backend: str) -> list[torch.Tensor]:
    seqs = PagedSequences(model, num_pages=32, page_size=4)
    out = []
    with torch.no_grad(), attention_backend(backend):
        for chunks in STEPS:
            logits = seqs.step(chunks, all_logits=True)
            out.extend(logits[s] for s in sorted(logits))
    return out


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_triton_attention_path_matches_torch_path(family):
    model = tiny_model(family)
    want = _run(model, "torch")
    got = _run(model, "triton")
    assert len(got) == len(want) == 2 * len(STEPS)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_mistral_window_changes_the_logits():
    # the comparison above could pass with the window ignored on both paths: it must matter
    model = tiny_model("mistral")
    windowed = _run(model, "torch")
    for layer in model.model.layers:
        layer.self_attn.sliding_window = None
    full = _run(model, "torch")
    assert not torch.allclose(windowed[-1], full[-1], atol=1e-3)


def test_model_runner_forces_the_triton_backend():
    model = tiny_model("llama")
    logits = {}
    for backend in ("torch", "triton"):
        pool = model.make_kv_pool(16, 4)
        runner = ModelRunner(model, pool, torch.device("cpu"), attention_backend=backend)
        pages = [pool.alloc(3), pool.alloc(3)]
        runner.forward([[1, 2, 3, 4, 5], [6, 7]], [0, 0], pages)
        logits[backend] = runner.forward([[8], [9]], [5, 2], pages)  # pure decode: decode kernel
    torch.testing.assert_close(logits["triton"], logits["torch"], atol=1e-4, rtol=1e-4)


def test_cuda_graph_padded_decode_under_triton_matches_torch():
    # the batch a CUDA graph would replay (3 rows padded to bucket 4, fixed-width page
    # table), run eagerly through the Triton kernels, vs the unpadded torch path
    from structgen.runtime.cuda_graph import CudaGraphRunner

    model = tiny_model("mistral")
    logits = {}
    for backend in ("torch", "triton"):
        seqs = PagedSequences(model, num_pages=32, page_size=4)
        with torch.no_grad(), attention_backend("torch"):
            seqs.step({0: list(range(1, 12)), 1: [3, 4], 2: [5, 6, 7, 8, 9]})
        chunks = {0: [30], 1: [31], 2: [32]}
        for s in chunks:
            seqs._reserve(s, len(seqs.tokens[s]) + 1)
        batch = ForwardBatch.build(
            list(chunks.values()),
            [len(seqs.tokens[s]) for s in chunks],
            [seqs.pages[s] for s in chunks],
            4,
        )
        with torch.no_grad(), attention_backend(backend):
            if backend == "torch":
                logits[backend] = model(batch, seqs.kv)
            else:
                graphs = CudaGraphRunner(model, seqs.kv, max_batch=8, max_pages=8)
                logits[backend] = graphs.run(batch)
    torch.testing.assert_close(logits["triton"], logits["torch"], atol=1e-4, rtol=1e-4)
