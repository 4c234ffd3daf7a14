"""quant_matmul: Triton (interpreted) vs the torch reference (tolerances: helpers.TOL).

The bf16 / fp16 outputs are compared relative to the output scale, as the reference
accumulates in float32 and rounds once.
"""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.quant_matmul import dequantize_ref, quant_matmul, quant_matmul_ref, quantize_ref
from tests.kernels.helpers import DTYPES, assert_close


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("bits", "group_size"), [(8, None), (4, 16)], ids=["w8", "w4g16"])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 40, 48), (17, 33, 64)])
def test_quant_matmul(dtype, bits, group_size, m, n, k):
    g = torch.Generator().manual_seed(m * n)
    w = torch.randn(n, k, generator=g)
    qweight, scales, zeros = quantize_ref(w, bits, group_size)
    x = (torch.randn(m, k, generator=g) / k**0.5).to(dtype)
    got = quant_matmul(x, qweight, scales, zeros, bits, group_size, backend="triton")
    assert got.shape == (m, n) and got.dtype == dtype
    assert_close(got, quant_matmul_ref(x, qweight, scales, zeros, bits, group_size), dtype)


def test_quantize_round_trip_and_bad_format():
    w = torch.randn(8, 32)
    for bits, gs, tol in ((8, None, 0.02), (4, 8, 0.2)):
        q, s, z = quantize_ref(w, bits, gs)
        assert (dequantize_ref(q, s, z, bits, gs) - w).abs().max() < tol
    q, s, z = quantize_ref(w, 4, 8)
    with pytest.raises(ValueError):
        quant_matmul(torch.randn(2, 32), q, s, z, 4, 6, backend="triton")
