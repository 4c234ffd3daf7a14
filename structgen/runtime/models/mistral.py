"""Mistral: Llama without biases, with sliding-window attention (``config.sliding_window``).

Follows transformers' ``modeling_mistral.py``: every layer attends to the last
``sliding_window`` positions (itself included) when the window is set.
"""

from __future__ import annotations

from structgen.runtime.models.decoder import AttentionSpec, DecoderForCausalLM, layer_window

__all__ = ["MistralForCausalLM"]


class MistralForCausalLM(DecoderForCausalLM):
    """Mistral over paged KV; the window is enforced by the paged attention mask."""

    @classmethod
    def attention_spec(cls, config, layer_idx: int) -> AttentionSpec:
        """No biases; the layer's window from the config."""
        return AttentionSpec(sliding_window=layer_window(config, layer_idx))
