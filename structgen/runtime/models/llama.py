"""Llama decoder over the paged KV pool (also the base of Mistral/Qwen2-style models).

Follows transformers' ``modeling_llama.py`` (the reference for logits) with the same
parameter names, so ``load_state_dict`` accepts a transformers checkpoint.
"""

from __future__ import annotations

import torch
from torch import nn

from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.models.attention import paged_attention, store_kv
from structgen.runtime.models.layers import GatedMLP, Linear, RMSNorm, RotaryEmbedding, apply_rotary

__all__ = ["LlamaForCausalLM", "LlamaAttention", "LlamaDecoderLayer", "LlamaModel"]


def _head_dim(config) -> int:
    hd = getattr(config, "head_dim", None)
    return int(hd) if hd else config.hidden_size // config.num_attention_heads


class LlamaAttention(nn.Module):
    """Grouped-query self-attention (MHA, GQA and MQA) with RoPE over paged KV."""

    def __init__(self, config, layer_idx: int, dtype, device) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = getattr(config, "num_key_value_heads", None) or self.num_heads
        self.head_dim = _head_dim(config)
        self.scale = self.head_dim**-0.5
        bias = bool(getattr(config, "attention_bias", False))
        h = config.hidden_size
        self.q_proj = Linear(h, self.num_heads * self.head_dim, bias, dtype, device)
        self.k_proj = Linear(h, self.num_kv_heads * self.head_dim, bias, dtype, device)
        self.v_proj = Linear(h, self.num_kv_heads * self.head_dim, bias, dtype, device)
        self.o_proj = Linear(self.num_heads * self.head_dim, h, bias, dtype, device)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, batch: ForwardBatch, kv: KVPool) -> torch.Tensor:
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.num_heads, self.head_dim)  # [T, H, d]
        k = self.k_proj(x).view(t, self.num_kv_heads, self.head_dim)  # [T, KVH, d]
        v = self.v_proj(x).view(t, self.num_kv_heads, self.head_dim)  # [T, KVH, d]
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        k_slots, v_slots = kv.k_slots(self.layer_idx), kv.v_slots(self.layer_idx)
        store_kv(k, v, k_slots, v_slots, batch.out_slots)
        o = paged_attention(q, k_slots, v_slots, batch, self.scale)  # [T, H, d]
        return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))


class LlamaDecoderLayer(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``."""

    def __init__(self, config, layer_idx: int, dtype, device) -> None:
        super().__init__()
        h = config.hidden_size
        self.self_attn = LlamaAttention(config, layer_idx, dtype, device)
        self.mlp = GatedMLP(
            h, config.intermediate_size, bool(getattr(config, "mlp_bias", False)), config.hidden_act, dtype, device
        )
        self.input_layernorm = RMSNorm(h, config.rms_norm_eps, dtype, device)
        self.post_attention_layernorm = RMSNorm(h, config.rms_norm_eps, dtype, device)

    def forward(self, x, cos, sin, batch: ForwardBatch, kv: KVPool) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, batch, kv)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    """Embedding, decoder layers and final norm (HF name ``model``)."""

    def __init__(self, config, dtype, device) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, dtype=dtype, device=device, _weight=torch.empty(
            config.vocab_size, config.hidden_size, dtype=dtype, device=device))
        self.embed_tokens.weight.requires_grad_(False)
        self.layers = nn.ModuleList(
            [LlamaDecoderLayer(config, i, dtype, device) for i in range(config.num_hidden_layers)]
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype, device)


class LlamaForCausalLM(nn.Module):
    """Our Llama: ``forward(batch, kv) -> logits`` over a paged KV pool.

    Args:
        config: a transformers ``LlamaConfig`` (or any config with the same fields).
        dtype: parameter and compute dtype.
        device: torch device.

    Tied embeddings (``config.tie_word_embeddings``): there is no ``lm_head``
    parameter; the output projection uses ``model.embed_tokens.weight``, and a
    ``lm_head.weight`` entry in a loaded state dict is ignored.
    """

    def __init__(self, config, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> None:
        super().__init__()
        self.config = config
        self.dtype = dtype
        self.device = torch.device(device)
        self.tie_word_embeddings = bool(getattr(config, "tie_word_embeddings", False))
        self.model = LlamaModel(config, dtype, self.device)
        self.lm_head = None if self.tie_word_embeddings else Linear(
            config.hidden_size, config.vocab_size, False, dtype, self.device
        )
        self.rotary = RotaryEmbedding(config, _head_dim(config), self.device)
        self._register_load_state_dict_pre_hook(self._drop_tied_head)

    def _drop_tied_head(self, state_dict, prefix, *args, **kwargs) -> None:
        if self.tie_word_embeddings:
            state_dict.pop(prefix + "lm_head.weight", None)

    @property
    def num_kv_heads(self) -> int:
        """KV heads per layer (what a KVPool for this model needs)."""
        return getattr(self.config, "num_key_value_heads", None) or self.config.num_attention_heads

    @property
    def head_dim(self) -> int:
        """Dimension of one attention head."""
        return _head_dim(self.config)

    def make_kv_pool(self, num_pages: int, page_size: int) -> KVPool:
        """A KVPool shaped for this model, in its dtype and on its device."""
        return KVPool(
            self.config.num_hidden_layers, num_pages, page_size, self.num_kv_heads, self.head_dim, self.dtype, self.device
        )

    def output_weight(self) -> torch.Tensor:
        """``[vocab, hidden]`` output projection (the embedding when tied)."""
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, kv: KVPool) -> torch.Tensor:
        """Run one ragged step.

        Writes the new tokens' K/V into ``kv`` at ``batch.out_slots`` (mutates ``kv``),
        and attends each new token to its sequence's cached and new tokens.

        Args:
            batch: step metadata (``batch.page_size`` must equal ``kv.page_size``).
            kv: the KV pool, shaped for this model.

        Returns:
            ``[len(batch.logits_indices), vocab_size]`` float32 logits.
        """
        positions = batch.positions
        self.rotary.ensure(int(positions.max()) + 1 if positions.numel() else 0)
        x = self.model.embed_tokens.weight[batch.input_ids]  # [T, hidden]
        cos, sin = self.rotary(positions, x.dtype)  # [T, 1, d]
        for layer in self.model.layers:
            x = layer(x, cos, sin, batch, kv)
        x = self.model.norm(x[batch.logits_indices])  # [R, hidden]
        return torch.nn.functional.linear(x, self.output_weight()).float()  # [R, vocab]
