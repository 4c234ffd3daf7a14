"""DeepSeek-V3: multi-head latent attention, fine-grained routed experts plus shared experts.

Follows transformers' ``modeling_deepseek_v3.py``: layers ``< first_k_dense_replace``
have a dense SwiGLU MLP of ``intermediate_size``; the others a
:class:`~structgen.runtime.models.moe.SharedExpertMoeBlock` of ``n_routed_experts``
experts of width ``moe_intermediate_size`` (sigmoid, group-limited top-k routing with
``n_group``/``topk_group``, ``routed_scaling_factor``) plus ``n_shared_experts`` shared
ones. Attention is :class:`~structgen.runtime.models.mla.MultiHeadLatentAttention`, so
the KV pool is a :class:`~structgen.runtime.models.mla.LatentKVPool` (compressed cache).
Multi-token-prediction layers are not loaded (not needed for next-token decoding).
"""

from __future__ import annotations

import torch

from structgen.runtime.config import torch_dtype
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.models.decoder import DecoderForCausalLM
from structgen.runtime.models.layers import GatedMLP
from structgen.runtime.models.mla import LatentKVPool, MultiHeadLatentAttention
from structgen.runtime.models.moe import (
    GroupedTopkRouter,
    SharedExpertMoeBlock,
    stack_expert_weights,
)

__all__ = ["DeepseekV3ForCausalLM"]


class DeepseekV3ForCausalLM(DecoderForCausalLM):
    """DeepSeek-V3 / R1 (and V3-shaped checkpoints) over a compressed paged KV cache."""

    @classmethod
    def make_attention(cls, config, layer_idx: int, dtype, device):
        """Multi-head latent attention (every layer)."""
        return MultiHeadLatentAttention(config, layer_idx, dtype, device)

    @classmethod
    def make_mlp(cls, config, layer_idx: int, dtype, device):
        """A dense SwiGLU MLP below ``first_k_dense_replace``, else routed plus shared experts."""
        if layer_idx < int(config.first_k_dense_replace or 0):
            return GatedMLP(
                config.hidden_size,
                config.intermediate_size,
                False,
                config.hidden_act,
                dtype,
                device,
            )
        router = GroupedTopkRouter(
            config.hidden_size,
            config.n_routed_experts,
            config.num_experts_per_tok,
            int(config.n_group or 1),
            int(config.topk_group or 1),
            bool(config.norm_topk_prob),
            float(config.routed_scaling_factor),
            device,
        )
        return SharedExpertMoeBlock(
            router,
            config.hidden_size,
            config.n_routed_experts,
            config.moe_intermediate_size,
            config.moe_intermediate_size * config.n_shared_experts,
            config.hidden_act,
            dtype,
            device,
        )

    @classmethod
    def normalize_state_dict(cls, state, config):
        """Per-expert tensors -> fused; drop multi-token-prediction layers (index >=
        num_hidden_layers).
        """
        n = config.num_hidden_layers
        state = {
            k: v
            for k, v in state.items()
            if not (k.startswith("model.layers.") and int(k.split(".")[2]) >= n)
        }
        return stack_expert_weights(
            state, "mlp", "mlp", ("gate_proj", "up_proj", "down_proj"), config.n_routed_experts
        )

    @property
    def num_kv_heads(self) -> int:
        """One latent "head" per token."""
        return 1

    @property
    def head_dim(self) -> int:
        """Width of a cached latent row: ``kv_lora_rank + qk_rope_head_dim``."""
        return self.config.kv_lora_rank + self.config.qk_rope_head_dim

    def make_kv_pool(
        self,
        num_pages: int,
        page_size: int,
        growth_pages: int | None = None,
        kv_dtype: torch.dtype | str | None = None,
    ) -> KVPool:
        """A :class:`LatentKVPool` (compressed MLA cache) in ``kv_dtype`` (a torch dtype or
        its name; None = the model's dtype) on the model's device (``growth_pages`` as for
        ``KVPool``).
        """
        return LatentKVPool(
            self.config.num_hidden_layers,
            num_pages,
            page_size,
            self.config.kv_lora_rank,
            self.config.qk_rope_head_dim,
            self.dtype if kv_dtype is None else torch_dtype(kv_dtype),
            self.device,
            growth_pages,
        )
