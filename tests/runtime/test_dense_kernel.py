"""structgen's C small-M matmul (csrc/densekernel.c) vs torch's F.linear (the reference)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from structgen.runtime.models import dense_kernel
from structgen.runtime.models.dense_kernel import MAX_ROWS, kernel_available, linear

SHAPES = [(1, 37, 19), (2, 100, 576), (3, 1536, 576), (5, 576, 1536), (8, 33, 17), (1, 7, 1), (4, 1, 40)]


def test_kernel_is_built():
    """setup.py builds the extension on this kind of machine (gcc present): a silent
    fallback to F.linear would hide a broken build."""
    assert kernel_available()


@pytest.mark.parametrize("isa", ["auto", "scalar"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_fp32_matches_f_linear(m, n, k, isa):
    ext = dense_kernel._ext
    ext.set_isa(isa)
    try:
        torch.manual_seed(m * 1000 + n + k)
        x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
        for bias in (None, b):
            got = linear(x, w, bias)
            assert got.dtype == torch.float32 and got.shape == (m, n)
            torch.testing.assert_close(got, F.linear(x, w, bias), atol=1e-4 * max(1.0, k ** 0.5), rtol=1e-5)
    finally:
        ext.set_isa("auto")


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_bf16_matches_f_linear(m, n, k):
    torch.manual_seed(n + k)
    x, w, b = (t.to(torch.bfloat16) for t in (torch.randn(m, k), torch.randn(n, k), torch.randn(n)))
    got = linear(x, w, b)
    assert got.dtype == torch.bfloat16
    ref = F.linear(x.float(), w.float(), b.float())  # fp32 accumulation, then one rounding
    torch.testing.assert_close(got.float(), ref.to(torch.bfloat16).float(), atol=1e-2, rtol=1e-2)


def test_other_inputs_take_f_linear(monkeypatch):
    w = torch.randn(16, 8)
    big = torch.randn(MAX_ROWS + 1, 8)  # more rows than the kernel takes
    assert torch.equal(linear(big, w), F.linear(big, w))
    x3 = torch.randn(2, 3, 8)  # not 2-D
    assert torch.equal(linear(x3, w), F.linear(x3, w))
    wt = torch.randn(8, 16).t()  # non-contiguous weight
    x = torch.randn(2, 8)
    assert torch.equal(linear(x, wt), F.linear(x, wt))
    x64 = torch.randn(2, 8, dtype=torch.float64)
    assert torch.equal(linear(x64, w.double()), F.linear(x64, w.double()))
    monkeypatch.setattr(dense_kernel, "_ext", None)  # a build without a compiler
    assert torch.equal(linear(x, w), F.linear(x, w))


def test_shape_errors_are_torch_errors():
    with pytest.raises(RuntimeError):
        linear(torch.randn(2, 8), torch.randn(16, 9))
