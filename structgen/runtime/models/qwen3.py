"""Qwen3: RMSNorm over each head's q and k (``q_norm``/``k_norm``) before RoPE.

Follows transformers' ``modeling_qwen3.py``: all four projections carry a bias iff
``config.attention_bias``; ``sliding_attention`` layers use ``config.sliding_window``.
"""

from __future__ import annotations

from structgen.runtime.models.decoder import AttentionSpec, DecoderForCausalLM

__all__ = ["Qwen3ForCausalLM"]


class Qwen3ForCausalLM(DecoderForCausalLM):
    """Qwen3 (dense) over paged KV."""

    @classmethod
    def attention_spec(cls, config, layer_idx: int) -> AttentionSpec:
        """q/k norm; biases from ``attention_bias``; the window on ``sliding_attention`` layers."""
        bias = bool(getattr(config, "attention_bias", False))
        types = getattr(config, "layer_types", None) or []
        sliding = layer_idx < len(types) and types[layer_idx] == "sliding_attention"
        window = config.sliding_window if sliding else None
        return AttentionSpec(qkv_bias=bias, o_bias=bias, qk_norm=True, sliding_window=window)
