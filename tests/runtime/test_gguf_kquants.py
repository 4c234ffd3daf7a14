"""Q6_K (int8, group 16, float32 scales) and Q4_K (int4 rows, group 32, float32 scales and mins)
kept quantized: the quantized matmul equals ``x @ W.T`` with ggml's dequantized weight (float32
activations: exact up to summation order), and the Q6_K embedding looks up ggml's rows."""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.quantization.gguf_kquants import kquant_module
from structgen.runtime.quantization.linear import QuantEmbedding, QuantLinear
from tests.runtime.loader.test_dequant import random_tensor


@pytest.mark.parametrize("m", [1, 3, 17])
def test_q6_k_linear_matches_dequantized_weight(m):
    raw, ref = random_tensor("Q6_K", (48, 512), seed=5)
    w = torch.from_numpy(ref)
    rows = torch.randperm(48, generator=torch.Generator().manual_seed(1))
    lin = kquant_module(raw, "Q6_K", (48, 512), rows, False, torch.float32)
    assert isinstance(lin, QuantLinear) and lin.group_size == 16
    assert torch.equal(lin.dequantized_weight(), w[rows])
    lin.activation_dtype = torch.float32
    x = torch.randn(m, 512, generator=torch.Generator().manual_seed(2))
    want = (x.double() @ w[rows].double().T).float()
    torch.testing.assert_close(lin(x), want, atol=1e-4, rtol=1e-4)


def test_q6_k_embedding_rows_are_ggml_rows():
    raw, ref = random_tensor("Q6_K", (40, 256), seed=6)
    emb = kquant_module(raw, "Q6_K", (40, 256), None, True, torch.float32)
    assert isinstance(emb, QuantEmbedding)
    ids = torch.tensor([0, 39, 7, 7])
    assert torch.equal(emb(ids), torch.from_numpy(ref)[ids])


@pytest.mark.parametrize("m", [1, 3, 17])
def test_q4_k_linear_matches_dequantized_weight(m):
    """Q4_K as int4 rows, group 32, float32 scales and mins: ggml's weight to the bit, in a
    permuted row order, and the exact float32 matmul (kernel and dequantized-tile paths)."""
    from structgen.runtime.cpu import quant as cpu_quant

    if not cpu_quant.available():
        pytest.skip("Q4_K is kept quantized only with the C kernel")
    raw, ref = random_tensor("Q4_K", (48, 512), seed=7, scale=4e-4)
    w = torch.from_numpy(ref)
    rows = torch.randperm(48, generator=torch.Generator().manual_seed(1))
    lin = kquant_module(raw, "Q4_K", (48, 512), rows, False, torch.float32)
    assert isinstance(lin, QuantLinear) and lin.kind == "int4" and lin.group_size == 32
    assert lin.scales.dtype == torch.float32 and lin.mins.dtype == torch.float32
    assert torch.equal(lin.dequantized_weight(), w[rows])
    lin.activation_dtype = torch.float32
    x = torch.randn(m, 512, generator=torch.Generator().manual_seed(2))
    want = (x.double() @ w[rows].double().T).float()
    torch.testing.assert_close(lin(x), want, atol=1e-5, rtol=1e-4)


def test_q4_k_embedding_and_bad_shapes_are_not_kept_quantized():
    """A Q4_K embedding is dequantized (QuantEmbedding is int8 only), as are matrices whose row
    is not whole blocks."""
    raw, _ = random_tensor("Q4_K", (4, 256))
    assert kquant_module(raw, "Q4_K", (4, 256), None, True, torch.float32) is None
    raw6, _ = random_tensor("Q6_K", (4, 256))
    assert kquant_module(raw6, "Q6_K", (1024,), None, False, torch.float32) is None
