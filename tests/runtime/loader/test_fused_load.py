"""The GGUF loader writes q/k/v and gate/up into one tensor each, so that ``fuse_projections``
joins them without a copy: the loaded weights equal those of the member-by-member path bit for
bit (float and ``quantization="gguf"``), the fused projection is a view over the members'
memory, and ``native_group``'s block copy equals the unpack-and-repack path it replaces.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.loader import gguf_loader, load_model
from structgen.runtime.models.layers import fused_group, join_rows, rows_view
from structgen.runtime.quantization.linear import QuantLinear


def test_rows_view_joins_slices_of_one_tensor_without_a_copy():
    whole = torch.randn(10, 4)
    parts = [whole[0:3], whole[3:4], whole[4:10]]
    view = rows_view(parts)
    assert view is not None and view.data_ptr() == whole.data_ptr()
    assert torch.equal(view, torch.cat(parts)) and view.shape == (10, 4)
    bias = torch.randn(7)
    assert rows_view([bias[:2], bias[2:]]).data_ptr() == bias.data_ptr()
    # not laid end to end, or not one storage: join_rows copies, with cat's result
    for parts in ([whole[0:3], whole[4:6]], [whole[3:4], whole[0:3]], [torch.randn(2, 4)] * 2):
        assert rows_view(parts) is None
        joined = join_rows(parts)
        assert torch.equal(joined, torch.cat(parts))
        assert all(joined.data_ptr() != p.data_ptr() for p in parts)
    assert rows_view([whole[:, :2], whole[:, 2:]]) is None  # not contiguous


def test_fused_group_names_the_members_in_fusion_order():
    assert fused_group("model.layers.3.self_attn.k_proj.weight") == (
        "model.layers.3.self_attn.*.weight",
        1,
        3,
    )
    assert fused_group("model.layers.0.mlp.up_proj.bias") == ("model.layers.0.mlp.*.bias", 1, 2)
    assert fused_group("model.layers.0.mlp.down_proj.weight") is None
    assert fused_group("model.layers.0.self_attn.o_proj.weight") is None


_BLOCK_BYTES = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20}


def _raw_blocks(type_name: str, n: int, k: int, seed: int, offset: int = 0) -> np.ndarray:
    """The blocks of a random ``[n, k]`` weight, starting ``offset`` bytes past an aligned
    address (1: the copies fall back from int16 / int32 words to bytes)."""
    import gguf

    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k)).astype(np.float32)
    raw = np.ascontiguousarray(gguf.quants.quantize(w, gguf.GGMLQuantizationType[type_name]))
    raw = raw.reshape(-1).view(np.uint8)
    if not offset:
        return raw
    out = np.empty(raw.size + 64, np.uint8)
    start = -out.ctypes.data % 32 + offset
    out[start : start + raw.size] = raw
    return out[start : start + raw.size]


@pytest.mark.parametrize("offset", [0, 1])
def test_repack_q8_0_is_the_ggml_dequantized_weight(offset):
    """The Q8_0 repack (the reference of the native path below) against gguf's own decoder."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    from structgen.runtime.quantization.gguf_native import repack_q8_0

    n, k = 24, 96
    raw = _raw_blocks("Q8_0", n, k, 3, offset)
    q, s = repack_q8_0(raw, (n, k))
    assert (q.dtype, q.shape, s.dtype, s.shape) == (torch.int8, (n, k), torch.float16, (n, k // 32))
    ref = gguf_dequantize(raw, GGMLQuantizationType.Q8_0)
    got = q.float() * s.float().repeat_interleave(32, dim=1)
    assert torch.equal(got, torch.from_numpy(np.asarray(ref, np.float32).reshape(n, k)))


@pytest.mark.skipif(not cpu_quant.available(), reason="quantized C kernel not built")
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_0", "Q4_1"])
def test_native_group_equals_the_repacking_path(type_name, offset):
    from structgen.runtime.quantization.gguf_native import native_group, repack_q4, repack_q8_0

    k, sizes = 64, [48, 16, 32]
    raws = [_raw_blocks(type_name, n, k, i, offset) for i, n in enumerate(sizes)]
    rows = [torch.randperm(48, generator=torch.Generator().manual_seed(1)), None, None]
    mods = native_group([(raw, (n, k), r, None) for raw, n, r in zip(raws, sizes, rows)], type_name)
    for raw, n, r, mod in zip(raws, sizes, rows, mods):
        if type_name == "Q8_0":  # the former path: repack, then permute rows
            q, s = repack_q8_0(raw, (n, k))
            ref = QuantLinear.from_int8(q if r is None else q[r], s if r is None else s[r])
        else:
            q, s, m = repack_q4(raw, (n, k), type_name)
            if r is not None:
                q, s, m = q[r], s[:, r], m[:, r]
            ref = QuantLinear.from_int4(q, s, m)
        assert (mod.kind, mod.group_size, mod.int4_layout) == (
            ref.kind,
            ref.group_size,
            ref.int4_layout,
        )
        assert mod._buffers.keys() == ref._buffers.keys()
        for name, buf in ref._buffers.items():
            assert mod._buffers[name].dtype == buf.dtype
            assert torch.equal(mod._buffers[name], buf), (type_name, name)
    # one set of buffers, the members' rows in order
    whole = mods[0].qweight.untyped_storage().data_ptr()
    assert all(m.qweight.untyped_storage().data_ptr() == whole for m in mods)


def _state(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _fused_projections(model):
    for layer in model.model.layers:
        yield layer.self_attn.qkv, [layer.self_attn.q_proj, layer.self_attn.k_proj]
        yield layer.mlp.gate_up, [layer.mlp.gate_proj, layer.mlp.up_proj]


@pytest.mark.parametrize(
    "family, qtype", [("qwen2", None), ("qwen2", "Q8_0"), ("qwen3", "Q4_1"), ("qwen3", "Q4_0")]
)
def test_gguf_groups_load_in_place_and_equal_the_member_path(tmp_path, monkeypatch, family, qtype):
    from tests.runtime.test_gguf_families import write_gguf
    from tests.runtime.test_models_families import hf_model, make_config

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.gguf"
    write_gguf(path, hf_model(make_config(family)), family, qtype)
    quantization = None if qtype is None else "gguf"
    fused = load_model(str(path), quantization=quantization).model
    with monkeypatch.context() as m:  # the former path: every tensor alone, fusion copies
        m.setattr(gguf_loader, "_fusion_groups", lambda g, arch: {})
        alone = load_model(str(path), quantization=quantization).model
    a, b = _state(fused), _state(alone)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
    x = torch.randn(5, fused.config.hidden_size, generator=torch.Generator().manual_seed(0))
    native = qtype is not None and cpu_quant.available()
    for (proj, members), (ref, _) in zip(_fused_projections(fused), _fused_projections(alone)):
        assert proj is not None and proj.valid() and ref is not None
        assert torch.equal(proj(x), ref(x))
        # the fused tensor is the members' memory (in place), not a copy
        first = members[0].qweight if native else members[0].weight
        whole = proj.module.qweight if native else proj.weight
        assert whole.data_ptr() == first.data_ptr()
        if native:
            assert isinstance(members[0], QuantLinear)
