"""The model's ops reach their Triton kernels through the same functions the CPU path calls.

Under ``attention_backend("triton")`` (interpreted on CPU, as on CUDA with ``"auto"``),
``RMSNorm``, ``rotate_qk``, ``models.moe.fused_moe`` and ``QuantLinear`` must call the Triton
launcher (counted) and agree with the op's one reference in ``structgen.kernels``
(tolerances: helpers.TOL).
"""

from __future__ import annotations

import pytest
import torch

from structgen.kernels import fused_moe as fused_moe_mod
from structgen.kernels import quant_matmul as quant_matmul_mod
from structgen.kernels import rms_norm as rms_norm_mod
from structgen.kernels import rotary as rotary_mod
from structgen.kernels.fused_moe import fused_moe_ref
from structgen.kernels.rms_norm import rms_norm_ref
from structgen.kernels.rotary import rotary_ref
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.models.attention import attention_backend
from structgen.runtime.models.layers import RMSNorm, rotate_qk
from structgen.runtime.models.moe import fused_moe
from structgen.runtime.quantization.linear import QuantLinear
from tests.kernels.helpers import assert_close


@pytest.fixture
def launches(monkeypatch):
    """Count the calls of each Triton launcher (module, name) while passing them through."""
    counts: dict[str, int] = {}

    def spy(module, name):
        real = getattr(module, name)

        def counted(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for module, name in (
        (rms_norm_mod, "_rms_norm_triton"),
        (rotary_mod, "_rotary_triton"),
        (fused_moe_mod, "_fused_moe_triton"),
        (quant_matmul_mod, "_quant_matmul_triton"),
    ):
        spy(module, name)
    return counts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_layer_dispatches_to_triton(launches, dtype):
    norm = RMSNorm(40, 1e-6, dtype, "cpu")
    with torch.no_grad():
        norm.weight.copy_(torch.randn(40))
    x = torch.randn(3, 2, 40).to(dtype)  # a q/k-norm input: [T, heads, d]
    with attention_backend("triton"):
        got = norm(x)
    assert launches == {"_rms_norm_triton": 1}
    assert_close(got, rms_norm_ref(x, norm.weight, 1e-6), dtype)
    assert torch.equal(
        norm(x), rms_norm_ref(x, norm.weight, 1e-6)
    )  # outside the scope: the reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotate_qk_dispatches_to_triton(launches, dtype):
    t, d = 5, 16
    ang = torch.randn(t, d // 2)
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1)  # [T, 1, d]
    qkv = torch.randn(t, 6 + 2 * 2, d).to(dtype)  # a fused projection's output: q and k are views
    q, k = qkv[:, :6], qkv[:, 6:8]
    want_q, want_k = q.clone(), k.clone()
    rotary_ref(want_q, want_k, cos.view(t, d), sin.view(t, d))
    with attention_backend("triton"):
        got_q, got_k = rotate_qk(q, k, cos, sin)
    assert launches == {"_rotary_triton": 1}
    assert got_q.data_ptr() == q.data_ptr()  # in place
    assert_close(got_q, want_q, dtype)
    assert_close(got_k, want_k, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_moe_dispatches_to_triton(launches, dtype):
    g = torch.Generator().manual_seed(0)
    experts, hidden, inter, tokens = 4, 40, 24, 7
    w_gate_up = (torch.randn(experts, 2 * inter, hidden, generator=g) / hidden**0.5).to(dtype)
    w_down = (torch.randn(experts, hidden, inter, generator=g) / inter**0.5).to(dtype)
    x = torch.randn(tokens, hidden, generator=g).to(dtype)
    topk_w, topk_ids = torch.randn(tokens, experts, generator=g).softmax(-1).topk(2, -1)
    topk_w = topk_w.to(dtype)
    with attention_backend("triton"):
        got = fused_moe(x, w_gate_up, w_down, topk_w, topk_ids)
        as_calls = [
            [lambda h, w=w: h @ w.T for w in ws] for ws in (w_gate_up, w_down)
        ]  # quantized experts' form
        fused_moe(x, *as_calls, topk_w, topk_ids)  # callables: the torch path
    assert launches == {"_fused_moe_triton": 1}
    assert_close(got, fused_moe_ref(x, w_gate_up, w_down, topk_w, topk_ids), dtype)


@pytest.mark.skipif(not cpu_quant.available(), reason="int4 'rows' layout needs the C kernel")
@pytest.mark.parametrize(
    "kind,group", [("int8", None), ("int8", 32), ("int4", 32)], ids=["w8", "w8g32", "w4g32"]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quant_linear_dispatches_to_triton(launches, kind, group, dtype):
    g = torch.Generator().manual_seed(1)
    n, k = 48, 64
    lin = QuantLinear.quantize(
        torch.randn(n, k, generator=g), torch.randn(n, generator=g), kind, group
    )
    assert lin._triton_layout()
    x = (torch.randn(3, k, generator=g) / k**0.5).to(dtype)
    with attention_backend("triton"):
        got = lin(x)
    assert launches == {"_quant_matmul_triton": 1}
    w = lin.dequantized_weight()  # [N, K] float32: the weight every path multiplies by
    assert_close(got - lin.bias, (x.float() @ w.T).to(dtype), dtype)
