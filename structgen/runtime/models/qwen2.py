"""Qwen2: Llama with biases on the q/k/v projections (not on o_proj).

Follows transformers' ``modeling_qwen2.py``; layers listed as ``sliding_attention``
in ``config.layer_types`` (``use_sliding_window``) use ``config.sliding_window``.
"""

from __future__ import annotations

from structgen.runtime.models.decoder import AttentionSpec, DecoderForCausalLM

__all__ = ["Qwen2ForCausalLM", "qwen2_attention_spec"]


def qwen2_attention_spec(config, layer_idx: int) -> AttentionSpec:
    """q/k/v bias, no o bias; the window only on ``sliding_attention`` layers."""
    types = getattr(config, "layer_types", None) or []
    sliding = layer_idx < len(types) and types[layer_idx] == "sliding_attention"
    return AttentionSpec(
        qkv_bias=True, o_bias=False, sliding_window=config.sliding_window if sliding else None
    )


class Qwen2ForCausalLM(DecoderForCausalLM):
    """Qwen2 / Qwen2.5 over paged KV."""

    @classmethod
    def attention_spec(cls, config, layer_idx: int) -> AttentionSpec:
        """See :func:`qwen2_attention_spec`."""
        return qwen2_attention_spec(config, layer_idx)
