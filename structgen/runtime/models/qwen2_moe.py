"""Qwen2-MoE: Qwen2 attention with top-k routed experts plus a sigmoid-gated shared expert.

Follows transformers' ``modeling_qwen2_moe.py``: layer ``i`` is sparse when it is
not in ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``, else a dense
MLP of ``intermediate_size``; top-k weights are renormalised iff ``norm_topk_prob``.
"""

from __future__ import annotations

from structgen.runtime.models.decoder import AttentionSpec, DecoderForCausalLM
from structgen.runtime.models.layers import GatedMLP
from structgen.runtime.models.moe import SparseMoeBlock, is_sparse_layer, stack_expert_weights
from structgen.runtime.models.qwen2 import qwen2_attention_spec

__all__ = ["Qwen2MoeForCausalLM"]


class Qwen2MoeForCausalLM(DecoderForCausalLM):
    """Qwen2-MoE / Qwen1.5-MoE over paged KV."""

    @classmethod
    def attention_spec(cls, config, layer_idx: int) -> AttentionSpec:
        """Qwen2's, with the q/k/v bias from ``config.qkv_bias`` (default on)."""
        spec = qwen2_attention_spec(config, layer_idx)
        spec.qkv_bias = bool(getattr(config, "qkv_bias", True))
        return spec

    @classmethod
    def make_mlp(cls, config, layer_idx: int, dtype, device):
        """A dense MLP on non-sparse layers, else routed experts plus a gated shared expert."""
        if not is_sparse_layer(config, layer_idx):
            return GatedMLP(
                config.hidden_size,
                config.intermediate_size,
                False,
                config.hidden_act,
                dtype,
                device,
            )
        return SparseMoeBlock(
            config.hidden_size,
            config.num_experts,
            config.num_experts_per_tok,
            config.moe_intermediate_size,
            bool(config.norm_topk_prob),
            dtype,
            device,
            shared_intermediate=int(getattr(config, "shared_expert_intermediate_size", 0) or 0),
            act=config.hidden_act,
        )

    @classmethod
    def normalize_state_dict(cls, state, config):
        """Stack per-expert ``gate_proj``/``up_proj``/``down_proj`` into fused tensors."""
        return stack_expert_weights(
            state, "mlp", "mlp", ("gate_proj", "up_proj", "down_proj"), config.num_experts
        )
