"""Llama (and Llama-shaped checkpoints such as SmolLM2) over the paged KV pool.

Follows transformers' ``modeling_llama.py`` (the reference for logits): every
projection carries a bias iff ``config.attention_bias``; RoPE scaling variants
(llama3, YaRN, linear) come from :class:`~structgen.runtime.models.layers.RotaryEmbedding`.
The decoder itself lives in :mod:`structgen.runtime.models.decoder`.
"""

from __future__ import annotations

from structgen.runtime.models.decoder import DecoderForCausalLM

__all__ = ["LlamaForCausalLM"]


class LlamaForCausalLM(DecoderForCausalLM):
    """Our Llama: ``forward(batch, kv) -> logits`` (all behaviour is the decoder's default)."""
