"""Quantize-on-load: replace a float model's linears (and embedding) by quantized modules."""

from __future__ import annotations

import torch
from torch import nn

from structgen.runtime.models.layers import Linear
from structgen.runtime.quantization.formats import can_pack_int4
from structgen.runtime.quantization.linear import QuantEmbedding, QuantLinear
from structgen.runtime.quantization.methods import QUANTIZATION_METHODS, check_quantization

__all__ = ["QUANTIZATION_METHODS", "quantize_model", "check_quantization"]


@torch.no_grad()
def quantize_model(model: nn.Module, method: str) -> nn.Module:
    """Replace, in place, every ``Linear`` by a :class:`QuantLinear` and the embedding by an int8
    one.

    ``int8``: linears int8 per output channel. ``int4[-gN]``: linears int4 with group N
    (64 by default); the untied ``lm_head`` stays int8 (as llama.cpp keeps the output
    layer at higher precision). The embedding (and so a tied output layer) is int8 per
    row in both. Linears whose shape the int4 packing cannot take (``N % 16 != 0``,
    e.g. MoE routers) fall back to int8. MoE experts (``FusedExperts``) become
    :class:`~structgen.runtime.quantization.experts.QuantFusedExperts` of the same kind;
    float32 routers that are not ``Linear`` (DeepSeek's) stay float.

    Args:
        model: a structgen decoder model (float weights).
        method: see :func:`check_quantization`.

    Returns:
        ``model`` (mutated).

    Raises:
        ConfigError: unknown method.
    """
    kind, group = check_quantization(method)
    if kind is None:
        return model
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, Linear):
                continue
            w, b = child.weight, child.bias
            n, k = w.shape
            child_kind = kind
            if kind == "int4" and (name == "lm_head" or not can_pack_int4(n, k, group)):
                child_kind = "int8"
            q = QuantLinear.quantize(
                w.float(),
                None if b is None else b.detach(),
                child_kind,
                group if child_kind == "int4" else None,
            )
            setattr(parent, name, q)
    from structgen.runtime.models.moe import FusedExperts
    from structgen.runtime.quantization.experts import QuantFusedExperts

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, FusedExperts):
                setattr(parent, name, QuantFusedExperts.quantize(child, kind, group))
    emb = model.model.embed_tokens
    if isinstance(emb, nn.Embedding):
        model.model.embed_tokens = QuantEmbedding.quantize(emb.weight.float()).to_dtype(
            emb.weight.dtype
        )
    return model
