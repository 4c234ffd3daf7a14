"""Fused quantized q/k/v and gate/up projections against their separate members."""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.models.layers import FusedProjection
from structgen.runtime.quantization.linear import (
    FusedQuantProjection,
    QuantLinear,
    _set_activation_dtype,
)

pytestmark = pytest.mark.skipif(not cpu_quant.available(), reason="quantized C kernel not built")


def _members(kind: str, bias: bool):
    g = torch.Generator().manual_seed(0)
    sizes = (96, 32, 32)
    return [
        QuantLinear.quantize(
            torch.randn(n, 64, generator=g), torch.randn(n, generator=g) if bias else None, kind, 32
        )
        for n in sizes
    ]


@pytest.mark.parametrize("kind", ["int8", "int4"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rows", [1, 3, 20])
def test_fused_equals_members(kind, bias, rows):
    members = _members(kind, bias)
    for m in members:
        _set_activation_dtype(m, torch.float32)
    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(rows))
    expected = torch.cat([m(x) for m in members], dim=-1)
    state = {i: {k: v.clone() for k, v in m.state_dict().items()} for i, m in enumerate(members)}
    fused = FusedProjection.build(members)
    assert isinstance(fused, FusedQuantProjection) and fused.valid()
    torch.testing.assert_close(fused(x), expected, rtol=1e-5, atol=1e-5)
    for i, m in enumerate(
        members
    ):  # members still compute the same, from views into the fused buffers
        torch.testing.assert_close(
            m(x), expected[:, sum(fused.sizes[:i]) : sum(fused.sizes[: i + 1])]
        )
        assert all(torch.equal(v, state[i][k]) for k, v in m.state_dict().items())
    whole = fused.module.qweight
    assert all(
        m.qweight.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
        for m in members
    )


def test_activation_dtype_follows_members():
    members = _members("int8", False)
    fused = FusedProjection.build(members)
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(2))  # not the global RNG
    for m in members:
        _set_activation_dtype(m, torch.float32)
    exact = fused(x)
    for m in members:
        _set_activation_dtype(m, torch.bfloat16)  # int8 activations in the kernel: not bit-equal
    approx = fused(x)
    assert not torch.equal(exact, approx)
    torch.testing.assert_close(approx, exact, rtol=0.05, atol=0.15)  # outputs ~N(0, 8^2)


def test_replaced_buffer_invalidates():
    members = _members("int4", False)
    fused = FusedProjection.build(members)
    members[1].qweight = members[1].qweight.clone()  # e.g. load_state_dict(assign=True) or .to()
    assert not fused.valid()


def test_mixed_kinds_not_fused():
    a, b = _members("int8", False)[0], _members("int4", False)[1]
    assert FusedProjection.build([a, b]) is None
