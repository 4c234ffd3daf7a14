"""Greedy output that does not depend on batch composition up to the fused step's 8 rows: the
quantized path with int8 activations (``quantization="gguf"``, ``activation_dtype="int8"``) gives a
request the same tokens alone and inside a batch of 8 (decode steps of 1 and 8 rows, in the C
kernel whose Q8 arithmetic per row does not depend on the number of rows), on a tiny random Q4_1
GGUF file whose matmuls are all quantized.

Above 8 rows (a decode batch of 64, prefill chunks) the quantized linears dequantize tiles for a
float32 GEMM, so a batch of 64 is not covered: running the int8-activation kernel at every batch
size would make it batch-invariant but loosens prefill logits past the reference bounds of
``tests/runtime/test_quantization.py`` and ``test_gguf_deepseek.py``.

The reference is the request run alone: any row-dependent rounding (an accumulation order chosen
by the number of rows) changes logits by an ulp somewhere, which greedy decoding over a random
model turns into a different token within a few dozen steps often enough to catch it.
"""

from __future__ import annotations

import pytest

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


def _prompts(n: int) -> list[str]:
    words = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma", "theta"]
    return [" ".join(words[(i * j + 3) % len(words)] for j in range(2 + i % 7)) for i in range(n)]


def test_greedy_tokens_alone_equal_inside_a_batch_of_8(q4_1_gguf, monkeypatch, tmp_path):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    eng = Engine(
        q4_1_gguf,
        quantization="gguf",
        activation_dtype="int8",
        dtype="float32",
        prefix_cache=False,
        max_kv_tokens=8192,
    )
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    prompts = _prompts(8)
    batch8 = [o.token_ids for o in eng.generate(prompts, params)]
    for i in range(8):
        alone = eng.generate([prompts[i]], params)[0].token_ids
        assert len(alone) == 24
        assert batch8[i] == alone
