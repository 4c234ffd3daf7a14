"""A tiny Llama run with the Triton attention path (interpreted) gives the torch path's logits.

The models package does not dispatch to the kernels yet; this test patches in the
dispatch proposed for ``structgen.runtime.models.attention`` (``_triton_paged_attention``
below) and compares prefill, ragged extend and decode logits with the torch path.
"""

from __future__ import annotations

import importlib

import torch

from structgen.kernels.extend_attention import extend_attention
from structgen.kernels.paged_decode_attention import paged_decode_attention
from structgen.kernels.store_kv import store_kv
from structgen.runtime.models.llama import LlamaForCausalLM
from structgen.runtime.models.testing import PagedSequences


def _seam_module():
    """The module whose attention layer calls ``paged_attention`` / ``store_kv`` by name."""
    for name in ("structgen.runtime.models.decoder", "structgen.runtime.models.llama"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "paged_attention") and hasattr(mod, "store_kv"):
            return mod
    raise AssertionError("no models module imports paged_attention and store_kv")


def _triton_paged_attention(q, k_slots, v_slots, batch, scale, sliding_window=None):
    """The proposed GPU dispatch of ``paged_attention`` (forced to Triton here)."""
    assert sliding_window is None, "the Triton kernels have no sliding window yet"
    plan = batch.plans.get("triton")
    if plan is None:  # once per step, shared by all layers (one host sync)
        max_ext = int(batch.extend_lens.max())
        plan = batch.plans["triton"] = (max_ext, max_ext == 1 and batch.num_tokens == batch.batch_size)
    max_ext, is_decode = plan
    kv_heads, d = k_slots.shape[1], k_slots.shape[2]
    k_cache = k_slots.view(-1, batch.page_size, kv_heads, d)  # [pages, page_size, kv_heads, d]
    v_cache = v_slots.view(-1, batch.page_size, kv_heads, d)
    if is_decode:
        seq_lens = batch.prefix_lens + batch.extend_lens
        return paged_decode_attention(
            q, k_cache, v_cache, batch.page_table, seq_lens, scale, backend="triton"
        )
    return extend_attention(
        q, k_cache, v_cache, batch.page_table, batch.prefix_lens, batch.extend_lens, scale,
        max_ext, backend="triton",
    )  # fmt: skip


def _tiny_llama():
    from transformers import LlamaConfig

    cfg = LlamaConfig(
        vocab_size=64, hidden_size=96, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    model = LlamaForCausalLM(cfg, torch.float32, "cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            base = 1.0 if "norm" in name else 0.0
            p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
    return model


def _run(model) -> list[torch.Tensor]:
    seqs = PagedSequences(model, num_pages=32, page_size=4)
    out = []
    with torch.no_grad():
        steps = [
            {0: [1, 2, 3, 4, 5, 6, 7], 1: [9, 8, 7]},  # ragged prefill
            {0: [11], 1: [12, 13, 14, 15, 16, 17]},  # decode + extend together
            {0: [20], 1: [21]},  # pure decode
        ]
        for chunks in steps:
            logits = seqs.step(chunks)
            out.extend(logits[s] for s in sorted(logits))
    return out


def test_triton_attention_path_matches_torch_path(monkeypatch):
    model = _tiny_llama()
    want = _run(model)
    seam = _seam_module()
    monkeypatch.setattr(seam, "paged_attention", _triton_paged_attention)
    monkeypatch.setattr(
        seam, "store_kv", lambda k, v, ks, vs, slots: store_kv(k, v, ks, vs, slots, backend="triton")
    )
    got = _run(model)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)

