"""The pre-norm decoder shared by every family (Llama, Mistral, Qwen2, Qwen3, Mixtral, Qwen2-MoE).

A family is a subclass of :class:`DecoderForCausalLM` that overrides a few hooks
(attention biases, q/k norm, sliding window, which MLP a layer gets); the
attention, the layer loop, tied embeddings and the KV pool are written once here.
Parameter names follow transformers (v5 layout), so ``load_state_dict`` takes a
transformers model's state dict as is; :meth:`DecoderForCausalLM.normalize_state_dict`
maps older checkpoint layouts (per-expert MoE tensors) onto it.
"""

from __future__ import annotations

import torch
from torch import nn

from structgen.runtime.config import torch_dtype
from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.cpu.decode_step import decode_step
from structgen.runtime.cpu.decoder import CpuDecoder, cpu_decoder
from structgen.runtime.cpu.dense import linear
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.models.attention import cpu_attention, paged_attention, store_kv, use_triton
from structgen.runtime.models.layers import (
    FusedProjection,
    GatedMLP,
    Linear,
    RMSNorm,
    RotaryEmbedding,
    apply_rotary,
    rotate_qk,
)

__all__ = [
    "AttentionSpec",
    "DecoderAttention",
    "DecoderLayer",
    "DecoderModel",
    "DecoderForCausalLM",
    "head_dim_of",
    "layer_window",
]


def head_dim_of(config) -> int:
    """``config.head_dim`` if set, else ``hidden_size // num_attention_heads``."""
    hd = getattr(config, "head_dim", None)
    return int(hd) if hd else config.hidden_size // config.num_attention_heads


class AttentionSpec:
    """What differs between families' attention blocks (plain values, decided per layer).

    Attributes:
        qkv_bias: q/k/v projections have a bias.
        o_bias: the output projection has a bias.
        qk_norm: RMSNorm over each head's q and k before RoPE (Qwen3: ``q_norm``/``k_norm``).
        sliding_window: None, or the window size of this layer (Mistral).
    """

    def __init__(
        self,
        qkv_bias: bool = False,
        o_bias: bool = False,
        qk_norm: bool = False,
        sliding_window=None,
    ):
        self.qkv_bias, self.o_bias, self.qk_norm = qkv_bias, o_bias, qk_norm
        self.sliding_window = int(sliding_window) if sliding_window else None


class DecoderAttention(nn.Module):
    """Grouped-query self-attention (MHA, GQA at any ratio, MQA) with RoPE over paged KV."""

    def __init__(self, config, layer_idx: int, spec: AttentionSpec, dtype, device) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = getattr(config, "num_key_value_heads", None) or self.num_heads
        self.head_dim = head_dim_of(config)
        self.scale = self.head_dim**-0.5
        self.sliding_window = spec.sliding_window
        h, d = config.hidden_size, self.head_dim
        self.q_proj = Linear(h, self.num_heads * d, spec.qkv_bias, dtype, device)
        self.k_proj = Linear(h, self.num_kv_heads * d, spec.qkv_bias, dtype, device)
        self.v_proj = Linear(h, self.num_kv_heads * d, spec.qkv_bias, dtype, device)
        self.o_proj = Linear(self.num_heads * d, h, spec.o_bias, dtype, device)
        if spec.qk_norm:
            self.q_norm = RMSNorm(d, config.rms_norm_eps, dtype, device)
            self.k_norm = RMSNorm(d, config.rms_norm_eps, dtype, device)
        else:
            self.q_norm = self.k_norm = None
        self.qkv = None

    def fuse(self) -> None:
        """Compute q, k and v in one matmul from now on (see :class:`FusedProjection`)."""
        self.qkv = FusedProjection.build([self.q_proj, self.k_proj, self.v_proj])

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q ``[T, H * d]``, k and v ``[T, KVH * d]`` (column slices of one matmul when fused)."""
        fused = self.qkv
        if fused is not None and fused.valid():
            qkv = fused(x)
            nq, nk = fused.sizes[0], fused.sizes[1]
            return qkv[:, :nq], qkv[:, nq : nq + nk], qkv[:, nq + nk :]
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, batch: ForwardBatch, kv: KVPool
    ) -> torch.Tensor:
        """Attention of a batch's tokens over the paged KV, storing their own k/v first.

        Args:
            x: ``[T, hidden]`` normed hidden states of the batch's tokens.
            cos: ``[T, 1, head_dim]`` rotary table at the tokens' positions.
            sin: ``[T, 1, head_dim]`` likewise.
            batch: the step's forward batch (slots the new k/v go to, attention metadata).
            kv: the KV pool; this layer's k/v slots are written at ``batch.out_slots``.

        Returns:
            ``[T, hidden]`` the output projection of the attention.
        """
        t, heads, kv_heads = x.shape[0], self.num_heads, self.num_kv_heads
        k_slots, v_slots = kv.k_slots(self.layer_idx), kv.v_slots(self.layer_idx)
        if cpu_attention(x) and k_slots.dtype == x.dtype:
            # fused C ops: norm/rotary/store in one call
            q, k, v = self._project(x)
            qn, kn = (
                (None, None) if self.q_norm is None else (self.q_norm.weight, self.k_norm.weight)
            )
            eps = 1e-6 if self.q_norm is None else self.q_norm.eps
            cpu_ops.rope_store_kv(q, k, v, cos, sin, k_slots, v_slots, batch.out_slots, qn, kn, eps)
            o = paged_attention(
                q.view(t, heads, self.head_dim),
                k_slots,
                v_slots,
                batch,
                self.scale,
                self.sliding_window,
            )
            return self.o_proj(o.reshape(t, heads * self.head_dim))
        fused = self.qkv
        if fused is not None and fused.valid() and self.q_norm is None and not use_triton(x):
            qkv = fused(x).view(t, heads + 2 * kv_heads, self.head_dim)  # [T, H + 2 KVH, d]
            qk = apply_rotary(qkv[:, : heads + kv_heads], cos, sin)  # q and k rotated in one pass
            q, k, v = qk[:, :heads], qk[:, heads:], qkv[:, heads + kv_heads :]
        else:
            q, k, v = self._project(x)
            q = q.view(t, heads, self.head_dim)  # [T, H, d]
            k = k.view(t, kv_heads, self.head_dim)  # [T, KVH, d]
            v = v.reshape(t, kv_heads, self.head_dim)  # [T, KVH, d]
            if self.q_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
            q, k = rotate_qk(q, k, cos, sin)  # [T, H, d], [T, KVH, d]
        store_kv(k, v, k_slots, v_slots, batch.out_slots)
        o = paged_attention(
            q, k_slots, v_slots, batch, self.scale, self.sliding_window
        )  # [T, H, d]
        return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))


class DecoderLayer(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``."""

    def __init__(
        self, attn: nn.Module, mlp: nn.Module, hidden: int, eps: float, dtype, device
    ) -> None:
        super().__init__()
        self.self_attn = attn
        self.mlp = mlp
        self.input_layernorm = RMSNorm(hidden, eps, dtype, device)
        self.post_attention_layernorm = RMSNorm(hidden, eps, dtype, device)

    def forward(self, x, cos, sin, batch: ForwardBatch, kv: KVPool) -> torch.Tensor:
        """The block: ``x + attn(norm(x))``, then ``+ mlp(norm(.))``.

        Args:
            x: ``[T, hidden]`` the residual stream.
            cos: ``[T, 1, head_dim]`` rotary table at the tokens' positions.
            sin: ``[T, 1, head_dim]`` likewise.
            batch: the step's forward batch.
            kv: the KV pool (this layer's slots are written).

        Returns:
            ``[T, hidden]`` the residual stream after the block.
        """
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, batch, kv)
        return x + self.mlp(self.post_attention_layernorm(x))

    def forward_residual(
        self, residual: torch.Tensor, delta, cos, sin, batch: ForwardBatch, kv: KVPool
    ) -> torch.Tensor:
        """The same block over a residual stream updated in place (fused add + norm).

        Args:
            residual: ``[T, hidden]`` the residual stream before the previous layer's MLP output
                was added; ``delta`` and this layer's attention output are added to it in place.
            delta: ``[T, hidden]`` the previous layer's MLP output, or None for the first layer.
            cos: ``[T, 1, head_dim]`` rotary table at the tokens' positions.
            sin: ``[T, 1, head_dim]`` likewise.
            batch: the step's forward batch.
            kv: the KV pool (this layer's slots are written).

        Returns:
            ``[T, hidden]`` this layer's MLP output (the next layer's ``delta``).
        """
        norm1, norm2 = self.input_layernorm, self.post_attention_layernorm
        h = cpu_ops.add_rms_norm(residual, delta, norm1.weight, norm1.eps)
        h = cpu_ops.add_rms_norm(
            residual, self.self_attn(h, cos, sin, batch, kv), norm2.weight, norm2.eps
        )
        return self.mlp(h)


class DecoderModel(nn.Module):
    """Embedding, decoder layers and final norm (HF name ``model``)."""

    def __init__(self, config, layers: list[nn.Module], dtype, device) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(
            config.vocab_size,
            config.hidden_size,
            dtype=dtype,
            device=device,
            _weight=torch.empty(config.vocab_size, config.hidden_size, dtype=dtype, device=device),
        )
        self.embed_tokens.weight.requires_grad_(False)
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype, device)


def layer_window(config, layer_idx: int):
    """Sliding window of a layer: from ``config.layer_types`` when present, else
    ``config.sliding_window``.
    """
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if types:
        return window if types[layer_idx] == "sliding_attention" else None
    return window


class DecoderForCausalLM(nn.Module):
    """A decoder-only LM: ``forward(batch, kv) -> logits`` over a paged KV pool.

    Subclasses override :meth:`attention_spec` and :meth:`make_mlp` (and, for
    checkpoints in older layouts, :meth:`normalize_state_dict`).

    Args:
        config: the family's transformers config (or any config with the same fields).
        dtype: parameter and compute dtype.
        device: torch device.

    Tied embeddings (``config.tie_word_embeddings``): there is no ``lm_head``
    parameter; the output projection uses ``model.embed_tokens``, and a
    ``lm_head.weight`` entry in a loaded state dict is ignored.
    """

    def __init__(
        self, config, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__()
        self.config = config
        self.dtype = dtype
        self.device = torch.device(device)
        self.tie_word_embeddings = bool(getattr(config, "tie_word_embeddings", False))
        layers = [
            DecoderLayer(
                self.make_attention(config, i, dtype, self.device),
                self.make_mlp(config, i, dtype, self.device),
                config.hidden_size,
                config.rms_norm_eps,
                dtype,
                self.device,
            )
            for i in range(config.num_hidden_layers)
        ]
        self.model = DecoderModel(config, layers, dtype, self.device)
        self.lm_head = (
            None
            if self.tie_word_embeddings
            else Linear(config.hidden_size, config.vocab_size, False, dtype, self.device)
        )
        self.rotary = RotaryEmbedding(config, head_dim_of(config), self.device)
        self._register_load_state_dict_pre_hook(self._drop_tied_head)

    # ------------------------------------------------------------ family hooks
    @classmethod
    def attention_spec(cls, config, layer_idx: int) -> AttentionSpec:
        """Llama: one ``attention_bias`` flag for all four projections; window from the config."""
        bias = bool(getattr(config, "attention_bias", False))
        return AttentionSpec(
            qkv_bias=bias, o_bias=bias, sliding_window=layer_window(config, layer_idx)
        )

    @classmethod
    def make_attention(cls, config, layer_idx: int, dtype, device) -> nn.Module:
        """The layer's attention block: :class:`DecoderAttention` built from :meth:`attention_spec`
        (DeepSeek overrides it with multi-head latent attention).
        """
        return DecoderAttention(
            config, layer_idx, cls.attention_spec(config, layer_idx), dtype, device
        )

    @classmethod
    def make_mlp(cls, config, layer_idx: int, dtype, device) -> nn.Module:
        """Llama: a SwiGLU MLP of ``config.intermediate_size``."""
        bias = bool(getattr(config, "mlp_bias", False))
        return GatedMLP(
            config.hidden_size, config.intermediate_size, bias, config.hidden_act, dtype, device
        )

    @classmethod
    def normalize_state_dict(
        cls, state: dict[str, torch.Tensor], config
    ) -> dict[str, torch.Tensor]:
        """Map a checkpoint's names/layout onto ours (identity for dense families)."""
        return state

    # ------------------------------------------------------------------ public
    def _drop_tied_head(self, state_dict, prefix, *args, **kwargs) -> None:
        if self.tie_word_embeddings:
            state_dict.pop(prefix + "lm_head.weight", None)

    @property
    def num_kv_heads(self) -> int:
        """KV heads per layer (what a KVPool for this model needs)."""
        return getattr(self.config, "num_key_value_heads", None) or self.config.num_attention_heads

    @property
    def head_dim(self) -> int:
        """Dimension of one attention head."""
        return head_dim_of(self.config)

    def make_kv_pool(
        self,
        num_pages: int,
        page_size: int,
        growth_pages: int | None = None,
        kv_dtype: torch.dtype | str | None = None,
    ) -> KVPool:
        """A KVPool shaped for this model, on its device, storing K/V in ``kv_dtype`` (a
        torch dtype or its name, ``EngineConfig.kv_cache_dtype``; None = the model's dtype)
        (``growth_pages``: None preallocates, else the pool grows on demand in chunks of
        that many pages).
        """
        return KVPool(
            self.config.num_hidden_layers,
            num_pages,
            page_size,
            self.num_kv_heads,
            self.head_dim,
            self.dtype if kv_dtype is None else torch_dtype(kv_dtype),
            self.device,
            growth_pages,
        )

    def fuse_projections(self) -> int:
        """Fuse q/k/v and gate/up of every layer whose projections are plain float Linears.

        Called by the loaders once the weights are in place (after any quantization,
        which leaves its layers unfused). Parameter names and ``state_dict`` are
        unchanged; see :class:`~structgen.runtime.models.layers.FusedProjection`.

        Returns:
            The number of fused groups.
        """
        count = 0
        for module in self.modules():
            if isinstance(module, (DecoderAttention, GatedMLP)):
                module.fuse()
                count += int(
                    (module.qkv if isinstance(module, DecoderAttention) else module.gate_up)
                    is not None
                )
        return count

    def output_weight(self) -> torch.Tensor:
        """``[vocab, hidden]`` output projection (the embedding when tied; float weights only)."""
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``[T, hidden]`` embeddings of ``input_ids`` ``[T]`` (a quantized embedding dequantizes
        its rows).
        """
        emb = self.model.embed_tokens
        return emb(input_ids) if not isinstance(emb, nn.Embedding) else emb.weight[input_ids]

    def project_out(self, x: torch.Tensor) -> torch.Tensor:
        """``[R, vocab]`` logits of the normed hidden states ``x`` ``[R, hidden]``."""
        if self.lm_head is not None:
            return self.lm_head(x)
        emb = self.model.embed_tokens
        if isinstance(emb, nn.Embedding):
            return linear(x, emb.weight)
        return emb.as_linear(x)  # a quantized embedding doubles as the tied output projection

    @torch.inference_mode()
    def host_decoder(self, kv: KVPool) -> CpuDecoder | None:
        """The :class:`~structgen.runtime.cpu.decoder.CpuDecoder` that runs this model's steps
        over ``kv`` on numpy arrays (what :meth:`forward` dispatches to), or None where the
        per-op torch path runs them (not on CPU, or not the default engine's kind of model).
        ``ModelRunner`` calls it to keep the step's batch and logits in numpy. Raises: never.
        """
        return cpu_decoder(self, kv) if self.device.type == "cpu" else None

    def forward(
        self, batch: ForwardBatch, kv: KVPool, *, host_checked: bool = False
    ) -> torch.Tensor:
        """Run one ragged step.

        Writes the new tokens' K/V into ``kv`` at ``batch.out_slots`` (mutates ``kv``),
        and attends each new token to its sequence's cached and new tokens.

        Args:
            batch: step metadata (``batch.page_size`` must equal ``kv.page_size``).
            kv: the KV pool, shaped for this model.
            host_checked: the caller asked :meth:`host_decoder` for this step and got None
                (``ModelRunner``): run the per-op path without asking again.

        Returns:
            ``[len(batch.logits_indices), vocab_size]`` float32 logits.

        On CPU with the default engine's kind of model (every matmul quantized over int8
        activations, tied int8 head: :func:`~structgen.runtime.cpu.decoder.cpu_decoder`) every
        step runs in :class:`~structgen.runtime.cpu.decoder.CpuDecoder` (the fused decode step
        over host arrays), bit for bit the per-op path below, which stays the reference and
        runs everything else.
        """
        if self.device.type == "cpu" and batch.num_tokens and not host_checked:
            decoder = self.host_decoder(kv)
            if decoder is not None:
                return torch.from_numpy(decoder.forward(batch, kv))
        positions = batch.positions
        if not (positions.is_cuda and torch.cuda.is_current_stream_capturing()):
            # (no host sync inside a CUDA graph capture)
            self.rotary.ensure(int(positions.max()) + 1 if positions.numel() else 0)
        x = self.embed(batch.input_ids)  # [T, hidden]
        cos, sin = self.rotary(positions, x.dtype)  # [T, 1, d]
        layers = self.model.layers
        if cpu_ops.enabled(x) and all(type(layer) is DecoderLayer for layer in layers):
            residual = x.contiguous()  # a fresh tensor: updated in place below
            delta = decode_step(
                self, residual, cos, sin, batch, kv
            )  # all layers in one C call, or None
            for layer in layers if delta is None else ():
                delta = layer.forward_residual(residual, delta, cos, sin, batch, kv)
            idx = batch.logits_indices
            x = cpu_ops.add_rms_norm(
                residual[idx], delta[idx], self.model.norm.weight, self.model.norm.eps
            )
            return self.project_out(x).float()  # [R, vocab]
        for layer in layers:
            x = layer(x, cos, sin, batch, kv)
        x = self.model.norm(x[batch.logits_indices])  # [R, hidden]
        return self.project_out(x).float()  # [R, vocab]
