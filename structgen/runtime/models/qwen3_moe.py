"""Qwen3-MoE: Qwen3 attention (per-head q/k RMSNorm) with top-k routed experts, no shared expert.

Follows transformers' ``modeling_qwen3_moe.py``: layer ``i`` is sparse when it is not
in ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0`` (else a dense MLP of
``intermediate_size``); softmax routing over ``num_experts``, top ``num_experts_per_tok``,
renormalised iff ``norm_topk_prob``; ``sliding_window`` (set iff ``use_sliding_window``)
applies to every layer. The router is ``mlp.gate.weight`` ``[E, hidden]``.
"""

from __future__ import annotations

from structgen.runtime.models.decoder import AttentionSpec
from structgen.runtime.models.layers import GatedMLP
from structgen.runtime.models.moe import SparseMoeBlock, is_sparse_layer, stack_expert_weights
from structgen.runtime.models.qwen3 import Qwen3ForCausalLM

__all__ = ["Qwen3MoeForCausalLM"]


class Qwen3MoeForCausalLM(Qwen3ForCausalLM):
    """Qwen3-MoE (e.g. Qwen3-30B-A3B) over paged KV; experts run grouped through ``fused_moe``."""

    @classmethod
    def attention_spec(cls, config, layer_idx: int) -> AttentionSpec:
        """Qwen3's, but the window (set iff ``use_sliding_window``) applies to every layer, as in
        transformers.
        """
        bias = bool(getattr(config, "attention_bias", False))
        return AttentionSpec(
            qkv_bias=bias,
            o_bias=bias,
            qk_norm=True,
            sliding_window=getattr(config, "sliding_window", None),
        )

    @classmethod
    def make_mlp(cls, config, layer_idx: int, dtype, device):
        """A dense MLP on non-sparse layers, else routed experts (no shared expert)."""
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
            act=config.hidden_act,
        )

    @classmethod
    def normalize_state_dict(cls, state, config):
        """Per-expert ``mlp.experts.{e}.{gate,up,down}_proj`` (older checkpoints) -> fused
        tensors.
        """
        return stack_expert_weights(
            state, "mlp", "mlp", ("gate_proj", "up_proj", "down_proj"), config.num_experts
        )
