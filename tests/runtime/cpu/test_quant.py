"""The C quantized-matmul kernel (csrc/qkernel.c via structgen.runtime.cpu.quant)
against float64 references built from the dequantized weights, and the torch fallback."""

from __future__ import annotations

import os

import pytest
import torch

from structgen.errors import KernelArgumentError
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.quantization.formats import (
    dequantize_int4,
    dequantize_int8,
    int4_scale_tiles,
    pack_int4_rows,
    quantize_int4,
    quantize_int8,
    unpack_int4_rows,
)
from structgen.runtime.quantization.linear import QuantEmbedding, QuantLinear, _set_activation_dtype

needs_kernel = pytest.mark.skipif(
    cpu_quant._lib is None or os.environ.get("STRUCTGEN_QKERNEL") == "0",
    reason="C extension not built or disabled",
)


def _ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.double() @ w.double().T).float()


def _close(
    got: torch.Tensor, ref: torch.Tensor, tol: float, x: torch.Tensor, w: torch.Tensor
) -> None:
    """Max error relative to max ``|x| @ |w|.T`` (the scale of float32 summation-order error)."""
    err = float((got - ref).abs().max() / _ref(x.abs(), w.abs()).max().clamp_min(1e-30))
    assert err < tol, f"max error {err:.3g} (relative to max |x| @ |w|.T) exceeds {tol}"


def _q8_emulated(x: torch.Tensor) -> torch.Tensor:
    """llama.cpp's Q8_0 activation rounding, as the kernel does it: per 32, q = rint(x *
    127/amax).
    """
    m, k = x.shape
    xb = x.reshape(m, k // 32, 32)
    amax = xb.abs().amax(-1, keepdim=True)
    inv = torch.where(
        amax > 0, torch.full_like(amax, 127.0) / amax, torch.zeros_like(amax)
    )  # a true division, as C
    return (torch.round(xb * inv) * (amax / 127.0)).reshape(m, k)


def _int4_q8_ref(
    x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, mn: torch.Tensor
) -> torch.Tensor:
    """What the int4 Q8 path computes: centred codes ``scale * (q - 8)`` against the Q8-rounded x,
    plus ``(min + 8 * scale)`` against the exact x (see csrc/qkernel.c, int4_mm)."""
    centred = dequantize_int4(q, s, torch.zeros_like(mn)) - dequantize_int4(
        torch.full_like(q, 8), s, torch.zeros_like(mn)
    )
    offset = dequantize_int4(torch.full_like(q, 8), s, mn)  # 8 * scale + min, per group
    return (_q8_emulated(x).double() @ centred.double().T + x.double() @ offset.double().T).float()


@pytest.fixture(params=["avx2", "scalar"])
def isa(request):
    """Run a test on the SIMD path and on the portable scalar one."""
    if cpu_quant._lib is None:
        pytest.skip("C extension not built")
    got = cpu_quant._lib.set_isa(request.param == "avx2")
    if got != request.param:
        cpu_quant._lib.set_isa(True)
        pytest.skip(f"{request.param} not supported here")
    yield request.param
    cpu_quant._lib.set_isa(True)


@needs_kernel
@pytest.mark.parametrize("n,k,group", [(37, 96, 32), (1, 160, 32), (48, 192, 64), (33, 256, 128)])
@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 11])
def test_int4_kernel_matches_dequantized(isa, n, k, group, m):
    g = torch.Generator().manual_seed(n * k + m)
    w, x = torch.randn(n, k, generator=g), torch.randn(m, k, generator=g)
    q, s, mn = quantize_int4(w, group)
    packed = pack_int4_rows(q)
    assert torch.equal(unpack_int4_rows(packed), q)  # lossless repack
    wd = dequantize_int4(q, s, mn)
    st, mt = s.t().contiguous(), mn.t().contiguous()
    _close(cpu_quant.int4_mm(x, packed, st, mt, group), _ref(x, wd), 1e-6, x, wd)
    # Q8 activations: exact integer dots on the emulated rounding of x, so float32-close to that
    _close(
        cpu_quant.int4_mm(x, packed, st, mt, group, q8=True), _int4_q8_ref(x, q, s, mn), 1e-6, x, wd
    )
    if n >= 32:  # the Q8 rounding's own error against exact x (over enough outputs to be stable)
        exact = _ref(x, wd)
        assert (
            float(
                (cpu_quant.int4_mm(x, packed, st, mt, group, q8=True) - exact).norm() / exact.norm()
            )
            < 1.5e-2
        )


def _fp32_only(g: torch.Generator, n: int, groups: int, scale: float) -> torch.Tensor:
    """``[N, G]`` float32 values fp16 cannot hold (GGUF Q4_K's ``d * sc``: an fp16 times a
    6-bit integer), so a kernel reading them as fp16 would be off."""
    d = (torch.rand(n, groups, generator=g) * scale + scale / 2).half().float()
    return d * torch.randint(33, 64, (n, groups), generator=g).float()


@needs_kernel
@pytest.mark.parametrize("n,k", [(37, 256), (40, 512)])
def test_int4_kernel_float32_scales(isa, n, k):
    """Float32 scales and mins (GGUF Q4_K): the exact path against the float64 reference of the
    dequantized weight, the Q8 path against its emulation, each row's Q8 result the same float
    for M = 1, 3, 8 and 20, and the C dequantizer equal to the formula bit for bit."""
    g = torch.Generator().manual_seed(n + k)
    q = torch.randint(0, 16, (n, k), generator=g, dtype=torch.uint8)
    st, mt = _fp32_only(g, n, k // 32, 1e-3), -_fp32_only(g, n, k // 32, 1e-3)
    assert not torch.equal(st.half().float(), st)  # not representable in the fp16 layout
    packed, s, mn = pack_int4_rows(q), st.t(), mt.t()
    wd = dequantize_int4(q, s, mn)
    assert torch.equal(cpu_quant.int4_dequant_rows(packed, st, mt, 32, 0, n), wd)
    x = torch.randn(20, k, generator=g)
    _close(cpu_quant.int4_mm(x, packed, st, mt, 32), _ref(x, wd), 1e-6, x, wd)
    q8 = cpu_quant.int4_mm(x, packed, st, mt, 32, q8=True)
    _close(q8, _int4_q8_ref(x, q, s, mn), 1e-6, x, wd)
    exact = _ref(x, wd)
    assert float((q8 - exact).norm() / exact.norm()) < 1.5e-2  # the Q8 rounding's own error
    for m in (1, 3, 8):
        assert torch.equal(cpu_quant.int4_mm(x[:m], packed, st, mt, 32, q8=True), q8[:m])
    lin = QuantLinear.from_int4_rows(packed, st, mt)
    assert lin.scales.dtype == torch.float32 and torch.equal(lin.dequantized_weight(), wd)
    with pytest.raises(KernelArgumentError):  # scales and mins of one dtype
        cpu_quant.int4_mm(x, packed, st, mt.half(), 32)


@needs_kernel
@pytest.mark.parametrize(
    "n,k,group,scale_dtype",
    [
        (37, 72, None, torch.float32),
        (5, 96, 32, torch.float16),
        (64, 160, 32, torch.float16),
        (3, 256, None, torch.float16),
    ],
)
@pytest.mark.parametrize("m", [1, 4, 8, 9])
def test_int8_kernel_matches_dequantized(isa, n, k, group, scale_dtype, m):
    g = torch.Generator().manual_seed(n + k + m)
    w, x = torch.randn(n, k, generator=g), torch.randn(m, k, generator=g)
    q, s = quantize_int8(w, group)
    s = s.to(scale_dtype)
    wd = dequantize_int8(q, s)
    _close(cpu_quant.int8_mm(x, q, s), _ref(x, wd), 1e-6, x, wd)
    want_q8 = _ref(_q8_emulated(x), wd) if k % 32 == 0 and (group or k) % 32 == 0 else _ref(x, wd)
    _close(cpu_quant.int8_mm(x, q, s, q8=True), want_q8, 1e-6, x, wd)  # K % 32 != 0: exact path


@needs_kernel
@pytest.mark.parametrize("m", [9, 40])
def test_prefill_tiles_match(m, monkeypatch):
    """Above MAX_M rows the weight is dequantized in C a tile at a time for F.linear."""
    monkeypatch.setattr(cpu_quant, "_TILE_ELEMS", 96 * 7)  # several tiles, a ragged last one
    g = torch.Generator().manual_seed(m)
    w, x = torch.randn(50, 96, generator=g), torch.randn(m, 96, generator=g)
    q, s, mn = quantize_int4(w, 32)
    wd = dequantize_int4(q, s, mn)
    _close(
        cpu_quant.int4_linear(x, pack_int4_rows(q), s.t().contiguous(), mn.t().contiguous(), 32),
        _ref(x, wd),
        1e-6,
        x,
        wd,
    )
    q8, s8 = quantize_int8(w, 32)
    w8 = dequantize_int8(q8, s8.half())
    _close(cpu_quant.int8_linear(x, q8, s8.half()), _ref(x, w8), 1e-6, x, w8)


@needs_kernel
def test_threads_give_identical_rows():
    """Rows are split over threads, each row computed whole: any thread count, same bits."""
    g = torch.Generator().manual_seed(3)
    w, x = torch.randn(1000, 576, generator=g), torch.randn(2, 576, generator=g)
    q, s, mn = quantize_int4(w, 64)
    args = (pack_int4_rows(q), s.t().contiguous(), mn.t().contiguous(), 64)
    old = cpu_quant._THREADS
    try:
        cpu_quant.set_threads(1)
        one = cpu_quant.int4_mm(x, *args, q8=True)
        cpu_quant.set_threads(2)
        two = cpu_quant.int4_mm(x, *args, q8=True)
    finally:
        cpu_quant.set_threads(old)
    assert torch.equal(one, two)


@needs_kernel
def test_bad_group_is_rejected():
    x, q = torch.zeros(1, 64), torch.zeros(4, 32, dtype=torch.uint8)
    s = torch.zeros(4, 4, dtype=torch.float16)
    with pytest.raises(ValueError, match="multiple of 32"):
        cpu_quant.int4_mm(x, q, s, s, 16)


@needs_kernel
def test_quant_modules_use_kernel_layouts():
    g = torch.Generator().manual_seed(5)
    w, b, x = (
        torch.randn(48, 192, generator=g),
        torch.randn(48, generator=g),
        torch.randn(3, 192, generator=g),
    )
    lin = _set_activation_dtype(QuantLinear.quantize(w, b, "int4", 64), torch.float32)
    assert lin.int4_layout == "tiles" and lin.scales.shape == (48, 3)
    assert lin.qweight.shape == (48, 96)  # 6 tiles of 8 rows
    wd = lin.dequantized_weight()
    _close(lin(x), _ref(x, wd) + b, 1e-6, x, wd)
    fast = _set_activation_dtype(lin, torch.bfloat16)(x)  # default: Q8 activations
    q, s, mn = quantize_int4(w, 64)
    _close(fast, _int4_q8_ref(x, q, s, mn) + b, 1e-6, x, wd)
    lin._untile()  # the Triton kernel's "rows" layout (its first call does this), same weight
    assert lin.int4_layout == "rows" and torch.equal(lin.dequantized_weight(), wd)
    _close(lin(x), _int4_q8_ref(x, q, s, mn) + b, 1e-6, x, wd)
    assert (
        QuantLinear.quantize(w, None, "int4", 64)(x.bfloat16()).dtype == torch.bfloat16
    )  # a bf16 model's
    q8, s8 = quantize_int8(torch.randn(300, 192, generator=g), 32)
    emb = _set_activation_dtype(QuantEmbedding(q8, s8.half(), torch.float32), torch.float32)
    assert emb.qweight.dim() == 2  # Q8_0 kept row-major for the kernel
    we = emb.dequantized_weight()
    _close(emb.as_linear(x), _ref(x, we), 1e-6, x, we)
    torch.testing.assert_close(emb(torch.tensor([0, 299])), emb.dequantized_weight()[[0, 299]])


def test_fallback_without_extension(monkeypatch):
    """No compiled kernel: torch's packed layout and kernels, one RuntimeWarning, same results."""
    monkeypatch.setattr(cpu_quant, "_lib", None)
    monkeypatch.setattr(cpu_quant, "_warned", False)
    g = torch.Generator().manual_seed(7)
    w, x = torch.randn(48, 192, generator=g), torch.randn(2, 192, generator=g)
    with pytest.warns(RuntimeWarning, match="not built"):
        lin = _set_activation_dtype(QuantLinear.quantize(w, None, "int4", 64), torch.float32)
    assert lin.int4_layout == "torch" and lin.scales.shape == (3, 48)
    q, s, mn = quantize_int4(w, 64)
    wd = dequantize_int4(q, s, mn)
    _close(lin(x), _ref(x, wd), 1e-6, x, wd)
    assert lin._cached_scale_zeros(torch.float32) is lin._cached_scale_zeros(
        torch.float32
    )  # built once
    q8, s8 = quantize_int8(w, 32)
    lin8 = _set_activation_dtype(QuantLinear.from_int8(q8, s8.half()), torch.float32)
    assert lin8.qweight.dim() == 3  # group-major for torch's per-group int8 kernel
    w8 = dequantize_int8(q8, s8.half())
    _close(lin8(x), _ref(x, w8), 1e-6, x, w8)


@pytest.mark.slow
@needs_kernel
def test_smollm2_gguf_q8_activations_teacher_forced_agreement():
    """The default (Q8-activation) kernel path against the exact float32 one on SmolLM2's GGUF file:
    decode steps at M = 1, teacher-forced on the exact path's greedy text, 10 prompts x 16
    positions.
    Measured: 152/160 (95%) argmax agreement (free-running greedy text drifts: 3 of 10 32-token
    continuations identical, vs 7 of 10 for torch's bf16-activation kernels; see RESULTS.md)."""
    from structgen.runtime.loader import load_model
    from structgen.runtime.models.testing import PagedSequences
    from tests.conftest import have_smollm2
    from tests.runtime.test_quantization import SMOL_PROMPTS

    if not have_smollm2():
        pytest.skip("SmolLM2 GGUF not installed")
    loaded = load_model(None, quantization="gguf")
    model, tok = loaded.model, loaded.tokenizer
    agree = total = 0
    for text in SMOL_PROMPTS:
        ids = tok(text).input_ids
        _set_activation_dtype(model, torch.float32)
        ref = PagedSequences(model, num_pages=64, page_size=16).greedy({0: ids}, 16)[0]
        _set_activation_dtype(model, torch.bfloat16)  # the default: Q8 activations in the kernel
        seq = PagedSequences(model, num_pages=64, page_size=16)
        logits = seq.step({0: ids})[0]
        for t in ref:
            agree += int(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()) == t)
            total += 1
            logits = seq.step({0: [t]})[0]
    assert total == 160
    assert agree / total >= 0.90, (
        f"Q8-activation argmax agreement {agree}/{total}"
    )  # as int8 weights vs fp32


@needs_kernel
@pytest.mark.parametrize("kind", ["int4", "int8"])
def test_q8_rows_do_not_depend_on_the_batch(isa, kind):
    """With int8 activations each row's output is the same float alone and inside any batch of
    up to ``MAX_M`` (8) rows (the kernel's one accumulation order per row); larger batches take
    the dequantized-tile GEMM."""
    g = torch.Generator().manual_seed(3)
    w = torch.randn(48, 192, generator=g)
    x = torch.randn(64, 192, generator=g)
    lin = _set_activation_dtype(QuantLinear.quantize(w, None, kind, 32), torch.bfloat16)
    eight = torch.cat([lin(x[i : i + 8]) for i in range(0, 64, 8)])
    alone = torch.cat([lin(x[i : i + 1]) for i in range(64)])
    cuts = [0, 3, 11, 16, 18, 25, 33, 40, 47, 52, 59, 64]  # pieces of 2 to 8 rows
    ragged = torch.cat([lin(x[a:b]) for a, b in zip(cuts, cuts[1:])])
    assert torch.equal(eight, alone) and torch.equal(ragged, alone)
    exact = x @ lin.dequantized_weight().T
    torch.testing.assert_close(
        alone, exact, rtol=0.05, atol=0.3
    )  # Q8 rounding, outputs ~N(0, 14^2)


@needs_kernel
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("n,k,group", [(37, 576, 32), (21, 256, 64), (8, 96, 32)])
def test_int4_q8_scalar_path_equals_avx2_bit_for_bit(scale_dtype, n, k, group):
    """The int4 Q8 path computes one float per (activation row, weight row) on both ISAs: the
    scalar fallback repeats the AVX2 lanes' integer dots, fused multiply-adds, accumulator and
    lane order and the tile tail's order (csrc/qkernel_rows.h), for fp16 and fp32 (Q4_K) tables,
    ragged last tiles and every M."""
    if cpu_quant._lib.set_isa(True) != "avx2":
        pytest.skip("no AVX2 here")
    g = torch.Generator().manual_seed(n + k + group)
    q = torch.randint(0, 16, (n, k), generator=g, dtype=torch.uint8)
    st = (torch.rand(n, k // group, generator=g) * 0.02 + 0.001).to(scale_dtype)
    mt = (-torch.rand(n, k // group, generator=g) * 0.1).to(scale_dtype)
    x = torch.randn(20, k, generator=g) * 3
    packed = pack_int4_rows(q)
    try:
        for m in (1, 3, 8, 20):
            cpu_quant._lib.set_isa(True)
            simd = cpu_quant.int4_mm(x[:m], packed, st, mt, group, q8=True)
            cpu_quant._lib.set_isa(False)
            scalar = cpu_quant.int4_mm(x[:m], packed, st, mt, group, q8=True)
            assert torch.equal(simd, scalar), f"M={m}: max diff {(simd - scalar).abs().max()}"
    finally:
        cpu_quant._lib.set_isa(True)
    wd = dequantize_int4(q, st.t().float(), mt.t().float())
    _close(simd, _int4_q8_ref(x, q, st.t().float(), mt.t().float()), 1e-6, x, wd)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("n", [8, 21])
def test_int4_scale_tiles_any_stride(dtype, n):
    """The table equals the per-element definition for both dtypes, N a multiple of 8 or not,
    and transposed (non-contiguous) scales and mins."""
    g = torch.Generator().manual_seed(n)
    s = torch.rand(5, n, generator=g).to(dtype).t()
    mn = -torch.rand(5, n, generator=g).to(dtype).t()
    tiles = int4_scale_tiles(s, mn)
    nt = (n + 7) // 8
    assert tiles.shape == (nt, 5, 2, 8) and tiles.dtype == dtype and tiles.is_contiguous()
    for row in range(nt * 8):
        t, r = divmod(row, 8)
        want_mn = mn[row] if row < n else torch.zeros(5, dtype=dtype)
        want_s = s[row] if row < n else torch.zeros(5, dtype=dtype)
        assert torch.equal(tiles[t, :, 0, r], want_mn) and torch.equal(tiles[t, :, 1, r], want_s)


def test_int4_scale_tiles_layout():
    """``tiles[t, g, 0, r] = mins[8t + r, g]``, ``tiles[t, g, 1, r] = scales[8t + r, g]``, zero
    past N; a QuantLinear rebuilds its table when its scales change in place."""
    g = torch.Generator().manual_seed(5)
    s, mn = torch.rand(19, 6, generator=g).half(), -torch.rand(19, 6, generator=g).half()
    tiles = int4_scale_tiles(s, mn)
    assert tiles.shape == (3, 6, 2, 8) and tiles.dtype == torch.float16 and tiles.is_contiguous()
    for row in range(24):
        t, r = divmod(row, 8)
        want_mn = mn[row] if row < 19 else torch.zeros(6, dtype=torch.float16)
        want_s = s[row] if row < 19 else torch.zeros(6, dtype=torch.float16)
        assert torch.equal(tiles[t, :, 0, r], want_mn) and torch.equal(tiles[t, :, 1, r], want_s)
    with pytest.raises(ValueError, match="int4_scale_tiles"):
        int4_scale_tiles(s, mn.float())
    if not cpu_quant.available():
        return
    packed = pack_int4_rows(torch.zeros(19, 192, dtype=torch.uint8))
    lin = QuantLinear.from_int4_rows(packed, s.clone(), mn.clone())
    first = lin.scale_tiles()
    assert lin.scale_tiles() is first and torch.equal(first, tiles)
    lin.load_state_dict({**lin.state_dict(), "scales": s * 2})  # copied in place
    assert torch.equal(lin.scale_tiles(), int4_scale_tiles(s * 2, mn))


@needs_kernel
def test_int4_scale_tiles_follow_replaced_buffers():
    """A replaced ``scales`` / ``mins`` buffer (a new tensor, which may sit at a freed one's address
    with the same version) gets a new tile table, and the matmul reads it: the table is keyed by
    the tensors themselves, not by their addresses."""
    g = torch.Generator().manual_seed(6)
    n, k = 19, 64
    q = torch.randint(0, 16, (n, k), generator=g, dtype=torch.uint8)
    s, mn = torch.rand(n, 2, generator=g).half(), -torch.rand(n, 2, generator=g).half()
    lin = _set_activation_dtype(
        QuantLinear.from_int4_rows(pack_int4_rows(q), s.clone(), mn.clone()), torch.float32
    )
    x = torch.randn(3, k, generator=g)
    for step in range(2, 7):
        lin(x)  # a table is made for the current buffers
        for name, value in (("scales", s * step), ("mins", mn * step)):
            lin._buffers[name] = None  # the old buffer is freed ...
            lin._buffers[name] = torch.empty_like(value).copy_(value)  # ... a new one made
        assert torch.equal(lin.scale_tiles(), int4_scale_tiles(lin.scales, lin.mins))
        wd = dequantize_int4(q, lin.scales.t(), lin.mins.t())
        _close(lin(x), _ref(x, wd), 1e-6, x, wd)


@needs_kernel
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("n,k,group", [(37, 576, 32), (21, 192, 64), (19, 96, None), (9, 32, 32)])
def test_int8_q8_every_isa_path_agrees(scale_dtype, n, k, group):
    """The int8 Q8 path computes one float per (activation row, weight row) on every path:
    AVX-VNNI (vpdpbusd on offset activations), AVX2 (maddubs / madd) and the scalar fallback agree
    bit for bit for M = 1..9, 17 and 64 (row groups of 8, ragged ones, several groups), on 1 and
    2 threads, with K / 32 blocks not a multiple of 4 (96, 192), including the int16 sums' worst
    case (weights -128 against x quantized to +-127: 2 * 128 * 127 = 32512, no saturation); and
    the result is float32-close to the float64 product of the Q8-rounded x and the weight."""
    g = torch.Generator().manual_seed(n + k)
    q, s = quantize_int8(torch.randn(n, k, generator=g), group)
    s = s.to(scale_dtype)
    q_min = torch.full((n, k), -128, dtype=torch.int8)
    x = torch.randn(64, k, generator=g) * 2
    x[3, :32] = 0.0  # a zero block: xd = 0
    x_max = torch.ones(9, k)
    x_max[1::2] = -1.0  # quantizes to -127: the most negative int16 pair sums
    old = cpu_quant._THREADS
    rows = list(range(1, 10)) + [17, 64]

    def run():
        out = [cpu_quant.int8_mm(x[:r], q, s, q8=True) for r in rows]
        out.append(cpu_quant.int8_mm(x_max, q_min, s, q8=True))
        cpu_quant.set_threads(2)
        try:
            out.append(cpu_quant.int8_mm(x, q, s, q8=True))
        finally:
            cpu_quant.set_threads(old)
        return out

    paths = isa_paths(run)
    ref = paths.pop("scalar")
    for name, got in paths.items():
        assert all(torch.equal(a, b) for a, b in zip(got, ref)), name
    for r, y in zip(rows, ref):  # each row alone is the same float as inside any batch
        assert torch.equal(y, ref[-1][:r])
    wd = dequantize_int8(q, s)
    _close(ref[-1], _ref(_q8_emulated(x), wd), 1e-6, x, wd)
    w_min = dequantize_int8(q_min, s)
    _close(ref[-2], _ref(_q8_emulated(x_max), w_min), 1e-6, x_max, w_min)
    assert ref[-2].abs().min() > 0  # the worst case is a real one: -128 * 127 * 32 per block


def isa_paths(run) -> dict:
    """``run()`` on each quantized-kernel ISA path this CPU has: ``"vnni"`` (AVX-VNNI),
    ``"avx2"`` and ``"scalar"``, in that order; AVX2 and VNNI are turned back on after (and AMX,
    which ``set_isa`` turns off)."""
    lib = cpu_quant._lib
    paths = {}
    try:
        if lib.set_isa(True) == "avx2":
            if lib.set_vnni(True):
                paths["vnni"] = run()
            lib.set_vnni(False)
            paths["avx2"] = run()
        lib.set_isa(False)
        assert not lib.set_vnni(True)  # VNNI only with AVX2 in use
        paths["scalar"] = run()
    finally:
        lib.set_isa(True)
        lib.set_vnni(True)
        lib.set_amx(True)
    return paths
