"""The int4 tile kernel (csrc/qkernel_tiles.h via ``cpu_quant.int4t_mm``): 8 output columns per
vector, Q8 activations. Against the float64 reference of its arithmetic (centred codes times the
Q8-rounded x, plus the zero point times the exact x), row results independent of the batch and
of the thread count, scalar equal to AVX2 bit for bit, and the layout's repack lossless."""

from __future__ import annotations

import pytest
import torch

from structgen.errors import KernelArgumentError
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.quantization.formats import (
    dequantize_int4,
    int4_scale_tiles,
    pack_int4_rows,
    pack_int4_tiles,
    quantize_int4,
    unpack_int4_tiles,
)
from tests.runtime.cpu.test_quant import _close, _int4_q8_ref, _ref, isa, isa_paths, needs_kernel

__all__ = ["isa"]  # the fixture, imported for the tests below


def _weight(n: int, k: int, group: int, seed: int, fp32: bool = False):
    """``(q [N, K], scales [G, N], mins [G, N], rows [N, K/2], tiles [8 ceil(N/8), K/2])``."""
    g = torch.Generator().manual_seed(seed)
    q, s, mn = quantize_int4(torch.randn(n, k, generator=g), group)
    if fp32:  # scales fp16 cannot hold (GGUF Q4_K's d * sc)
        s = s.float() * (1 + torch.rand(s.shape, generator=g) / 7)
        mn = mn.float() * (1 + torch.rand(mn.shape, generator=g) / 7)
    rows = pack_int4_rows(q)
    return q, s, mn, rows, pack_int4_tiles(rows)


@pytest.mark.parametrize("n", [1, 8, 19, 37, 64])
def test_tile_repack_is_lossless(n):
    q = torch.randint(0, 16, (n, 96), generator=torch.Generator().manual_seed(n), dtype=torch.uint8)
    rows = pack_int4_rows(q)
    tiles = pack_int4_tiles(rows)
    assert tiles.shape == (8 * ((n + 7) // 8), 48)
    assert torch.equal(unpack_int4_tiles(tiles, n), rows)
    # tile t, block b, quad j, column c, byte i = byte 4 j + i of block b of row 8 t + c
    padded = torch.cat((rows, rows.new_zeros(tiles.shape[0] - n, 48)))  # zero codes past N
    t5 = tiles.reshape(-1, 3, 4, 8, 4)
    for t, b, j, c, i in [(0, 0, 0, 0, 0), (0, 2, 3, 7, 1), ((n - 1) // 8, 1, 2, (n - 1) % 8, 3)]:
        assert t5[t, b, j, c, i] == padded[8 * t + c, 16 * b + 4 * j + i]
    with pytest.raises(ValueError, match="pack_int4_tiles"):
        pack_int4_tiles(rows[:, :40])
    with pytest.raises(ValueError, match="unpack_int4_tiles"):
        unpack_int4_tiles(tiles, n + 8)


@needs_kernel
@pytest.mark.parametrize(
    "n,k,group,fp32",
    [(37, 96, 32, False), (1, 160, 32, False), (48, 192, 64, False), (33, 256, 128, True)],
)
def test_tile_kernel_matches_reference(isa, n, k, group, fp32):
    q, s, mn, _, tiles = _weight(n, k, group, n * k, fp32)
    x = torch.randn(11, k, generator=torch.Generator().manual_seed(k))
    wd = dequantize_int4(q, s, mn)
    st, mt = s.t().contiguous(), mn.t().contiguous()
    exact = cpu_quant.int4t_mm(x, tiles, st, mt, group)  # float32 activations
    _close(exact, _ref(x, wd), 1e-6, x, wd)
    _close(cpu_quant.int4t_linear(x, tiles, st, mt, group), _ref(x, wd), 1e-6, x, wd)  # BLAS
    assert torch.equal(cpu_quant.int4t_dequant_rows(tiles, st, mt, group, 0, n), wd.float())
    got = cpu_quant.int4t_mm(x, tiles, st, mt, group, True)
    assert got.shape == (11, n) and got.dtype == torch.float32
    assert torch.equal(cpu_quant.int4t_linear(x, tiles, st, mt, group, True), got)
    _close(got, _int4_q8_ref(x, q, s, mn), 1e-6, x, wd)
    if n >= 32:  # the Q8 rounding's own error against exact x
        exact = _ref(x, wd)
        assert float((got - exact).norm() / exact.norm()) < 1.5e-2


@needs_kernel
def test_tile_kernel_rows_independent_of_batch_and_threads():
    """Row m's float is the same for M = 1..9, 17 and 64 (every group size of the kernel's 8-row
    blocking and a ragged last group) and for 1 or 2 threads."""
    n, k, group = 83, 192, 32
    q, s, mn, _, tiles = _weight(n, k, group, 7)
    st, mt = s.t().contiguous(), mn.t().contiguous()
    x = torch.randn(64, k, generator=torch.Generator().manual_seed(3)) * 3
    cpu_quant.set_threads(1)
    try:
        full = cpu_quant.int4t_mm(x, tiles, st, mt, group, True)
        for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 17):
            assert torch.equal(cpu_quant.int4t_mm(x[-m:], tiles, st, mt, group, True), full[-m:])
        cpu_quant.set_threads(2)
        assert torch.equal(cpu_quant.int4t_mm(x, tiles, st, mt, group, True), full)
    finally:
        cpu_quant.set_threads(None)


@needs_kernel
def test_tile_kernel_scalar_equals_avx2():
    """Q8 and exact float32 paths, bit for bit (fused multiply-adds in the same order)."""
    if cpu_quant._lib.set_isa(True) != "avx2":
        pytest.skip("no AVX2 here")
    n, k, group = 45, 320, 64
    q, s, mn, _, tiles = _weight(n, k, group, 11)
    st, mt = s.t().contiguous(), mn.t().contiguous()
    tab = int4_scale_tiles(st, mt)
    x = torch.randn(13, k, generator=torch.Generator().manual_seed(5))
    simd = [
        cpu_quant.int4t_mm(x[:r], tiles, st, mt, group, q8, tab)
        for q8 in (True, False)
        for r in (3, 13)
    ]
    try:
        cpu_quant._lib.set_isa(False)
        scalar = [
            cpu_quant.int4t_mm(x[:r], tiles, st, mt, group, q8, tab)
            for q8 in (True, False)
            for r in (3, 13)
        ]
    finally:
        cpu_quant._lib.set_isa(True)
    assert all(torch.equal(a, b) for a, b in zip(simd, scalar))


@needs_kernel
def test_tile_kernel_every_isa_path_agrees():
    """Q8 path: AVX-VNNI (vpdpbusd, int32 sums), AVX2 (maddubs, int16 sums) and scalar, bit for
    bit, for every row count of a row group (1..8) and past it, including the int16 sums' worst
    case (all codes 15 against x quantized to +-127: 8 * 2 * 15 * 127 = 30480, no saturation)."""
    n, k, group = 45, 320, 64
    q, s, mn, _, tiles = _weight(n, k, group, 11)
    q_max = torch.full((n, k), 15, dtype=torch.uint8)
    tiles_max = pack_int4_tiles(pack_int4_rows(q_max))
    st, mt = s.t().contiguous(), mn.t().contiguous()
    tab = int4_scale_tiles(st, mt)
    x = torch.randn(17, k, generator=torch.Generator().manual_seed(5))
    x_max = torch.ones(9, k)
    x_max[1::2] = -1.0  # quantizes to -127: maddubs' most negative sum

    def run():
        out = [cpu_quant.int4t_mm(x[:r], tiles, st, mt, group, True, tab) for r in range(1, 18)]
        return out + [cpu_quant.int4t_mm(x_max, tiles_max, st, mt, group, True, tab)]

    paths = isa_paths(run)
    ref = paths.pop("scalar")
    for name, got in paths.items():
        assert all(torch.equal(a, b) for a, b in zip(got, ref)), name
    # the worst case is a real one: its dots are 15 * 127 * 32 per block, far from zero
    assert ref[-1].abs().min() > 0


@needs_kernel
@pytest.mark.parametrize(
    "n,k,group",
    [
        (45, 320, 64),
        (83, 192, 32),
        (17, 96, 32),
        (576, 1536, 32),
        (200, 576, 32),
        (40, 32, 32),
        (24, 64, 32),
        (40, 160, 32),
        (33, 448, 64),
    ],
)
def test_tile_kernel_amx_equals_avx2(n, k, group, monkeypatch):
    """The AMX path (TDPBSSD block dots, from 9 rows on) gives the AVX2 / VNNI path's floats bit
    for bit: row groups of 32 with a ragged last one, 4-tile column groups with missing tiles
    (N = 17, 45, 83, 200 are not multiples of 32), the column ranges of 2 threads, which start
    on any multiple of 8, and block counts K / 32 of 1, 2, 5 and 14 around the kernel's
    two-block pipeline and its four-step loop (1 and 2 groups of blocks per scale)."""
    lib = cpu_quant._lib
    if lib.set_isa(True) != "avx2" or not lib.set_amx(True):
        lib.set_amx(True)
        pytest.skip("no AMX-INT8 (or the kernel refused the tile state) here")
    q, s, mn, _, tiles = _weight(n, k, group, n + k)
    st, mt = s.t().contiguous(), mn.t().contiguous()
    tab = int4_scale_tiles(st, mt)
    x = torch.randn(100, k, generator=torch.Generator().manual_seed(k)) * 2
    try:
        for threads in (1, 2):
            cpu_quant.set_threads(threads)
            for m in (9, 15, 16, 17, 33, 64, 100):
                lib.set_amx(True)
                amx = cpu_quant.int4t_mm(x[:m], tiles, st, mt, group, True, tab)
                lib.set_amx(False)
                ref = cpu_quant.int4t_mm(x[:m], tiles, st, mt, group, True, tab)
                assert torch.equal(amx, ref), (threads, m)
        # and the rows of a 100-row call are those of each row alone (the 1-row path)
        lib.set_amx(True)
        full = cpu_quant.int4t_mm(x, tiles, st, mt, group, True, tab)
        for r in (0, 31, 32, 99):
            assert torch.equal(
                full[r : r + 1], cpu_quant.int4t_mm(x[r : r + 1], tiles, st, mt, group, True, tab)
            )
        monkeypatch.setenv("STRUCTGEN_NO_AMX", "1")
        assert not lib.set_amx(True)
    finally:
        monkeypatch.delenv("STRUCTGEN_NO_AMX", raising=False)
        cpu_quant.set_threads(None)
        lib.set_amx(True)


@needs_kernel
@pytest.mark.parametrize(
    "n,k,fp32", [(3072, 576, False), (960, 576, True), (576, 576, False), (576, 1536, True)]
)
def test_tile_kernel_amx_equals_scalar_at_model_shapes(n, k, fp32):
    """The AMX path gives the scalar path's floats bit for bit at the packaged model's matmul
    shapes (SmolLM2-135M: gate/up, qkv, o, down), fp16 and fp32 scale tables, a prefill chunk of
    300 rows (18 full 16-row groups and a ragged one of 12) and 16, 17, 33 rows, on 2 threads."""
    lib = cpu_quant._lib
    if lib.set_isa(True) != "avx2" or not lib.set_amx(True):
        lib.set_amx(True)
        pytest.skip("no AMX-INT8 (or the kernel refused the tile state) here")
    q, s, mn, _, tiles = _weight(n, k, 32, n * 7 + k, fp32)
    st, mt = s.t().contiguous(), mn.t().contiguous()
    tab = int4_scale_tiles(st, mt)
    x = torch.randn(300, k, generator=torch.Generator().manual_seed(n)) * 3
    rows = (300, 16, 17, 33)
    try:
        cpu_quant.set_threads(2)
        amx = [cpu_quant.int4t_mm(x[:m], tiles, st, mt, 32, True, tab) for m in rows]
        lib.set_isa(False)
        ref = [cpu_quant.int4t_mm(x[:m], tiles, st, mt, 32, True, tab) for m in rows]
    finally:
        cpu_quant.set_threads(None)
        lib.set_isa(True)
        lib.set_vnni(True)
        lib.set_amx(True)
    for m, a, b in zip(rows, amx, ref):
        assert torch.equal(a, b), m
    # and not vacuous: the rows agree with the float reference to int8-activation accuracy
    wd = dequantize_int4(q, s, mn)
    _close(amx[0], _int4_q8_ref(x, q, s, mn), 1e-6, x, wd)


@needs_kernel
def test_tile_kernel_rejects_bad_arguments():
    q, s, mn, rows, tiles = _weight(19, 64, 32, 1)
    st, mt = s.t().contiguous(), mn.t().contiguous()
    x = torch.randn(2, 64)
    with pytest.raises(KernelArgumentError, match="int4t_mm.*pack_int4_tiles"):
        cpu_quant.int4t_mm(x, rows, st, mt, 32)  # the rows layout: 19 rows, not 24
    with pytest.raises(KernelArgumentError, match="int4t_mm"):
        cpu_quant.int4t_mm(torch.randn(2, 96), tiles, st, mt, 32)
    with pytest.raises(KernelArgumentError, match="int4t_mm"):
        cpu_quant.int4t_mm(x, tiles, st, mt.float(), 32)
