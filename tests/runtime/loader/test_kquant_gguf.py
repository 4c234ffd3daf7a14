"""A tiny random Llama written as a Q4_K_M-style GGUF (Q4_K attention / gate / up, Q6_K down
and embedding; raw blocks, since ``gguf`` cannot encode K-quants) loads and matches
transformers on the same (reference-dequantized) weights, in float32, bfloat16 and under
``quantization="gguf"`` (K-quants kept quantized there, exactly).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.runtime.loader import load_model
from tests.runtime.loader.test_dequant import random_tensor
from tests.runtime.test_loader import (
    IDS,
    byte_level_vocab,
    llama_cpp_permute,
    logits_of,
    ref_logits,
)

# llama.cpp's Q4_K_M mix, per tensor kind: (ggml type, fp16 scale size)
_MIX = {
    "token_embd": ("Q6_K", 2e-4),
    "attn_q": ("Q4_K", 4e-4),
    "attn_k": ("Q4_K", 4e-4),
    "attn_v": ("Q6_K", 2e-4),
    "attn_output": ("Q4_K", 4e-4),
    "ffn_gate": ("Q4_K", 4e-4),
    "ffn_up": ("Q4_K", 4e-4),
    "ffn_down": ("Q6_K", 2e-4),
}
_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def _unpermute(a: np.ndarray, n_head: int) -> np.ndarray:
    return a.reshape(n_head, a.shape[0] // n_head // 2, 2, -1).swapaxes(1, 2).reshape(a.shape)


def write_kquant_gguf(path, mix: dict[str, tuple[str, float]] | None = None):
    """Write a tiny random Llama (hidden 256, 2 layers) as a GGUF of K-quant blocks at ``path``,
    per tensor kind ``mix`` (default: llama.cpp's Q4_K_M mix ``_MIX``); return the transformers
    model holding the same (reference-dequantized) weights."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=260,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=500.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=259,
        pad_token_id=None,
    )
    torch.manual_seed(0)
    hf = LlamaForCausalLM(cfg).eval()
    mix = mix or _MIX
    tokens, merges, types = byte_level_vocab()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(500.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(259)
    state = hf.state_dict()
    with torch.no_grad():
        for seed, (name, t) in enumerate(state.items()):
            if name == "lm_head.weight":
                continue
            if name == "model.embed_tokens.weight":
                out, kind = "token_embd.weight", "token_embd"
            elif name == "model.norm.weight":
                w.add_tensor("output_norm.weight", t.float().numpy() + 0.05)
                t.add_(0.05)
                continue
            else:
                _, _, layer, rest = name.split(".", 3)
                kind = _NAMES[rest.rsplit(".", 1)[0]]
                out = f"blk.{layer}.{kind}.weight"
                if "norm" in kind:
                    w.add_tensor(out, t.float().numpy() + 0.05)
                    t.add_(0.05)
                    continue
            qtype, scale = mix[kind]
            raw, deq = random_tensor(qtype, tuple(t.shape), seed=seed, scale=scale)
            if kind in ("attn_q", "attn_k"):  # the file holds llama.cpp's rotary row order
                heads = cfg.num_attention_heads if kind == "attn_q" else cfg.num_key_value_heads
                file_rows, deq = deq, _unpermute(deq, heads)
                assert np.array_equal(llama_cpp_permute(deq, heads), file_rows)  # the oracle
            t.copy_(torch.from_numpy(deq))
            n = t.shape[0]
            w.add_tensor(out, raw.reshape(n, -1), raw_dtype=gguf.GGMLQuantizationType[qtype])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    hf.tie_weights()
    return hf


@pytest.fixture(scope="module")
def kquant_model(tmp_path_factory):
    """``(path of the GGUF, the transformers reference holding the same weights)``."""
    path = tmp_path_factory.mktemp("kquant") / "tiny-q4_k_m.gguf"
    return path, write_kquant_gguf(path)


def test_kquant_gguf_float32_matches_transformers(kquant_model, tmp_path, monkeypatch):
    path, hf = kquant_model
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    loaded = load_model(str(path), torch.float32, "cpu")
    ref = ref_logits(hf, IDS)
    assert ref.abs().max() > 0.1  # the weights carry signal (not a vacuous comparison)
    torch.testing.assert_close(logits_of(loaded.model, IDS), ref, atol=1e-4, rtol=1e-4)


def test_kquant_gguf_bfloat16_weights_are_rounded_reference(kquant_model, tmp_path, monkeypatch):
    path, hf = kquant_model
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    loaded = load_model(str(path), torch.bfloat16, "cpu")
    ours = dict(loaded.model.named_parameters())
    emb = ours["model.embed_tokens.weight"]
    assert emb.dtype == torch.bfloat16
    want = hf.model.embed_tokens.weight.detach().to(torch.bfloat16)
    assert torch.equal(emb.view(torch.int16), want.view(torch.int16))


def test_kquant_gguf_native_keeps_q6_k_and_q4_k(kquant_model, tmp_path, monkeypatch):
    """``quantization="gguf"`` on a Q4_K_M file: Q6_K matrices (v, down, the tied embedding) are
    int8 group-16 modules, Q4_K ones (q, k, o, gate, up) int4 "tiles" group-32 modules with
    float32 scales and mins, every weight ggml's to the bit (q/k in transformers' row order);
    with float32 activations the model matches transformers."""
    from structgen.runtime.cpu import quant as cpu_quant
    from structgen.runtime.quantization.linear import (
        QuantEmbedding,
        QuantLinear,
        _set_activation_dtype,
    )

    path, hf = kquant_model
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    native = load_model(str(path), torch.float32, "cpu", quantization="gguf").model
    mods = dict(native.named_modules())
    down = mods["model.layers.1.mlp.down_proj"]
    assert isinstance(down, QuantLinear) and down.kind == "int8" and down.group_size == 16
    ref = hf.model.layers[1].mlp.down_proj.weight.detach()
    assert torch.equal(down.dequantized_weight(), ref)
    assert isinstance(mods["model.embed_tokens"], QuantEmbedding)
    if not cpu_quant.available():
        pytest.skip("Q4_K is kept quantized only with the C kernel")
    layer = hf.model.layers[1]
    for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj", "mlp.gate_proj"):
        mod = mods[f"model.layers.1.{name}"]
        assert isinstance(mod, QuantLinear) and mod.kind == "int4" and mod.group_size == 32
        assert mod.int4_layout == "tiles" and mod.scales.dtype == torch.float32
        ref = layer.get_submodule(name).weight.detach()
        assert torch.equal(mod.dequantized_weight(), ref)  # ggml's = loader.dequant's
    _set_activation_dtype(native, torch.float32)
    torch.testing.assert_close(logits_of(native, IDS), ref_logits(hf, IDS), atol=1e-4, rtol=1e-4)


def test_engine_on_q4_k_decodes_the_dequantized_greedy_tokens(kquant_model, tmp_path, monkeypatch):
    """An Engine on the Q4_K_M file with its blocks kept (Q4_K as int4 rows with float32 scales
    and mins) and exact float32 activations decodes the greedy tokens of the dequantized load,
    with smaller weights."""
    from structgen import Engine, SamplingParams
    from structgen.runtime.cpu import quant as cpu_quant
    from structgen.runtime.quantization.linear import QuantLinear

    if not cpu_quant.available():
        pytest.skip("Q4_K is kept quantized only with the C kernel")
    path, _ = kquant_model
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    common = dict(dtype="float32", max_kv_tokens=256)
    ref = Engine(str(path), quantization=None, **common)
    native = Engine(str(path), quantization="gguf", activation_dtype="float32", **common)
    q4k = [
        m
        for m in native.runner.model.modules()
        if isinstance(m, QuantLinear) and m.kind == "int4" and m.scales.dtype == torch.float32
    ]
    assert len(q4k) >= 10  # q, k, o, gate, up of both layers
    assert native.memory_report()["weight_bytes"] < 0.5 * ref.memory_report()["weight_bytes"]
    p = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    prompts = ["Maria Lopez, 34", "abc"]
    want = [o.token_ids for o in ref.generate(prompts, p)]
    assert [o.token_ids for o in native.generate(prompts, p)] == want
