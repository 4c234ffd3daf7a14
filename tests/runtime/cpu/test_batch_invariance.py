"""Greedy output that does not depend on batch composition: the quantized path with int8
activations (``quantization="gguf"``, ``activation_dtype="int8"``) gives a request the same tokens
alone and inside a batch of 8 or of 64 (decode steps of 1 to 64 rows and prefill chunks, all in
the C kernel, whose Q8 arithmetic per (activation row, weight row) does not depend on the number
of rows: csrc/qkernel_rows.h), on a tiny random Q4_1 GGUF file whose matmuls are all quantized.
``tests/runtime/test_batch_invariance.py`` checks the same on the packaged SmolLM2 (slow).

The reference is the request run alone: any row-dependent rounding (an accumulation order chosen
by the number of rows) changes logits by an ulp somewhere, which greedy decoding over a random
model turns into a different token within a few dozen steps often enough to catch it.
"""

from __future__ import annotations

import pytest
import torch

from structgen import Engine, SamplingParams
from structgen.runtime.cpu import quant as cpu_quant

pytestmark = pytest.mark.skipif(not cpu_quant.available(), reason="quantized C kernel not built")


@pytest.fixture(scope="module")
def q4_1_gguf(tmp_path_factory):
    from tests.runtime.test_gguf_families import write_gguf
    from tests.runtime.test_models_families import hf_model, make_config

    hf = hf_model(make_config("qwen2", heads=4, kv_heads=2, hidden_size=128, intermediate_size=256))
    path = tmp_path_factory.mktemp("q4_1") / "model.gguf"
    write_gguf(path, hf, "qwen2", "Q4_1")
    return str(path)


@pytest.fixture(scope="module")
def q8_0_tied_gguf(tmp_path_factory):
    """Every matrix Q8_0 and the embedding tied as the output layer: the lm_head runs the int8
    tile kernel (csrc/qkernel_i8tiles.h, AMX from 5 rows where the CPU has it)."""
    from tests.runtime.test_gguf_families import write_gguf
    from tests.runtime.test_models_families import hf_model, make_config

    cfg = make_config(
        "qwen2",
        heads=4,
        kv_heads=2,
        hidden_size=128,
        intermediate_size=256,
        tie_word_embeddings=True,
    )
    path = tmp_path_factory.mktemp("q8_0") / "model.gguf"
    write_gguf(path, hf_model(cfg), "qwen2", "Q8_0")
    return str(path)


def _prompts(n: int) -> list[str]:
    words = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma", "theta"]
    return [" ".join(words[(i * j + 3) % len(words)] for j in range(2 + i % 7)) for i in range(n)]


@pytest.mark.parametrize("kv_cache_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("size", [8, 64])
def test_greedy_tokens_alone_equal_inside_a_batch(
    q4_1_gguf, monkeypatch, tmp_path, size, kv_cache_dtype
):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    eng = Engine(
        q4_1_gguf,
        quantization="gguf",
        activation_dtype="int8",
        dtype="float32",
        kv_cache_dtype=kv_cache_dtype,  # a 16-bit cache rounds per element: no row dependence
        prefix_cache=False,
        max_kv_tokens=8192,
        max_running_requests=64,
    )
    assert eng.pool.dtype == getattr(torch, kv_cache_dtype)
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    prompts = _prompts(size)
    batch = [o.token_ids for o in eng.generate(prompts, params)]
    for i in range(8) if size == 8 else (0, 5, 21, 40, 63):
        alone = eng.generate([prompts[i]], params)[0].token_ids
        assert len(alone) == 24
        assert batch[i] == alone, f"request {i} differs inside a batch of {size}"


@pytest.mark.parametrize("size", [8, 64])
def test_greedy_tokens_alone_equal_inside_a_batch_tied_q8_0_head(
    q8_0_tied_gguf, monkeypatch, tmp_path, size
):
    from structgen.runtime.quantization.linear import QuantEmbedding

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    eng = Engine(
        q8_0_tied_gguf,
        quantization="gguf",
        activation_dtype="int8",
        dtype="float32",
        kv_cache_dtype="float32",
        prefix_cache=False,
        max_kv_tokens=8192,
        max_running_requests=64,
    )
    model = eng.runner.model
    emb = model.model.embed_tokens
    assert model.lm_head is None and isinstance(emb, QuantEmbedding)
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    prompts = _prompts(size)
    batch = [o.token_ids for o in eng.generate(prompts, params)]
    assert "_int8_tiles" in emb.__dict__  # the head ran the int8 tile kernel
    for i in range(8) if size == 8 else (0, 5, 21, 40, 63):
        alone = eng.generate([prompts[i]], params)[0].token_ids
        assert len(alone) == 24
        assert batch[i] == alone, f"request {i} differs inside a batch of {size}"
