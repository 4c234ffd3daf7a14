"""GGUF files of every family (llama.cpp tensor names), written with the ``gguf`` package from tiny
random transformers models, loaded by our GGUF loader and compared with transformers' logits.

Dense: qwen2, qwen3. MoE: Mixtral (``llama`` with ``expert_count``), Qwen2-MoE (shared expert),
Qwen3-MoE, with the stacked ``blk.N.ffn_{gate,up,down}_exps`` tensors. Quantized files (Q8_0,
Q4_0, Q4_1 matrices, experts included) load natively and match the dequantized path. The writer also
writes DeepSeek-V3 as llama.cpp's ``deepseek2`` (tests in test_gguf_deepseek.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.runtime.loader import load_model
from structgen.runtime.models.layers import rope_theta
from structgen.runtime.quantization import QuantFusedExperts, QuantLinear
from structgen.runtime.quantization.linear import _set_activation_dtype
from tests.runtime.test_loader import byte_level_vocab, llama_cpp_permute
from tests.runtime.test_models_families import (
    BASE,
    PagedSequences,
    hf_model,
    make_config,
    run_ragged_scenario,
)

GGUF_ARCH = {
    "llama": "llama",  # dense Llama (SmolLM2's architecture): q/k rows permuted, no experts
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "mixtral": "llama",
    "qwen2_moe": "qwen2moe",
    "qwen3_moe": "qwen3moe",
    "deepseek_v3": "deepseek2",
}
_LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
    "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
    "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
    # deepseek2 (llama.cpp's DeepseekV2Model): MLA projections and the shared experts
    "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm",
    "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
    "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b",
    "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared_experts.down_proj": "ffn_down_shexp",
}


def family_config(family: str):
    """Tiny configs whose every field a GGUF file carries (no sliding windows)."""
    import transformers

    kw = dict(BASE, num_attention_heads=4, num_key_value_heads=2)
    if family == "qwen2":
        return transformers.Qwen2Config(**kw)
    if family == "mixtral":
        return transformers.MixtralConfig(
            num_local_experts=4, num_experts_per_tok=2, sliding_window=None, **kw
        )
    if family == "qwen2_moe":  # every layer sparse (llama.cpp's qwen2moe has no dense layers)
        return make_config(family, mlp_only_layers=[])
    return make_config(family)


def gguf_tensors(hf, arch: str, split_kv_b: bool = False):
    """``(gguf name, float32 numpy array)`` of a transformers model, as llama.cpp's converter names
    them.

    ``split_kv_b`` (deepseek2): write ``kv_b_proj`` as newer llama.cpp files do, ``attn_k_b``
    ``[H, r, nope]`` (each head's k rows, transposed) and ``attn_v_b`` ``[H, v, r]``.
    """
    cfg = hf.config
    for name, t in hf.state_dict().items():
        a = t.float().numpy()
        if name == "model.embed_tokens.weight":
            yield "token_embd.weight", a
        elif name == "model.norm.weight":
            yield "output_norm.weight", a
        elif name == "lm_head.weight":
            if not cfg.tie_word_embeddings:
                yield "output.weight", a
        elif name.endswith("mlp.experts.gate_up_proj"):
            layer = name.split(".")[2]
            gate, up = np.split(a, 2, axis=1)
            yield f"blk.{layer}.ffn_gate_exps.weight", gate
            yield f"blk.{layer}.ffn_up_exps.weight", up
        elif name.endswith("mlp.experts.down_proj"):
            yield f"blk.{name.split('.')[2]}.ffn_down_exps.weight", a
        elif name.endswith("mlp.gate.e_score_correction_bias"):
            yield f"blk.{name.split('.')[2]}.exp_probs_b.bias", a
        elif split_kv_b and name.endswith("self_attn.kv_b_proj.weight"):
            nope = cfg.qk_nope_head_dim
            kv_b = a.reshape(cfg.num_attention_heads, nope + cfg.v_head_dim, -1)  # [H, nope + v, r]
            yield f"blk.{name.split('.')[2]}.attn_k_b.weight", kv_b[:, :nope].transpose(0, 2, 1)
            yield f"blk.{name.split('.')[2]}.attn_v_b.weight", kv_b[:, nope:]
        else:
            _, _, layer, rest = name.split(".", 3)
            mod, kind = rest.rsplit(".", 1)
            if arch == "llama" and mod == "self_attn.q_proj":
                a = llama_cpp_permute(a, cfg.num_attention_heads)
            elif arch == "llama" and mod == "self_attn.k_proj":
                a = llama_cpp_permute(a, cfg.num_key_value_heads)
            if mod == "mlp.shared_expert_gate":
                a = a.reshape(-1)
            yield f"blk.{layer}.{_LAYER[mod]}.{kind}", a


def write_gguf(
    path,
    hf,
    family: str,
    qtype: str | None = None,
    legacy_mla: bool = False,
    drop=(),
    gating: int = 2,
    embedding_qtype: str | None = None,
) -> None:
    """Write ``hf`` as a GGUF; ``qtype`` (``Q8_0``/``Q4_0``/``Q4_1``) quantizes every 2-D/3-D matrix
    whose rows are whole blocks except norms and the router.

    The token embedding is Q8_0 where ``qtype`` or ``embedding_qtype`` is ``"Q8_0"`` (a tied
    model's Q4_x file with a Q8_0 table, as the packaged SmolLM2), float otherwise.

    DeepSeek (``deepseek2``) only: ``legacy_mla`` writes the layout of files converted before
    llama.cpp's MLA cache (whole ``attn_kv_b``, per-head widths in ``key_length``/``value_length``,
    no expert-group keys); ``gating`` is ``expert_gating_func`` (2 sigmoid, 1 softmax).
    ``drop``: tensor names left out (files missing a tensor).
    """
    import gguf

    arch = GGUF_ARCH[family]
    cfg = hf.config
    tokens, merges, types = byte_level_vocab()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    if family == "deepseek_v3":
        _deepseek2_metadata(w, cfg, legacy_mla, gating)
    else:
        w.add_head_count_kv(cfg.num_key_value_heads)
        w.add_key_length(
            getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        )
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(rope_theta(cfg))
    if family not in ("llama", "qwen2", "qwen3", "deepseek_v3"):
        experts = getattr(cfg, "num_local_experts", None) or cfg.num_experts
        w.add_expert_count(experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)
        if family != "mixtral":
            w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
            w.add_expert_weights_norm(bool(cfg.norm_topk_prob))
        if family == "qwen2_moe":
            w.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(259)
    for name, a in gguf_tensors(hf, arch, split_kv_b=family == "deepseek_v3" and not legacy_mla):
        if name in drop:
            continue
        a = np.ascontiguousarray(a)
        quantize = (
            qtype is not None
            and a.ndim >= 2
            and a.shape[-1] % 32 == 0
            and "ffn_gate_inp" not in name
        )
        t = qtype
        if name == "token_embd.weight":
            # llama.cpp keeps int4 files' embedding at higher precision (ours: Q8_0 only)
            t = "Q8_0" if "Q8_0" in (qtype, embedding_qtype) else None
            quantize = t is not None and a.shape[-1] % 32 == 0
        if quantize:
            t = gguf.GGMLQuantizationType[t]
            w.add_tensor(name, gguf.quants.quantize(a, t), raw_dtype=t)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _deepseek2_metadata(w, cfg, legacy_mla: bool, gating: int) -> None:
    """The ``deepseek2.*`` keys llama.cpp's converter writes for a DeepseekV3Config."""
    import gguf

    qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    if legacy_mla:
        w.add_head_count_kv(cfg.num_key_value_heads)
        w.add_key_length(qk)
        w.add_value_length(cfg.v_head_dim)
    else:  # MLA as MQA over the latent: one KV head of width r + rope
        w.add_head_count_kv(1)
        w.add_key_length(cfg.kv_lora_rank + cfg.qk_rope_head_dim)
        w.add_value_length(cfg.kv_lora_rank)
        w.add_key_length_mla(qk)
        w.add_value_length_mla(cfg.v_head_dim)
        w.add_expert_group_count(cfg.n_group)
        w.add_expert_group_used_count(cfg.topk_group)
    w.add_vocab_size(cfg.vocab_size)
    w.add_leading_dense_block_count(cfg.first_k_dense_replace)
    if cfg.q_lora_rank is not None:
        w.add_q_lora_rank(cfg.q_lora_rank)
    w.add_kv_lora_rank(cfg.kv_lora_rank)
    w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
    w.add_expert_count(cfg.n_routed_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    w.add_expert_shared_count(cfg.n_shared_experts)
    w.add_expert_weights_scale(cfg.routed_scaling_factor)
    w.add_expert_weights_norm(bool(cfg.norm_topk_prob))
    w.add_expert_gating_func(gguf.ExpertGatingFuncType(gating))
    w.add_rope_dimension_count(cfg.qk_rope_head_dim)
    rope = cfg.rope_parameters
    if rope.get("rope_type") == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        w.add_rope_scaling_yarn_log_mul(0.1 * rope["mscale_all_dim"])


FAMILIES = ["qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe"]


@pytest.mark.parametrize("family", FAMILIES)
def test_gguf_family_matches_transformers(tmp_path, monkeypatch, family):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    hf = hf_model(family_config(family))
    path = tmp_path / f"{family}.gguf"
    write_gguf(path, hf, family)
    loaded = load_model(str(path))
    assert type(loaded.model).__name__ == type(hf).__name__
    run_ragged_scenario(
        loaded.model, hf
    )  # ragged paged batch, every step within 1e-4 of transformers


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe"])
@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0", "Q4_1"])
def test_gguf_moe_native_blocks_match_dequantized(tmp_path, monkeypatch, family, qtype):
    """Quantized files: native (blocks kept, experts included) == dequantized load, and the
    dequantized load == transformers on the dequantized weights (so the names are right)."""
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    hf = hf_model(family_config(family))
    path = tmp_path / f"{family}.gguf"
    write_gguf(path, hf, family, qtype)
    deq = load_model(str(path))
    native = _set_activation_dtype(load_model(str(path), quantization="gguf").model, torch.float32)
    experts = [m for m in native.modules() if isinstance(m, QuantFusedExperts)]
    assert len(experts) == sum(hasattr(layer.mlp, "experts") for layer in native.model.layers) >= 1
    kind = "int8" if qtype == "Q8_0" else "int4"
    assert all(m.kind == kind for e in experts for m in list(e.gate_up) + list(e.down))
    assert all(m.kind == kind for m in native.modules() if isinstance(m, QuantLinear))
    ids = {0: list(range(40, 53)), 1: [5, 17, 99, 3, 42]}
    a = PagedSequences(native, page_size=4).step(ids, all_logits=True)
    b = PagedSequences(deq.model, page_size=4).step(ids, all_logits=True)
    for s in ids:
        torch.testing.assert_close(a[s], b[s], atol=1e-4, rtol=1e-4)
    # the dequantized file's weights put back into transformers give the same logits
    with torch.no_grad():
        hf.load_state_dict(_hf_state_from(deq.model, hf), strict=True)
    run_ragged_scenario(deq.model, hf)


def _hf_state_from(model, hf) -> dict[str, torch.Tensor]:
    """transformers state dict holding our (dequantized) weights: same names in the v5 layout."""
    ours = model.state_dict()
    out = {}
    for k in hf.state_dict():
        src = k if k in ours else "model.embed_tokens.weight"  # tied head
        out[k] = ours[src].clone()
    return out
