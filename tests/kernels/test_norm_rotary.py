"""rms_norm and rotary: Triton (interpreted) vs the torch references and the model layers."""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.rms_norm import rms_norm, rms_norm_ref
from structgen.kernels.rotary import rotary, rotary_ref
from structgen.runtime.models.layers import apply_rotary
from tests.kernels.helpers import DTYPES, assert_close


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("rows", "hidden"), [(1, 8), (5, 40)])
def test_rms_norm(dtype, rows, hidden):
    x = torch.randn(rows, hidden).to(dtype)
    w = torch.randn(hidden).to(dtype)
    assert_close(rms_norm(x, w, 1e-6, backend="triton"), rms_norm_ref(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_fused_residual(dtype):
    x = torch.randn(2, 3, 24).to(dtype)
    res = torch.randn(2, 3, 24).to(dtype)
    w = torch.randn(24).to(dtype)
    x0, res0 = x.clone(), res.clone()
    out, summed = rms_norm(x, w, 1e-5, res, backend="triton")
    ref_out, ref_sum = rms_norm_ref(x, w, 1e-5, res)
    assert_close(out, ref_out, dtype)
    assert_close(summed, ref_sum, dtype)
    assert torch.equal(x, x0) and torch.equal(res, res0)


def _tables(tokens: int, rotary_dim: int):
    ang = torch.randn(tokens, rotary_dim // 2)
    emb = torch.cat([ang, ang], -1)
    return emb.cos(), emb.sin()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("tokens", "rotary_dim"), [(1, 32), (7, 16)], ids=["full", "partial"])
def test_rotary_in_place(dtype, tokens, rotary_dim):
    q = torch.randn(tokens, 6, 32).to(dtype)
    k = torch.randn(tokens, 2, 32).to(dtype)
    cos, sin = _tables(tokens, rotary_dim)
    q1, k1, q2, k2 = q.clone(), k.clone(), q.clone(), k.clone()
    rotary(q1, k1, cos, sin, backend="triton")
    rotary_ref(q2, k2, cos, sin)
    assert_close(q1, q2, dtype)
    assert_close(k1, k2, dtype)
    assert torch.equal(q1[..., rotary_dim:], q[..., rotary_dim:])  # pass-through dims


def test_rotary_ref_matches_model_layer():
    q = torch.randn(5, 3, 16)
    cos, sin = _tables(5, 16)
    want = apply_rotary(q, cos[:, None], sin[:, None])
    rotary_ref(q, q.new_empty(5, 1, 16), cos, sin)
    torch.testing.assert_close(q, want)
