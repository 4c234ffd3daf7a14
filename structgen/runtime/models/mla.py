"""Multi-head latent attention (DeepSeek-V2/V3) over a compressed, paged KV cache.

Per token and layer the cache holds only the normalised KV latent ``c`` (``kv_lora_rank``
values) and the shared rotary key ``k_rot`` (``qk_rope_head_dim`` values), not per-head
keys and values. Attention runs in the latent space with the up-projection absorbed
(DeepSeek-V2, arXiv:2405.04434, section 2.1.3): with ``kv_b_proj`` split per head into
``W_UK`` ``[H, nope, r]`` and ``W_UV`` ``[H, v, r]``,

    score = (q_nope W_UK) . c + q_rot . k_rot          (= q . [W_UK c, k_rot], transformers' form)
    out_h = W_UV (sum_j p_j c_j)

so the cache is one "KV head" of width ``r + rope`` whose first ``r`` columns double as
the value: :class:`LatentKVPool` stores it once. The attention itself is the paged torch
path (:func:`~structgen.runtime.models.attention_sdpa.paged_attention_sdpa`), which takes
a value narrower than the key.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.models.attention_sdpa import paged_attention_sdpa
from structgen.runtime.models.layers import Linear, RMSNorm

__all__ = [
    "LatentKVPool",
    "LatentUpProjection",
    "MultiHeadLatentAttention",
    "apply_rotary_interleaved",
    "mla_softmax_scale",
]


class LatentKVPool(KVPool):
    """A :class:`KVPool` holding one latent row ``[c (r), k_rot (rope)]`` per token and layer.

    ``k_slots(layer)`` is ``[slots, 1, r + rope]``; ``v_slots(layer)`` is a view of its first
    ``r`` columns (nothing stored twice). Memory: ``num_layers * num_reserved_pages * page_size *
    (r + rope) * itemsize`` bytes. ``growth_pages`` as for :class:`KVPool`.
    """

    v_views_k = True

    def __init__(
        self,
        num_layers: int,
        num_pages: int,
        page_size: int,
        latent_dim: int,
        rope_dim: int,
        dtype: torch.dtype = torch.float32,
        device="cpu",
        growth_pages: int | None = None,
    ) -> None:
        self.latent_dim = latent_dim
        super().__init__(
            num_layers, num_pages, page_size, 1, latent_dim + rope_dim, dtype, device, growth_pages
        )

    def _storage(self, num_pages: int) -> tuple[list, list]:
        """Unwritten latent rows per layer (numpy arrays on the host, tensors on a device:
        ``KVPool._new_array``); the values are views of their first ``r`` columns.
        """
        shape = (num_pages, self.page_size, 1, self.head_dim)
        k = [self._new_array(shape) for _ in range(self.num_layers)]
        return k, [t[..., : self.latent_dim] for t in k]  # views: the latent is the value

    def v_slots(self, layer: int) -> torch.Tensor:
        """Layer's values: the latent columns of the K rows, ``[slots, 1, r]`` (a strided view)."""
        return self.k_slots(layer)[..., : self.latent_dim]

    def nbytes(self) -> int:
        """Bytes held by the latent rows of all layers (the values are views)."""
        return sum(t.nbytes for t in self._k)


def apply_rotary_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on interleaved pairs ``(x0, x1), (x2, x3), ...`` (DeepSeek's ``rope_interleave``).

    Returns the rotated pairs de-interleaved (evens then odds), as transformers'
    ``apply_rotary_pos_emb_interleave`` does; q and k get the same layout, so dot products
    are unchanged. ``x`` ``[T, heads, d]``, ``cos``/``sin`` ``[T, 1, d]`` (``cat(f, f)`` layout).
    """
    half = x.shape[-1] // 2
    c, s = cos[..., :half], sin[..., :half]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def mla_softmax_scale(config) -> float:
    """``qk_head_dim ** -0.5``, times ``mscale**2`` under YaRN with ``mscale_all_dim`` (as
    transformers).
    """
    scale = (config.qk_nope_head_dim + config.qk_rope_head_dim) ** -0.5
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if params.get("rope_type", params.get("type", "default")) != "default":
        mscale_all_dim = params.get("mscale_all_dim", 0)
        factor = params.get("factor", 1.0)
        if mscale_all_dim and factor > 1:
            m = 0.1 * mscale_all_dim * math.log(factor) + 1.0
            scale = scale * m * m
    return scale


class LatentUpProjection(nn.Module):
    """``kv_b_proj``: the ``[H * (nope + v), r]`` latent up-projection, absorbed into q and o.

    Never applied as a linear layer (its weight is split per head and folded into the
    query and the output), so it is not a ``Linear`` and weight quantization leaves it in
    the compute dtype (re-dequantizing it on every step would cost more than it saves).
    """

    def __init__(self, rank: int, out_features: int, dtype, device) -> None:
        super().__init__()
        self.weight = nn.Parameter(
            torch.empty(out_features, rank, dtype=dtype, device=device), requires_grad=False
        )


class MultiHeadLatentAttention(nn.Module):
    """DeepSeek MLA with transformers' parameter names, over a :class:`LatentKVPool`.

    Args:
        config: a ``DeepseekV3Config`` (or V2): ``num_attention_heads``, ``q_lora_rank``
            (None: a plain ``q_proj``), ``kv_lora_rank``, ``qk_nope_head_dim``,
            ``qk_rope_head_dim``, ``v_head_dim``, ``attention_bias``, ``rope_interleave``.
    """

    def __init__(self, config, layer_idx: int, dtype, device) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        h, hid = config.num_attention_heads, config.hidden_size
        self.num_heads, self.rank = h, config.kv_lora_rank
        self.nope, self.rope, self.v_dim = (
            config.qk_nope_head_dim,
            config.qk_rope_head_dim,
            config.v_head_dim,
        )
        self.interleaved = bool(getattr(config, "rope_interleave", False))
        self.scale = mla_softmax_scale(config)
        qk = self.nope + self.rope
        bias = bool(getattr(config, "attention_bias", False))
        self.q_lora_rank = getattr(config, "q_lora_rank", None)
        if self.q_lora_rank is None:
            self.q_proj = Linear(hid, h * qk, False, dtype, device)
        else:
            self.q_a_proj = Linear(hid, self.q_lora_rank, bias, dtype, device)
            self.q_a_layernorm = RMSNorm(self.q_lora_rank, 1e-6, dtype, device)
            self.q_b_proj = Linear(self.q_lora_rank, h * qk, False, dtype, device)
        self.kv_a_proj_with_mqa = Linear(hid, self.rank + self.rope, bias, dtype, device)
        self.kv_a_layernorm = RMSNorm(self.rank, 1e-6, dtype, device)
        self.kv_b_proj = LatentUpProjection(self.rank, h * (self.nope + self.v_dim), dtype, device)
        self.o_proj = Linear(h * self.v_dim, hid, bias, dtype, device)

    def _kv_b_weight(self, dtype) -> torch.Tensor:
        """``[H, nope + v, r]`` up-projection in ``dtype``."""
        return self.kv_b_proj.weight.to(dtype).view(
            self.num_heads, self.nope + self.v_dim, self.rank
        )

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, batch: ForwardBatch, kv: KVPool
    ) -> torch.Tensor:
        """``x`` ``[T, hidden]`` -> ``[T, hidden]``; writes the tokens' latent rows at
        ``batch.out_slots``.
        """
        t = x.shape[0]
        q = (
            self.q_proj(x)
            if self.q_lora_rank is None
            else self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        )
        q_nope, q_rot = q.view(t, self.num_heads, -1).split([self.nope, self.rope], dim=-1)
        c, k_rot = self.kv_a_proj_with_mqa(x).split(
            [self.rank, self.rope], dim=-1
        )  # [T, r], [T, rope]
        c = self.kv_a_layernorm(c)
        rotate = apply_rotary_interleaved if self.interleaved else _rotate_half
        q_rot, k_rot = (
            rotate(q_rot, cos, sin),
            rotate(k_rot.unsqueeze(1), cos, sin),
        )  # [T, H, rope], [T, 1, rope]
        k_slots = kv.k_slots(self.layer_idx)
        k_slots.index_copy_(
            0, batch.out_slots, torch.cat((c.unsqueeze(1), k_rot), -1).to(k_slots.dtype)
        )
        w = self._kv_b_weight(x.dtype)
        w_uk, w_uv = w[:, : self.nope], w[:, self.nope :]  # [H, nope, r], [H, v, r]
        q_lat = torch.einsum("thn,hnr->thr", q_nope, w_uk)  # [T, H, r]
        query = torch.cat((q_lat, q_rot), dim=-1)  # [T, H, r + rope]
        o_lat = paged_attention_sdpa(
            query, k_slots, kv.v_slots(self.layer_idx), batch, self.scale
        )  # [T, H, r]
        o = torch.einsum("thr,hvr->thv", o_lat, w_uv)  # [T, H, v]
        return self.o_proj(o.reshape(t, self.num_heads * self.v_dim))


def _rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    from structgen.runtime.models.layers import apply_rotary

    return apply_rotary(x, cos, sin)
