"""quant_matmul: Triton (interpreted) vs the torch reference (tolerances: helpers.TOL).

The bf16 / fp16 outputs are compared relative to the output scale, as the reference
accumulates in float32 and rounds once.
"""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.quant_matmul import (
    dequantize_ref,
    quant_matmul,
    quant_matmul_ref,
    quantize_ref,
)
from tests.kernels.helpers import DTYPES, assert_close


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("bits", "group_size"), [(8, None), (8, 16), (4, 16)], ids=["w8", "w8g16", "w4g16"]
)
@pytest.mark.parametrize(("m", "n", "k"), [(1, 40, 48), (17, 33, 64)])
def test_quant_matmul(dtype, bits, group_size, m, n, k):
    g = torch.Generator().manual_seed(m * n)
    w = torch.randn(n, k, generator=g)
    qweight, scales, zeros = quantize_ref(w, bits, group_size)
    x = (torch.randn(m, k, generator=g) / k**0.5).to(dtype)
    got = quant_matmul(x, qweight, scales, zeros, bits, group_size, backend="triton")
    assert got.shape == (m, n) and got.dtype == dtype
    assert_close(got, quant_matmul_ref(x, qweight, scales, zeros, bits, group_size), dtype)


@pytest.mark.parametrize("bits", [8, 4])
def test_zero_points_matter(bits):
    # an off-centre weight (all positive) gives zero points far from mid-range: a kernel
    # that ignored them (or used a constant) would be off by ~zeros * scales per weight
    g = torch.Generator().manual_seed(3)
    w = torch.rand(24, 32, generator=g) * 2 + 0.5
    qweight, scales, zeros = quantize_ref(w, bits, 8)
    assert zeros.min() < -(2**bits) / 4  # codes sit well above the zero point
    x = torch.randn(3, 32, generator=g)
    got = quant_matmul(x, qweight, scales, zeros, bits, 8, backend="triton")
    torch.testing.assert_close(
        got, quant_matmul_ref(x, qweight, scales, zeros, bits, 8), atol=2e-5, rtol=1e-5
    )
    torch.testing.assert_close(got, x @ w.T, atol=0.8 if bits == 4 else 0.06, rtol=0)  # vs float W
    no_zp = quant_matmul_ref(x, qweight, scales, torch.zeros_like(zeros), bits, 8)
    assert (got - no_zp).abs().max() > 1.0


def test_quantize_round_trip_and_bad_format():
    w = torch.randn(8, 32)
    for bits, gs, tol in ((8, None, 0.02), (8, 8, 0.01), (4, 8, 0.2)):
        q, s, z = quantize_ref(w, bits, gs)
        assert (dequantize_ref(q, s, z, bits, gs) - w).abs().max() < tol
    q, s, z = quantize_ref(w, 4, 8)
    with pytest.raises(ValueError):
        quant_matmul(torch.randn(2, 32), q, s, z, 4, 6, backend="triton")
