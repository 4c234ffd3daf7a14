"""Mixtral: Mistral attention (sliding window) with a top-2 softmax-routed MoE in every layer.

Follows transformers' ``modeling_mixtral.py`` (softmax over experts, top-k,
renormalised). Checkpoints name the block ``block_sparse_moe`` with per-expert
``w1``/``w3``/``w2``; :meth:`MixtralForCausalLM.normalize_state_dict` fuses them.
"""

from __future__ import annotations

from structgen.runtime.models.mistral import MistralForCausalLM
from structgen.runtime.models.moe import SparseMoeBlock, stack_expert_weights

__all__ = ["MixtralForCausalLM"]


class MixtralForCausalLM(MistralForCausalLM):
    """Mixtral over paged KV (experts run grouped through
    :func:`~structgen.runtime.models.moe.fused_moe`).
    """

    @classmethod
    def make_mlp(cls, config, layer_idx: int, dtype, device) -> SparseMoeBlock:
        """A top-k softmax-routed, renormalised MoE of ``num_local_experts`` experts."""
        return SparseMoeBlock(
            config.hidden_size,
            config.num_local_experts,
            config.num_experts_per_tok,
            config.intermediate_size,
            True,
            dtype,
            device,
            act=config.hidden_act,
        )

    @classmethod
    def normalize_state_dict(cls, state, config):
        """Stack ``block_sparse_moe.experts.*.w1/w3/w2`` into the fused ``mlp.experts`` tensors."""
        return stack_expert_weights(
            state, "block_sparse_moe", "mlp", ("w1", "w3", "w2"), config.num_local_experts
        )
