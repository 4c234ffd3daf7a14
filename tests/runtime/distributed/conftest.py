"""Tiny models saved as Hugging Face folders for the tensor-/data-parallel tests."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import build_tiny_tokenizer


def save_tiny(
    path, family: str, heads: int = 4, kv_heads: int = 2, tie: bool = False, extra_vocab: int = 0
) -> str:
    """Save a seeded tiny random model of ``family`` (norms and biases randomised) with the
    tiny tokenizer; returns the folder."""
    import transformers

    tok = build_tiny_tokenizer()
    kw = dict(
        vocab_size=len(tok) + extra_vocab,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    if family == "llama":
        config = transformers.LlamaConfig(**kw)
    elif family == "mixtral":
        config = transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **kw)
    elif family == "qwen2_moe":
        config = transformers.Qwen2MoeConfig(
            num_experts=6,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            decoder_sparse_step=1,
            mlp_only_layers=[1],
            norm_topk_prob=False,
            **kw,
        )
    else:
        raise AssertionError(family)
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    hf.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return str(path)


_SPECS = {
    "llama_gqa": ("llama", 4, 2, False, 0),
    "llama_kv1_tied": ("llama", 4, 1, True, 1),
    "mixtral": ("mixtral", 4, 2, False, 0),
    "qwen2_moe": ("qwen2_moe", 4, 2, False, 0),
}


class _LazyModels(dict):
    """Creates each model folder on first use."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> str:
        family, heads, kv, tie, extra = _SPECS[name]
        self[name] = save_tiny(self.root / name, family, heads, kv, tie=tie, extra_vocab=extra)
        return self[name]


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
    """name -> folder (made on first use): GQA Llama (kv 2), MQA Llama (kv 1 < tp, tied
    embeddings, odd vocabulary), Mixtral (4 experts, top-2), Qwen2-MoE (shared expert,
    one dense layer)."""
    return _LazyModels(tmp_path_factory.mktemp("tp_models"))
