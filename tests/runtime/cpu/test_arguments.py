"""Wrong arguments to the C kernels' wrappers raise KernelArgumentError before any C call.

(``runtime.cpu.dense.linear`` checks every argument its kernel reads and hands anything else
to ``F.linear``, whose own errors are its contract: tests/runtime/cpu/test_dense.py.)

Each case would have the kernel read or write out of bounds (a weight of the wrong length,
metadata of the wrong length, a non-contiguous quantized weight); none may reach C.
"""

from __future__ import annotations

import pytest
import torch

from structgen.errors import KernelArgumentError, StructgenError
from structgen.runtime.cpu import decode_step, quant
from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.quantization.formats import pack_int4_rows, quantize_int4, quantize_int8


def test_error_is_a_structgen_value_error():
    assert issubclass(KernelArgumentError, StructgenError) and issubclass(
        KernelArgumentError, ValueError
    )


@pytest.mark.parametrize("case", ["weight", "delta", "rank"])
def test_add_rms_norm(case):
    r, d, w = torch.randn(3, 16), torch.randn(3, 16), torch.ones(16)
    args = {
        "weight": (r, d, torch.ones(8)),
        "delta": (r, torch.randn(2, 16), w),
        "rank": (r[None], None, w),
    }[case]
    with pytest.raises(KernelArgumentError, match="add_rms_norm"):
        cpu_ops.add_rms_norm(*args, 1e-6)


def _rope_args(t=3, heads=4, kv_heads=2, d=8, slots=16):
    q, k, v = torch.randn(t, heads * d), torch.randn(t, kv_heads * d), torch.randn(t, kv_heads * d)
    cos, sin = torch.randn(t, 1, d), torch.randn(t, 1, d)
    caches = torch.zeros(slots, kv_heads, d), torch.zeros(slots, kv_heads, d)
    return dict(
        q=q,
        k=k,
        v=v,
        cos=cos,
        sin=sin,
        k_slots=caches[0],
        v_slots=caches[1],
        out_slots=torch.arange(t),
    )


@pytest.mark.parametrize("case", ["k_width", "out_slots", "cache_head_dim", "one_norm", "norm_len"])
def test_rope_store_kv(case):
    a = _rope_args()
    bad = {
        "k_width": {"k": torch.randn(3, 8)},
        "out_slots": {"out_slots": torch.arange(2)},
        "cache_head_dim": {"k_slots": torch.zeros(16, 2, 4), "v_slots": torch.zeros(16, 2, 4)},
        "one_norm": {"q_norm": torch.ones(8)},
        "norm_len": {"q_norm": torch.ones(4), "k_norm": torch.ones(4)},
    }
    a.update(bad[case])
    with pytest.raises(KernelArgumentError, match="rope_store_kv"):
        cpu_ops.rope_store_kv(**a)


@pytest.mark.parametrize("case", ["gqa", "seq_ids", "positions", "v_shape", "pages"])
def test_paged_attention(case):
    q, kc, vc = torch.randn(2, 6, 8), torch.randn(16, 2, 8), torch.randn(16, 2, 8)
    a = dict(
        q=q,
        k_slots=kc,
        v_slots=vc,
        page_table=torch.tensor([[0, 1], [2, 3]]),
        seq_ids=torch.tensor([0, 1]),
        positions=torch.tensor([3, 5]),
        page_size=4,
        scale=0.3,
    )
    bad = {
        "gqa": {"k_slots": torch.randn(16, 4, 8), "v_slots": torch.randn(16, 4, 8)},
        "seq_ids": {"seq_ids": torch.tensor([0])},
        "positions": {"positions": torch.tensor([1, 2, 3])},
        "v_shape": {"v_slots": torch.randn(16, 2, 4)},
        "pages": {"page_size": 5},
    }
    a.update(bad[case])
    with pytest.raises(KernelArgumentError, match="paged_attention"):
        cpu_ops.paged_attention(**a)


def test_silu_mul():
    with pytest.raises(KernelArgumentError, match="silu_mul"):
        cpu_ops.silu_mul(torch.randn(2, 8), torch.randn(2, 6))


needs_quant = pytest.mark.skipif(quant._lib is None, reason="quantized C kernel not built")


def _int4(n=16, k=64, group=32):
    q, s, mn = quantize_int4(torch.randn(n, k), group)
    return pack_int4_rows(q), s.t().contiguous(), mn.t().contiguous()


@needs_quant
@pytest.mark.parametrize(
    "case", ["q_strided", "q_dtype", "scales_dtype", "scales_shape", "k", "x_dim"]
)
@pytest.mark.parametrize("fn", ["int4_mm", "int4_linear"])
def test_int4(case, fn):
    q, s, mn = _int4()
    rows = 2 if fn.endswith("_mm") else quant.MAX_M + 1  # *_linear: its tiled (prefill) path
    x = torch.randn(rows, 64)
    args = {
        "q_strided": (x, torch.cat([q, q], 1)[:, ::2], s, mn),
        "q_dtype": (x, q.to(torch.int8), s, mn),
        "scales_dtype": (x, q, s.float(), mn),
        "scales_shape": (x, q, s[:, :1].contiguous(), mn),
        "k": (torch.randn(rows, 32), q, s, mn),
        "x_dim": (x[:, None], q, s, mn),
    }[case]
    with pytest.raises(KernelArgumentError, match=fn):
        getattr(quant, fn)(*args, 32)


@needs_quant
def test_int4_dequant_rows_range():
    q, s, mn = _int4()
    with pytest.raises(KernelArgumentError, match="rows"):
        quant.int4_dequant_rows(q, s, mn, 32, 8, 17)


@needs_quant
@pytest.mark.parametrize("case", ["q_dtype", "q_strided", "scales_shape", "group", "k"])
@pytest.mark.parametrize("fn", ["int8_mm", "int8_linear"])
def test_int8(case, fn):
    q, s = quantize_int8(torch.randn(16, 64), 32)
    rows = 2 if fn.endswith("_mm") else quant.MAX_M + 1  # *_linear: its tiled (prefill) path
    x = torch.randn(rows, 64)
    args = {
        "q_dtype": (x, q.view(torch.uint8), s),
        "q_strided": (x, q.t().contiguous().t(), s),
        "scales_shape": (x, q, s[:8].contiguous()),
        "group": (x, q, torch.ones(16, 16)),
        "k": (torch.randn(rows, 48), q, s),
    }[case]
    with pytest.raises(KernelArgumentError, match=fn):
        getattr(quant, fn)(*args)


@pytest.mark.skipif(not decode_step.kernel_available(), reason="fused decode step not built")
def test_decode_step_plan_checks_the_step():
    """A plan is checked once when built; each call checks the step against it in O(1)."""
    import transformers

    from structgen.runtime.models.llama import LlamaForCausalLM

    cfg = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    model = LlamaForCausalLM(cfg, torch.float32, "cpu")
    model.fuse_projections()
    kv = model.make_kv_pool(8, 4)
    plan = decode_step.DecodeStepPlan.build(model, kv)
    assert plan is not None
    batch = ForwardBatch.build([[1]], [0], [[kv.alloc(1)[0]]], 4)
    cos, sin = model.rotary(batch.positions, torch.float32)
    for residual in (
        torch.zeros(1, 16),
        torch.zeros(9, 32),
        torch.zeros(1, 32, dtype=torch.bfloat16),
        torch.zeros(1, 64)[:, ::2],
    ):
        with pytest.raises(KernelArgumentError, match="DecodeStepPlan"):
            plan(residual, cos, sin, batch)
