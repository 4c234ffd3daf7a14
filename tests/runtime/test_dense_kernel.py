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


# Every row count the kernel takes, against [N, K] shapes chosen for the register blocking in
# csrc/densekernel.c: N not a multiple of the row block (R = 4, 3, 2 or 1 weight rows) or of
# the 48-row OpenMP work item (7, 13, 50, 97), K not a multiple of the 8-wide vector (1, 9, 17,
# 23, 1001: the scalar tail) and K large enough that M = 7, 8 take the two-pass split (1001,
# 1536: M * K > 6144 floats).
NK = [(1, 1), (7, 9), (13, 17), (50, 23), (97, 64), (49, 576), (11, 1001), (10, 1536)]


def _ref_bf16(x, w, bias):
    """bf16 reference: fp32 accumulation of the bf16 values, then one rounding to bf16."""
    return F.linear(x.float(), w.float(), None if bias is None else bias.float()).to(torch.bfloat16)


@pytest.mark.parametrize("isa", ["auto", "scalar"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n,k", NK)
@pytest.mark.parametrize("m", range(1, MAX_ROWS + 1))
def test_every_row_count_matches_f_linear(m, n, k, dtype, isa):
    """Each M in 1..8 (its own specialised loop), with and without bias, fp32 and bf16."""
    ext = dense_kernel._ext
    ext.set_isa(isa)
    try:
        torch.manual_seed(m * 7919 + n * 31 + k)
        x, w, b = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype), torch.randn(n).to(dtype)
        for bias in (None, b):
            got = linear(x, w, bias)
            assert got.dtype == dtype and got.shape == (m, n)
            if dtype == torch.float32:
                torch.testing.assert_close(got, F.linear(x, w, bias), atol=1e-4 * max(1.0, k ** 0.5),
                                           rtol=1e-5)
            else:
                torch.testing.assert_close(got.float(), _ref_bf16(x, w, bias).float(), atol=1e-2,
                                           rtol=1e-2)
    finally:
        ext.set_isa("auto")


@pytest.mark.parametrize("m", [1, 3, 4, 6, 8])
def test_row_split_over_threads_changes_nothing(m):
    """The weight rows split over OpenMP threads (48-row work items) by torch's thread count:
    1, 2 and 3 threads give the same result, bit for bit (each output is one thread's sum)."""
    torch.manual_seed(m)
    x, w, b = torch.randn(m, 1001), torch.randn(145, 1001), torch.randn(145)
    before = torch.get_num_threads()
    try:
        outs = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            outs.append(linear(x, w, b))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    torch.testing.assert_close(outs[0], F.linear(x, w, b), atol=1e-4 * 1001 ** 0.5, rtol=1e-5)


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
