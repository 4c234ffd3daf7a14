"""The int8 tile kernel (csrc/qkernel_i8tiles.h via ``cpu_quant.int8t_mm``): the tied GGUF Q8_0
lm_head's kernel. Its contract: per activation row and output column, the exact int32 dot of each
block of 32 inputs, then ``acc = fmaf(dot, scale * xd, acc)`` block by block. Checked: the AMX,
AVX-VNNI, AVX2 and scalar paths agree bit for bit over random shapes and row counts (and thread
splits), every row equals itself computed alone, the result is float32-close to the float64
product of the Q8-rounded activations and the weight, the repack is lossless, and the tied
embedding's ``as_linear`` runs it."""

from __future__ import annotations

import pytest
import torch

from structgen.errors import KernelArgumentError
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.quantization.formats import (
    dequantize_int8,
    int8_scale_tiles,
    int8_tile_rows,
    pack_int8_tiles,
    quantize_int8,
    unpack_int8_tiles,
)
from structgen.runtime.quantization.linear import QuantEmbedding
from tests.runtime.cpu.test_quant import _close, _q8_emulated, _ref, isa_paths, needs_kernel


@pytest.mark.parametrize("n", [1, 16, 19, 37, 64])
def test_int8_tile_repack_is_lossless(n):
    q = torch.randint(
        -128, 128, (n, 96), generator=torch.Generator().manual_seed(n), dtype=torch.int8
    )
    tiles = pack_int8_tiles(q)
    assert tiles.shape == (16 * ((n + 15) // 16), 96)
    assert torch.equal(unpack_int8_tiles(tiles, n), q)
    ids = torch.tensor([n - 1, 0, n // 2])
    assert torch.equal(int8_tile_rows(tiles, ids), q[ids])
    # tile t, block b, quad j, column c, byte i = q[16 t + c, 32 b + 4 j + i]; zeros past N
    t5 = tiles.reshape(-1, 3, 8, 16, 4)
    for t, b, j, c, i in [
        (0, 0, 0, 0, 0),
        (0, 2, 7, 15 % n, 1),
        ((n - 1) // 16, 1, 3, (n - 1) % 16, 3),
    ]:
        assert t5[t, b, j, c, i] == q[16 * t + c, 32 * b + 4 * j + i]
    if n % 16:  # the last tile's columns past N
        assert not t5[-1, :, :, n % 16 :, :].any()
    s = torch.rand(n, 3).half()
    table = int8_scale_tiles(s)
    assert table.dtype == torch.float32 and table.shape == ((n + 15) // 16, 3, 16)
    assert torch.equal(table.permute(0, 2, 1).reshape(-1, 3)[:n], s.float())
    lib = cpu_quant._lib
    try:  # the torch fallbacks (no C extension) make the same bytes
        cpu_quant._lib = None
        assert torch.equal(pack_int8_tiles(q), tiles) and torch.equal(int8_scale_tiles(s), table)
    finally:
        cpu_quant._lib = lib
    with pytest.raises(ValueError, match="pack_int8_tiles"):
        pack_int8_tiles(q[:, :40])
    with pytest.raises(ValueError, match="unpack_int8_tiles"):
        unpack_int8_tiles(tiles, n + 16)


def _paths(run) -> dict:
    """``run()`` on AMX (where this CPU has it), then :func:`isa_paths`' VNNI / AVX2 / scalar."""
    lib = cpu_quant._lib
    paths = {}
    if lib.set_isa(True) == "avx2" and lib.set_vnni(True) and lib.set_amx(True):
        paths["amx"] = run()
    lib.set_amx(False)
    try:
        paths.update(isa_paths(run))  # turns AMX back on at the end
    finally:
        lib.set_amx(True)
    return paths


@needs_kernel
@pytest.mark.parametrize(
    "n,k,group,scale_dtype",
    [
        (37, 576, 32, torch.float16),  # the lm_head's K, ragged last tile
        (16, 32, 32, torch.float16),  # one block: the AMX pipeline's shortest
        (83, 64, 32, torch.float32),
        (200, 160, 32, torch.float16),  # 5 blocks around the four-step loop
        (45, 448, 64, torch.float32),  # 2 blocks per scale
        (24, 96, 96, torch.float16),  # per channel (one group)
    ],
)
def test_int8_tile_kernel_paths_agree_and_match_reference(n, k, group, scale_dtype):
    g = torch.Generator().manual_seed(n * k)
    q, s = quantize_int8(torch.randn(n, k, generator=g), group)
    s = s.to(scale_dtype)
    q[0, :32] = -128  # a block of the weight's most negative value ...
    tiles, table = pack_int8_tiles(q), int8_scale_tiles(s)
    x = torch.randn(100, k, generator=g) * 2
    x[0, :32] = -1.0  # ... against x quantized to -127: a block dot of 32 * 128 * 127
    x[3, 32:] = 0.0  # zero blocks: xd = 0
    rows = [1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 64, 100]
    old = cpu_quant._THREADS

    def run():
        out = [cpu_quant.int8t_mm(x[:r], tiles, table, group, n) for r in rows]
        cpu_quant.set_threads(2)  # column ranges of 2 threads (multiples of 8, half tiles)
        try:
            out.append(cpu_quant.int8t_mm(x[:1], tiles, table, group, n))
            out.append(cpu_quant.int8t_mm(x, tiles, table, group, n))
        finally:
            cpu_quant.set_threads(old)
        return out

    paths = _paths(run)
    ref = paths.pop("scalar")
    for name, got in paths.items():
        assert all(torch.equal(a, b) for a, b in zip(got, ref)), name
    full = ref[-1]
    assert full.shape == (100, n) and full.dtype == torch.float32
    for r, y in zip(rows + [1], ref):  # each row is the same float inside any batch
        assert torch.equal(y, full[:r])
    wd = dequantize_int8(q, s)
    _close(full, _ref(_q8_emulated(x), wd), 1e-6, x, wd)
    assert (
        full[0, 0] > 0
        and abs(float(full[0, 0]) / float(_ref(_q8_emulated(x[:1]), wd)[0, 0]) - 1) < 1e-5
    )


@needs_kernel
def test_int8t_mm_rejects_bad_arguments():
    q, s = quantize_int8(torch.randn(20, 64), 32)
    tiles, table = pack_int8_tiles(q), int8_scale_tiles(s)
    x = torch.randn(3, 64)
    with pytest.raises(KernelArgumentError, match="int8t_mm"):
        cpu_quant.int8t_mm(x, q, table, 32, 20)  # row-major q: 20 rows, not 32
    with pytest.raises(KernelArgumentError, match="int8t_mm"):
        cpu_quant.int8t_mm(x, tiles, table, 32, 40)  # N past the tiles
    with pytest.raises(KernelArgumentError, match="int8t_mm"):
        cpu_quant.int8t_mm(x, tiles, table.half(), 32, 20)
    with pytest.raises(KernelArgumentError, match="int8t_mm"):
        cpu_quant.int8t_mm(x[:, :32], tiles, table, 32, 20)
    with pytest.raises(KernelArgumentError, match="int8t_mm"):
        cpu_quant.int8t_mm(x, tiles, table, 16, 20)


@needs_kernel
def test_tied_q8_0_embedding_head_runs_the_tile_kernel():
    """``QuantEmbedding.as_linear`` with int8 activations: the tile kernel's floats (tiles built
    once and kept, rebuilt after an in-place change of the table); float32 activations keep the
    exact row-major path."""
    q, s = quantize_int8(torch.randn(50, 64), 32)
    emb = QuantEmbedding(q, s.half(), torch.float32)
    x = torch.randn(5, 64)
    tiles, table = emb.int8_tiles()
    want = cpu_quant.int8t_mm(x, tiles, table, 32, 50)
    assert torch.equal(emb.as_linear(x), want)
    assert emb.int8_tiles()[0] is tiles  # kept
    xb = x.bfloat16()
    assert torch.equal(emb.as_linear(xb), cpu_quant.int8t_mm(xb, tiles, table, 32, 50).bfloat16())
    emb.qweight[3] = 0
    assert emb.int8_tiles()[0] is not tiles and not emb.as_linear(x)[:, 3].any()
    emb.activation_dtype = torch.float32
    assert torch.equal(emb.as_linear(x), cpu_quant.int8_mm(x, emb.qweight, emb.scales))
