"""structgen's C small-M matmul (csrc/densekernel.c) vs torch's F.linear (the reference)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from structgen.runtime.cpu import dense
from structgen.runtime.cpu.dense import MAX_ROWS, kernel_available, linear

SHAPES = [
    (1, 37, 19),
    (2, 100, 576),
    (3, 1536, 576),
    (5, 576, 1536),
    (8, 33, 17),
    (1, 7, 1),
    (4, 1, 40),
]


def test_kernel_is_built():
    """setup.py builds the extension on this kind of machine (gcc present): a silent
    fallback to F.linear would hide a broken build."""
    assert kernel_available()


@pytest.mark.parametrize("isa", ["auto", "scalar"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_fp32_matches_f_linear(m, n, k, isa):
    ext = dense._ext
    ext.set_isa(isa)
    try:
        torch.manual_seed(m * 1000 + n + k)
        x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
        for bias in (None, b):
            got = linear(x, w, bias)
            assert got.dtype == torch.float32 and got.shape == (m, n)
            torch.testing.assert_close(
                got, F.linear(x, w, bias), atol=1e-4 * max(1.0, k**0.5), rtol=1e-5
            )
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
    ext = dense._ext
    ext.set_isa(isa)
    try:
        torch.manual_seed(m * 7919 + n * 31 + k)
        x, w, b = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype), torch.randn(n).to(dtype)
        for bias in (None, b):
            got = linear(x, w, bias)
            assert got.dtype == dtype and got.shape == (m, n)
            if dtype == torch.float32:
                torch.testing.assert_close(
                    got, F.linear(x, w, bias), atol=1e-4 * max(1.0, k**0.5), rtol=1e-5
                )
            else:
                torch.testing.assert_close(
                    got.float(), _ref_bf16(x, w, bias).float(), atol=1e-2, rtol=1e-2
                )
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
    torch.testing.assert_close(outs[0], F.linear(x, w, b), atol=1e-4 * 1001**0.5, rtol=1e-5)


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
    monkeypatch.setattr(dense, "_ext", None)  # a build without a compiler
    assert torch.equal(linear(x, w), F.linear(x, w))


def test_shape_errors_are_torch_errors():
    with pytest.raises(RuntimeError):
        linear(torch.randn(2, 8), torch.randn(16, 9))


def _bf16_ulp(t: torch.Tensor) -> torch.Tensor:
    """The spacing of bf16 values at |t| (8 significant bits): 2 ** (floor(log2 |t|) - 7)."""
    mag = t.float().abs().clamp_min(2.0**-100)
    return torch.exp2(torch.floor(torch.log2(mag)) - 7)


@pytest.mark.parametrize("isa", ["auto", "scalar"])
@pytest.mark.parametrize("n,k", [(1, 1), (13, 17), (97, 63), (49, 577), (11, 1001), (10, 1537)])
@pytest.mark.parametrize("m", range(1, MAX_ROWS + 1))
def test_bf16_in_out_rounds_like_torch(m, n, k, isa):
    """bf16 x, W, bias in, bf16 y out of the kernel itself: each output is the fp32 sum plus the
    bias, rounded once to nearest even. Against torch's fp32 result of the same bf16 values
    rounded by ``.to(torch.bfloat16)``: within one bf16 ulp everywhere (summation order can move
    a sum across a rounding boundary) and mostly bit-equal (truncation instead of rounding to
    nearest would miss about half)."""
    ext = dense._ext
    ext.set_isa(isa)
    try:
        torch.manual_seed(m * 131 + n * 7 + k)
        x = torch.randn(m, k).to(torch.bfloat16)
        w = torch.randn(n, k).to(torch.bfloat16)
        b = (torch.randn(n) * 4).to(torch.bfloat16)
        for bias in (None, b):
            got = linear(x, w, bias)
            assert got.dtype == torch.bfloat16 and got.shape == (m, n) and got.is_contiguous()
            ref = _ref_bf16(x, w, bias)
            diff = (got.float() - ref.float()).abs()
            assert bool((diff <= _bf16_ulp(ref)).all()), float((diff / _bf16_ulp(ref)).max())
            exact = (got == ref).float().mean().item()
            assert exact >= (0.9 if m * n >= 40 else 0.5), exact
    finally:
        ext.set_isa("auto")


def test_bf16_rounding_is_nearest_even():
    """Sums that land exactly between two bf16 values (and just beside them) round as torch's
    ``.to(torch.bfloat16)``: to nearest, ties to even. Each output is ``a + r`` with K = 2 and
    both terms bf16 values whose fp32 sum is exact, so summation order plays no part."""
    u = 2.0**-8  # half the bf16 spacing at 1.0
    pairs = [
        (1.0, u),
        (1.0, 3 * u),
        (1.0, 1.5 * u),
        (1.0, 0.5 * u),
        (-1.0, -u),
        (-1.0, -3 * u),
        (3.0, 2.0**-6),
        (3.0, 3 * 2.0**-6),
        (1.0, 0.0),
        (-2.0, 2.0**-9),
    ]
    x = torch.tensor([[1.0, 1.0]], dtype=torch.bfloat16)
    w = torch.tensor(pairs, dtype=torch.float32).to(torch.bfloat16)
    assert torch.equal(w.float(), torch.tensor(pairs)), "test setup: a term is not a bf16 value"
    want = torch.tensor([[a + r for a, r in pairs]], dtype=torch.float32).to(torch.bfloat16)
    assert not torch.equal(want.float(), torch.tensor([[a + r for a, r in pairs]])), (
        "no rounding tested"
    )
    for isa in ("auto", "scalar"):
        dense._ext.set_isa(isa)
        try:
            got = linear(x, w)
        finally:
            dense._ext.set_isa("auto")
        assert torch.equal(got, want), (isa, got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 2, 5, 8])
def test_strided_rows_of_x_are_read_in_place(m, dtype):
    """x with unit stride along K but a longer row stride (a column slice of a wider tensor, as
    the q/k/v columns of a fused projection) gives the same result as its contiguous copy."""
    torch.manual_seed(m)
    wide = torch.randn(m, 700).to(dtype)
    x = wide[:, 50:627]  # [m, 577], row stride 700
    assert not x.is_contiguous() or m == 1
    w, b = torch.randn(33, 577).to(dtype), torch.randn(33).to(dtype)
    assert torch.equal(linear(x, w, b), linear(x.contiguous(), w, b))


def test_bias_of_another_dtype_takes_f_linear():
    """A bias whose dtype differs from x's is not read as x's dtype: F.linear decides (and
    raises).
    """
    x, w = torch.randn(2, 8).to(torch.bfloat16), torch.randn(4, 8).to(torch.bfloat16)
    bias = torch.randn(4)  # fp32
    try:
        want = F.linear(x, w, bias)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            linear(x, w, bias)
    else:
        assert torch.equal(linear(x, w, bias), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_empty_shapes_take_f_linear(dtype):
    """K = 0 or N = 0 (which the kernel does not take) give what F.linear gives."""
    for x, w in ((torch.randn(2, 0), torch.randn(5, 0)), (torch.randn(2, 8), torch.randn(0, 8))):
        x, w = x.to(dtype), w.to(dtype)
        b = torch.randn(w.shape[0]).to(dtype)
        assert torch.equal(linear(x, w, b), F.linear(x, w, b))
