"""Tensor-parallel layers and the sharding of a loaded decoder (Megatron-LM style).

Follows Shoeybi et al. 2019, "Megatron-LM" (arXiv:1909.08053), section 3: a block's
first projection is split by output columns (each rank computes a slice of the heads /
of the MLP's intermediate features, no communication), its second by input rows (each
rank produces a partial sum of the full output, summed by one all-reduce). Per decoder
layer that is two all-reduces of ``[T, hidden]``: after ``o_proj`` and after
``down_proj`` (or after the MoE block).

* Attention: rank ``r`` owns query heads ``r*H/tp ..`` and the KV heads they read. With
  ``KV >= tp`` the KV heads are split (``KV % tp == 0``); with fewer KV heads than ranks
  each rank keeps the one KV head its query heads use (replicated ``tp/KV`` times;
  ``tp % KV == 0``). The KV pool of a rank holds only its KV heads.
* MLP: ``gate_proj``/``up_proj`` split by rows, ``down_proj`` by columns (row-parallel).
* MoE: expert parallelism. The router runs replicated (same top-k on every rank); rank
  ``r`` owns experts ``[r*E//tp, (r+1)*E//tp)`` and computes only the token-expert pairs
  routed to them; a shared expert is split like an MLP; one all-reduce sums the partial
  outputs (the all-reduce form of the routing exchange: every rank holds every token).
* Embedding and LM head: vocabulary-parallel (``ceil(V/tp)`` rows per rank). The
  embedding zeroes rows outside the rank's range and all-reduces; the LM head computes
  its slice of the logits and gathers them on rank 0, before masking and sampling.

Biases of row-parallel layers are added once (rank 0) before the all-reduce.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from structgen.errors import ConfigError
from structgen.runtime.distributed.group import TPGroup
from structgen.runtime.models.decoder import DecoderAttention, DecoderForCausalLM
from structgen.runtime.models.layers import GatedMLP, Linear
from structgen.runtime.models.moe import FusedExperts, SparseMoeBlock, fused_moe

__all__ = [
    "AllReduceOutput",
    "ExpertParallelExperts",
    "ParallelLMHead",
    "RowParallelLinear",
    "VocabParallelEmbedding",
    "check_shardable",
    "local_kv_heads",
    "shard_model",
]


def _param(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.contiguous().clone(), requires_grad=False)


def _split(n: int, rank: int, world: int) -> tuple[int, int]:
    """``[lo, hi)`` of rank's contiguous share of ``n`` items (uneven shares allowed)."""
    return rank * n // world, (rank + 1) * n // world


def local_kv_heads(num_kv_heads: int, tp: int, rank: int) -> tuple[int, int]:
    """``(first global KV head, count)`` that rank ``rank`` stores (see module doc)."""
    if num_kv_heads >= tp:
        per = num_kv_heads // tp
        return rank * per, per
    return rank * num_kv_heads // tp, 1


class RowParallelLinear(nn.Module):
    """``y = all_reduce(x_r @ W_r.T) + b``: the input features are split across ranks.

    Args:
        weight: ``[out, in/tp]`` this rank's columns of the full weight.
        bias: ``[out]`` the full bias, or None (added by rank 0 only).
        group: the TP group.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, group: TPGroup) -> None:
        super().__init__()
        self.weight = _param(weight)
        self.bias = _param(bias) if bias is not None and group.rank == 0 else None
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[T, out]`` full output of ``x`` ``[T, in/tp]`` (one all-reduce)."""
        y = F.linear(x, self.weight, self.bias)  # [T, out] partial sum
        return self.group.all_reduce(y)


class VocabParallelEmbedding(nn.Module):
    """Embedding whose rows are split across ranks; doubles as the tied output projection.

    Args:
        weight: ``[V, hidden]`` the full embedding (this rank keeps ``ceil(V/tp)`` rows,
            zero-padded on the last rank).
        group: the TP group.
    """

    def __init__(self, weight: torch.Tensor, group: TPGroup) -> None:
        super().__init__()
        self.vocab_size, hidden = weight.shape
        self.shard = -(-self.vocab_size // group.world_size)
        self.start = group.rank * self.shard
        rows = weight[self.start : self.start + self.shard]
        pad = self.shard - rows.shape[0]
        if pad:
            rows = torch.cat((rows, rows.new_zeros(pad, hidden)))
        self.weight = _param(rows)  # [V/tp, hidden]
        self.group = group

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``[T, hidden]`` embeddings of ``input_ids`` ``[T]`` (one all-reduce)."""
        local = input_ids - self.start  # [T]
        inside = (local >= 0) & (local < self.shard)
        x = self.weight[local.clamp(0, self.shard - 1)] * inside[:, None].to(self.weight.dtype)
        return self.group.all_reduce(x)

    def as_linear(self, x: torch.Tensor) -> torch.Tensor:
        """``[R, V]`` logits of ``x`` ``[R, hidden]`` on rank 0 (this rank's slice elsewhere)."""
        return _gather_logits(F.linear(x, self.weight), self.vocab_size, self.group)


class ParallelLMHead(nn.Module):
    """Untied LM head split by vocabulary rows; logits gathered on rank 0.

    Args:
        weight: ``[V, hidden]`` the full head.
        group: the TP group.
    """

    def __init__(self, weight: torch.Tensor, group: TPGroup) -> None:
        super().__init__()
        self.inner = VocabParallelEmbedding(weight, group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[R, V]`` logits on rank 0 (this rank's ``[R, V/tp]`` slice elsewhere)."""
        return self.inner.as_linear(x)


def _gather_logits(local: torch.Tensor, vocab_size: int, group: TPGroup) -> torch.Tensor:
    full = group.gather_last_dim(local.float())  # rank 0: [R, tp * V/tp]
    return full[:, :vocab_size] if group.rank == 0 else local


class ExpertParallelExperts(nn.Module):
    """This rank's experts ``[lo, hi)`` of a :class:`FusedExperts`; a partial output.

    Only the token-expert pairs routed to local experts are computed (grouped through
    :func:`~structgen.runtime.models.moe.fused_moe`, one pair per row); the caller sums
    the ranks' partial outputs.
    """

    def __init__(self, experts: FusedExperts, lo: int, hi: int) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi
        self.num_experts = hi - lo
        self.gate_up_proj = _param(experts.gate_up_proj[lo:hi])  # [E_r, 2I, hidden]
        self.down_proj = _param(experts.down_proj[lo:hi])  # [E_r, hidden, I]

    def forward(
        self, hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor
    ) -> torch.Tensor:
        """``[T, hidden]`` the local experts' weighted contribution (zeros where none)."""
        k = topk_ids.shape[1]
        flat = topk_ids.reshape(-1)  # [T*k]
        pairs = ((flat >= self.lo) & (flat < self.hi)).nonzero().squeeze(1)  # [P] local pairs
        out = torch.zeros_like(hidden)
        if pairs.numel() == 0 or self.num_experts == 0:
            return out
        tok = pairs // k  # [P] token of each pair
        part = fused_moe(
            hidden[tok],
            self.gate_up_proj,
            self.down_proj,
            topk_weights.reshape(-1)[pairs, None],
            (flat[pairs] - self.lo)[:, None],
        )
        return out.index_add_(0, tok, part)  # [T, hidden]


class AllReduceOutput(nn.Module):
    """Wraps a block whose output is a partial sum over ranks: ``all_reduce(block(x))``."""

    def __init__(self, block: nn.Module, group: TPGroup) -> None:
        super().__init__()
        self.block = block
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``all_reduce(block(x))``: ``[T, hidden]``, summed over ranks."""
        return self.group.all_reduce(self.block(x))


# --------------------------------------------------------------------------- sharding
def check_shardable(model: nn.Module, tp: int) -> None:
    """Check (without changing anything) that ``model`` splits over ``tp`` ranks.

    Raises:
        ConfigError: heads, KV heads or an MLP width do not divide by ``tp``, or the model
            has a layer kind tensor parallelism does not know (the message names it).
    """
    if not isinstance(model, DecoderForCausalLM):
        raise ConfigError(
            f"tensor parallelism needs a DecoderForCausalLM, got {type(model).__name__}"
        )
    cfg = model.config
    heads, kv = cfg.num_attention_heads, model.num_kv_heads
    if heads % tp:
        raise ConfigError(
            f"tensor_parallel_size={tp} does not divide the model's {heads} attention heads"
        )
    if kv >= tp and kv % tp:
        raise ConfigError(f"tensor_parallel_size={tp} does not divide the model's {kv} KV heads")
    if kv < tp and tp % kv:
        raise ConfigError(
            f"tensor_parallel_size={tp} is not a multiple of the model's {kv} KV "
            "heads (needed to replicate them)"
        )
    for i, layer in enumerate(model.model.layers):
        if type(layer.self_attn) is not DecoderAttention:
            raise ConfigError(
                f"tensor parallelism does not support layer {i}'s attention "
                f"({type(layer.self_attn).__name__})"
            )
        mlp = layer.mlp
        dense = [mlp] if isinstance(mlp, GatedMLP) else []
        if isinstance(mlp, SparseMoeBlock):
            if not isinstance(mlp.experts, FusedExperts):
                raise ConfigError(f"tensor parallelism needs float experts (layer {i})")
            dense = [mlp.shared_expert] if mlp.shared_expert is not None else []
        elif not dense:
            raise ConfigError(
                f"tensor parallelism does not support layer {i}'s MLP ({type(mlp).__name__})"
            )
        for m in dense:
            width = m.gate_proj.weight.shape[0]
            if width % tp:
                raise ConfigError(
                    f"tensor_parallel_size={tp} does not divide layer {i}'s MLP width {width}"
                )
    for name, mod in model.named_modules():
        if name.endswith(("_proj", "lm_head")) and not isinstance(mod, (Linear, FusedExperts)):
            raise ConfigError(
                f"tensor parallelism needs float weights; {name} is {type(mod).__name__}"
            )


def _shard_rows(lin: Linear, lo: int, hi: int) -> None:
    lin.weight = _param(lin.weight[lo:hi])
    if lin.bias is not None:
        lin.bias = _param(lin.bias[lo:hi])


def _shard_attention(attn: DecoderAttention, group: TPGroup) -> None:
    tp, r, d = group.world_size, group.rank, attn.head_dim
    heads = attn.num_heads // tp
    q0 = r * heads
    kv0, kv_n = local_kv_heads(attn.num_kv_heads, tp, r)
    _shard_rows(attn.q_proj, q0 * d, (q0 + heads) * d)
    _shard_rows(attn.k_proj, kv0 * d, (kv0 + kv_n) * d)
    _shard_rows(attn.v_proj, kv0 * d, (kv0 + kv_n) * d)
    o = attn.o_proj
    attn.o_proj = RowParallelLinear(o.weight[:, q0 * d : (q0 + heads) * d], o.bias, group)
    attn.num_heads, attn.num_kv_heads = heads, kv_n


def _shard_mlp(mlp: GatedMLP, group: TPGroup, reduce: bool) -> None:
    lo, hi = _split(mlp.gate_proj.weight.shape[0], group.rank, group.world_size)
    _shard_rows(mlp.gate_proj, lo, hi)
    _shard_rows(mlp.up_proj, lo, hi)
    down = mlp.down_proj
    if reduce:
        mlp.down_proj = RowParallelLinear(down.weight[:, lo:hi], down.bias, group)
    else:  # a partial output, summed by the enclosing block's all-reduce
        down.weight = _param(down.weight[:, lo:hi])
        if down.bias is not None and group.rank != 0:
            down.bias = None


def shard_model(model: DecoderForCausalLM, group: TPGroup) -> DecoderForCausalLM:
    """Split a loaded float model in place into this rank's shard (see module doc).

    Args:
        model: the full model (every rank loads the same weights).
        group: this rank's TP group.

    Returns:
        ``model``, now computing this rank's share; ``forward`` returns full ``[R, V]``
        logits on rank 0 (a local slice elsewhere).

    Raises:
        ConfigError: as :func:`check_shardable`.
    """
    check_shardable(model, group.world_size)
    tp, r = group.world_size, group.rank
    for layer in model.model.layers:
        _shard_attention(layer.self_attn, group)
        mlp = layer.mlp
        if isinstance(mlp, GatedMLP):
            _shard_mlp(mlp, group, reduce=True)
            continue
        lo, hi = _split(mlp.experts.num_experts, r, tp)
        mlp.experts = ExpertParallelExperts(mlp.experts, lo, hi)
        if mlp.shared_expert is not None:
            _shard_mlp(mlp.shared_expert, group, reduce=False)
        layer.mlp = AllReduceOutput(mlp, group)
    emb = model.model.embed_tokens
    model.model.embed_tokens = VocabParallelEmbedding(emb.weight, group)
    if model.lm_head is not None:
        model.lm_head = ParallelLMHead(model.lm_head.weight, group)
    return model
