"""ggml dequantization (csrc/kquant.c and the torch / gguf fallbacks) against a numpy reference
of ggml's ``dequantize_row_*`` formulas (ggml-quants.c), re-stated here, and against ``gguf``'s
own dequantizer. ``gguf`` cannot encode K-quants, so the blocks are written raw: random quants,
finite fp16 scales.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.runtime.loader import dequant
from structgen.runtime.loader.dequant import dequantize
from structgen.runtime.loader.gguf_file import GGML_TYPES

TYPE_IDS = {name: tid for tid, (name, _, _) in GGML_TYPES.items()}
needs_c = pytest.mark.skipif(dequant._kquant is None, reason="C dequantizer not built")


def _f16(a: np.ndarray) -> np.ndarray:
    return a.view(np.float16).astype(np.float32)


# ------------------------------------------------------------------ the numpy reference


def ref_q4_0(b: np.ndarray) -> np.ndarray:
    d = _f16(b[:, 0:2].copy())
    qs = b[:, 2:18]
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32) - 8
    return q.astype(np.float32) * d


def ref_q4_1(b: np.ndarray) -> np.ndarray:
    d, m = _f16(b[:, 0:2].copy()), _f16(b[:, 2:4].copy())
    qs = b[:, 4:20]
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32)
    return q * d + m


def ref_q8_0(b: np.ndarray) -> np.ndarray:
    return b[:, 2:34].copy().view(np.int8).astype(np.float32) * _f16(b[:, 0:2].copy())


def _scale_min_k4(j: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's get_scale_min_k4 over a column of blocks (``q``: ``[nb, 12]``)."""
    if j < 4:
        return q[:, j] & 63, q[:, j + 4] & 63
    sc = (q[:, j + 4] & 0x0F) | ((q[:, j - 4] >> 6) << 4)
    mn = (q[:, j + 4] >> 4) | ((q[:, j] >> 6) << 4)
    return sc, mn


def ref_q4_k(b: np.ndarray) -> np.ndarray:
    nb = b.shape[0]
    d, dmin = _f16(b[:, 0:2].copy())[:, 0], _f16(b[:, 2:4].copy())[:, 0]
    scales, qs = b[:, 4:16], b[:, 16:144]
    y = np.empty((nb, 256), np.float32)
    for chunk in range(4):  # 64 weights: low nibbles of 32 bytes, then their high nibbles
        q = qs[:, 32 * chunk : 32 * chunk + 32]
        for half, nib in ((0, q & 15), (1, q >> 4)):
            sc, mn = _scale_min_k4(2 * chunk + half, scales)
            d1 = (d * sc.astype(np.float32))[:, None]
            m1 = (dmin * mn.astype(np.float32))[:, None]
            y[:, 64 * chunk + 32 * half : 64 * chunk + 32 * half + 32] = (
                d1 * nib.astype(np.float32) - m1
            )
    return y


def ref_q6_k(b: np.ndarray) -> np.ndarray:
    nb = b.shape[0]
    ql, qh = b[:, 0:128], b[:, 128:192]
    sc = b[:, 192:208].copy().view(np.int8).astype(np.float32)
    d = _f16(b[:, 208:210].copy())[:, 0]
    y = np.empty((nb, 256), np.float32)
    for n in range(2):  # 128 weights from ql[64 n:], qh[32 n:], sc[8 n:]
        lo, hi, s = ql[:, 64 * n : 64 * n + 64], qh[:, 32 * n : 32 * n + 32], sc[:, 8 * n :]
        for j in range(32):
            i = j // 16
            q1 = ((lo[:, j] & 15) | (((hi[:, j] >> 0) & 3) << 4)).astype(np.int32) - 32
            q2 = ((lo[:, j + 32] & 15) | (((hi[:, j] >> 2) & 3) << 4)).astype(np.int32) - 32
            q3 = ((lo[:, j] >> 4) | (((hi[:, j] >> 4) & 3) << 4)).astype(np.int32) - 32
            q4 = ((lo[:, j + 32] >> 4) | (((hi[:, j] >> 6) & 3) << 4)).astype(np.int32) - 32
            for off, q, k in ((0, q1, 0), (32, q2, 2), (64, q3, 4), (96, q4, 6)):
                y[:, 128 * n + j + off] = d * s[:, i + k] * q.astype(np.float32)
    return y


REF = {"Q4_0": ref_q4_0, "Q4_1": ref_q4_1, "Q8_0": ref_q8_0, "Q4_K": ref_q4_k, "Q6_K": ref_q6_k}
# byte offsets of each block's fp16 scales
FP16_AT = {"Q4_0": (0,), "Q4_1": (0, 2), "Q8_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,)}


def random_blocks(type_name: str, n_blocks: int, seed: int = 0, scale: float = 0.02) -> np.ndarray:
    """``[n_blocks, block bytes]`` uint8: random quants, finite fp16 scales of about ``scale``
    (some negative, some subnormal)."""
    _, _, nbytes = GGML_TYPES[TYPE_IDS[type_name]]
    rng = np.random.default_rng(seed)
    b = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
    for at in FP16_AT[type_name]:
        s = (rng.standard_normal(n_blocks) * scale).astype(np.float16)
        s[::7] = np.float16(3e-6)  # subnormal in fp16
        b[:, at : at + 2] = s.view(np.uint8).reshape(n_blocks, 2)
    return b


def random_tensor(type_name: str, shape: tuple[int, int], seed: int = 0, scale: float = 0.02):
    """``(raw uint8 bytes, reference float32 [N, K])`` of a random tensor of ``type_name``."""
    _, block, _ = GGML_TYPES[TYPE_IDS[type_name]]
    blocks = random_blocks(type_name, shape[0] * shape[1] // block, seed, scale)
    return blocks.reshape(-1), REF[type_name](blocks).reshape(shape)


# ------------------------------------------------------------------ tests

SHAPES = {
    "Q4_0": (24, 96),
    "Q4_1": (24, 96),
    "Q8_0": (24, 96),
    "Q4_K": (12, 512),
    "Q6_K": (12, 512),
}


@pytest.mark.parametrize("type_name", list(REF))
def test_dequantize_equals_ggml_formulas(type_name):
    raw, ref = random_tensor(type_name, SHAPES[type_name])
    out = dequantize(raw, type_name, TYPE_IDS[type_name], SHAPES[type_name])
    assert out.dtype == torch.float32 and out.shape == SHAPES[type_name]
    assert torch.equal(out, torch.from_numpy(ref))  # bit-exact


@pytest.mark.parametrize("type_name", list(REF))
def test_reference_agrees_with_gguf_dequantize(type_name):
    """The re-stated formulas are ggml's: ``gguf``'s independent numpy dequantizer agrees."""
    import gguf
    from gguf.quants import dequantize as gguf_dequantize

    raw, ref = random_tensor(type_name, SHAPES[type_name], seed=1)
    n = SHAPES[type_name][0]
    theirs = gguf_dequantize(raw.reshape(n, -1), gguf.GGMLQuantizationType(TYPE_IDS[type_name]))
    np.testing.assert_allclose(theirs.reshape(ref.shape), ref, rtol=1e-6, atol=1e-9)


@needs_c
@pytest.mark.parametrize("type_name", list(REF))
def test_dequantize_rows_and_bfloat16(type_name):
    shape = SHAPES[type_name]
    raw, ref = random_tensor(type_name, shape, seed=2)
    rows = torch.randperm(shape[0], generator=torch.Generator().manual_seed(0))
    want = torch.from_numpy(ref)[rows]
    assert torch.equal(dequantize(raw, type_name, TYPE_IDS[type_name], shape, rows), want)
    bf = dequantize(raw, type_name, TYPE_IDS[type_name], shape, rows, torch.bfloat16)
    assert bf.dtype == torch.bfloat16
    assert torch.equal(bf.view(torch.int16), want.to(torch.bfloat16).view(torch.int16))


@needs_c
@pytest.mark.parametrize("type_name", list(REF))
def test_fallback_paths_equal_c(monkeypatch, type_name):
    """Without the extension: torch (Q4_0/Q4_1/Q8_0) or gguf (K-quants), same values."""
    shape = SHAPES[type_name]
    raw, _ = random_tensor(type_name, shape, seed=3)
    rows = torch.arange(shape[0]).flip(0)
    c = dequantize(raw, type_name, TYPE_IDS[type_name], shape, rows, torch.bfloat16)
    monkeypatch.setattr(dequant, "_kquant", None)
    fallback = dequantize(raw, type_name, TYPE_IDS[type_name], shape, rows, torch.bfloat16)
    if type_name in ("Q4_K", "Q6_K"):  # gguf's numpy order of operations may differ by an ulp
        torch.testing.assert_close(fallback.float(), c.float(), rtol=1e-2, atol=0)
    else:
        assert torch.equal(fallback.view(torch.int16), c.view(torch.int16))


@needs_c
def test_wrong_size_raises_value_error():
    raw, _ = random_tensor("Q4_K", (2, 256))
    with pytest.raises(ValueError, match="Q4_K tensor of shape"):
        dequantize(raw[:-1], "Q4_K", TYPE_IDS["Q4_K"], (2, 256))
    with pytest.raises(ValueError, match="outside the tensor"):
        dequantize(raw, "Q4_K", TYPE_IDS["Q4_K"], (2, 256), torch.tensor([0, 2]))


def test_repack_q6_k_is_ggml_dequantized_weight():
    from structgen.runtime.quantization.gguf_kquants import repack_q6_k

    raw, ref = random_tensor("Q6_K", (8, 512), seed=4)
    q, scales = repack_q6_k(raw, (8, 512))
    assert q.dtype == torch.int8 and scales.dtype == torch.float32 and scales.shape == (8, 32)
    assert int(q.min()) >= -32 and int(q.max()) <= 31
    w = (q.float().view(8, 32, 16) * scales[..., None]).view(8, 512)
    assert torch.equal(w, torch.from_numpy(ref))
    with pytest.raises(ValueError, match="Q6_K tensor"):
        repack_q6_k(raw[:-1], (8, 512))
