"""Mixture-of-experts building blocks: batched top-k routing, grouped expert compute.

Layout (transformers v5 names): ``experts.gate_up_proj`` ``[E, 2*I, hidden]`` (gate
rows first, then up), ``experts.down_proj`` ``[E, hidden, I]``, router ``gate.weight``
``[E, hidden]``. :func:`fused_moe` is the dispatch: the Triton ``fused_moe`` kernel
(``structgen.kernels.fused_moe``, whose ``fused_moe_ref`` is the op's one reference) where
:func:`~structgen.runtime.models.attention.use_triton` says so, else :func:`fused_moe_torch`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from structgen.runtime.models.attention import use_triton
from structgen.runtime.models.layers import GatedMLP, Linear

__all__ = [
    "is_sparse_layer",
    "route_topk",
    "route_grouped_sigmoid",
    "fused_moe_torch",
    "fused_moe",
    "FusedExperts",
    "SparseMoeBlock",
    "GroupedTopkRouter",
    "SharedExpertMoeBlock",
    "stack_expert_weights",
]


def route_topk(
    router_logits: torch.Tensor, top_k: int, renormalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax (float32) over experts, then the top-k, optionally renormalised to sum 1.

    Args:
        router_logits: ``[T, E]``.
        top_k: experts per token.
        renormalize: divide the top-k probabilities by their sum (Mixtral; Qwen-MoE's
            ``norm_topk_prob``).

    Returns:
        ``(topk_weights [T, k] float32, topk_ids [T, k] int64)``.
    """
    probs = torch.softmax(router_logits.float(), dim=-1)  # [T, E]
    weights, ids = torch.topk(probs, top_k, dim=-1)  # [T, k]
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def route_grouped_sigmoid(
    router_logits: torch.Tensor,
    top_k: int,
    num_groups: int,
    topk_groups: int,
    correction_bias: torch.Tensor | None,
    renormalize: bool,
    scaling: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3 routing ("noaux_tc"): sigmoid scores, group-limited top-k, scaled weights.

    Experts are split into ``num_groups`` equal groups; a group's score is the sum of its
    two best bias-corrected scores; only the ``topk_groups`` best groups stay eligible, and
    the top-k experts among them are chosen by bias-corrected score. The weights are the
    uncorrected sigmoid scores of those experts, renormalised to sum 1 (``+1e-20``) if
    ``renormalize``, then multiplied by ``scaling`` (``routed_scaling_factor``).
    Source: DeepSeek-V3 technical report (arXiv:2412.19437) section 2.1.2; transformers'
    ``DeepseekV3TopkRouter``.

    Args:
        router_logits: ``[T, E]`` float32.
        top_k: experts per token.
        num_groups: equal groups the ``E`` experts are split into.
        topk_groups: groups whose experts stay eligible.
        correction_bias: ``[E]`` (``e_score_correction_bias``) or None.
        renormalize: renormalise the chosen weights to sum 1.
        scaling: factor applied to the weights last.

    Returns:
        ``(topk_weights [T, k] float32, topk_ids [T, k] int64)``.
    """
    t, e = router_logits.shape
    scores = router_logits.float().sigmoid()  # [T, E]
    choice = scores if correction_bias is None else scores + correction_bias.float()
    if num_groups > 1 and topk_groups < num_groups:
        grouped = choice.view(t, num_groups, e // num_groups)  # [T, G, E/G]
        group_scores = grouped.topk(min(2, e // num_groups), dim=-1).values.sum(-1)  # [T, G]
        keep = torch.zeros_like(group_scores, dtype=torch.bool)
        keep.scatter_(1, group_scores.topk(topk_groups, dim=-1).indices, True)
        choice = choice.masked_fill(~keep.repeat_interleave(e // num_groups, dim=1), float("-inf"))
    ids = choice.topk(top_k, dim=-1).indices  # [T, k]
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    return weights * scaling, ids


def fused_moe_torch(
    hidden: torch.Tensor,
    w_gate_up: torch.Tensor,
    w_down: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    activation=F.silu,
) -> torch.Tensor:
    """Weighted sum of each token's top-k SwiGLU experts, computed on tokens grouped by expert.

    The CPU (torch) path of :func:`fused_moe`, in ``hidden``'s dtype; it also takes quantized
    experts as callables. Token-expert pairs are sorted by expert (one ``argsort``), so each expert
    runs one matmul over all of its tokens; the only Python loop is over experts.

    Args:
        hidden: ``[T, hidden]``.
        w_gate_up: ``[E, 2*I, hidden]`` (gate rows, then up rows), or a list of ``E``
            modules/callables mapping ``[n, hidden] -> [n, 2*I]`` (quantized experts).
        w_down: ``[E, hidden, I]``, or a list of ``E`` callables ``[n, I] -> [n, hidden]``.
        topk_weights: ``[T, k]`` routing weights.
        topk_ids: ``[T, k]`` int64 expert ids.
        activation: gate activation (SiLU).

    Returns:
        ``[T, hidden]`` in ``hidden``'s dtype.

    Raises:
        never.
    """
    t, k = topk_ids.shape
    num_experts = len(w_gate_up)
    flat_ids = topk_ids.reshape(-1)  # [T*k]
    order = torch.argsort(flat_ids, stable=True)  # [T*k] pairs grouped by expert
    token_of = order // k  # [T*k] token of each sorted pair
    counts = torch.bincount(flat_ids, minlength=num_experts).tolist()  # one host sync per layer
    x = hidden[token_of]  # [T*k, hidden]
    out = torch.empty_like(x)
    start = 0
    for e, n in enumerate(counts):
        if n == 0:
            continue
        xe = x[start : start + n]  # [n, hidden]
        gu = (
            F.linear(xe, w_gate_up[e]) if isinstance(w_gate_up, torch.Tensor) else w_gate_up[e](xe)
        )  # [n, 2I]
        gate, up = gu.chunk(2, dim=-1)
        h = activation(gate) * up  # [n, I]
        out[start : start + n] = (
            F.linear(h, w_down[e]) if isinstance(w_down, torch.Tensor) else w_down[e](h)
        )
        start += n
    out = out * topk_weights.reshape(-1)[order, None].to(out.dtype)  # [T*k, hidden]
    return torch.zeros_like(hidden).index_add_(0, token_of, out)


def fused_moe(hidden, w_gate_up, w_down, topk_weights, topk_ids, activation=F.silu) -> torch.Tensor:
    """Backend dispatch; same contract as :func:`fused_moe_torch`.

    Stacked float weights with the SiLU gate run the Triton ``fused_moe`` kernel where
    :func:`~structgen.runtime.models.attention.use_triton` says so (two grouped GEMMs, fp32
    accumulation; ``topk_weights`` in ``hidden``'s dtype); lists of quantized experts, other
    activations and every other case run :func:`fused_moe_torch`.

    Raises:
        ValueError: (Triton kernel) shape, dtype, device or layout mismatch.
    """
    if activation is F.silu and isinstance(w_gate_up, torch.Tensor) and use_triton(hidden):
        from structgen.kernels.fused_moe import fused_moe as fused_moe_kernel

        return fused_moe_kernel(hidden, w_gate_up, w_down, topk_weights, topk_ids, backend="triton")
    return fused_moe_torch(hidden, w_gate_up, w_down, topk_weights, topk_ids, activation)


class FusedExperts(nn.Module):
    """``E`` SwiGLU experts stored as two 3-D tensors (HF v5 ``gate_up_proj``/``down_proj``)."""

    def __init__(self, num_experts: int, hidden: int, intermediate: int, dtype, device) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.gate_up_proj = nn.Parameter(
            torch.empty(num_experts, 2 * intermediate, hidden, dtype=dtype, device=device),
            requires_grad=False,
        )
        self.down_proj = nn.Parameter(
            torch.empty(num_experts, hidden, intermediate, dtype=dtype, device=device),
            requires_grad=False,
        )

    def forward(
        self, hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor
    ) -> torch.Tensor:
        """Weighted sum of each token's routed experts.

        Args:
            hidden: ``[T, hidden]`` token states.
            topk_weights: ``[T, k]`` routing weights, in ``hidden``'s dtype.
            topk_ids: ``[T, k]`` int expert ids.

        Returns:
            ``[T, hidden]`` in ``hidden``'s dtype.
        """
        return fused_moe(hidden, self.gate_up_proj, self.down_proj, topk_weights, topk_ids)


class SparseMoeBlock(nn.Module):
    """Router + experts, plus an optional shared expert scaled by a sigmoid gate (Qwen-MoE).

    Args:
        hidden: model width.
        num_experts, top_k, intermediate: expert count, experts per token, expert width.
        renormalize: renormalise the top-k weights.
        shared_intermediate: width of the shared expert (0 = none).
    """

    def __init__(
        self,
        hidden: int,
        num_experts: int,
        top_k: int,
        intermediate: int,
        renormalize: bool,
        dtype,
        device,
        shared_intermediate: int = 0,
        act: str = "silu",
    ) -> None:
        super().__init__()
        self.top_k = top_k
        self.renormalize = renormalize
        self.gate = Linear(hidden, num_experts, False, dtype, device)
        self.experts = FusedExperts(num_experts, hidden, intermediate, dtype, device)
        if shared_intermediate:
            self.shared_expert = GatedMLP(hidden, shared_intermediate, False, act, dtype, device)
            self.shared_expert_gate = Linear(hidden, 1, False, dtype, device)
        else:
            self.shared_expert = self.shared_expert_gate = None
        # routing of the last call (tests compare it)
        self.last_topk_ids: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [T, hidden] -> [T, hidden]``; records the routing in ``last_topk_ids``."""
        weights, ids = route_topk(self.gate(x), self.top_k, self.renormalize)  # [T, k] each
        self.last_topk_ids = ids
        out = self.experts(x, weights.to(x.dtype), ids)  # [T, hidden]
        if self.shared_expert is not None:
            out = out + torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
        return out


class GroupedTopkRouter(nn.Module):
    """DeepSeek-V3 router: float32 ``weight`` ``[E, hidden]`` and ``e_score_correction_bias``
    ``[E]``.

    ``forward(x [T, hidden]) -> (weights [T, k] float32, ids [T, k])`` via
    :func:`route_grouped_sigmoid`. Not a ``Linear``, so quantization leaves it in float32.
    """

    def __init__(
        self,
        hidden: int,
        num_experts: int,
        top_k: int,
        num_groups: int,
        topk_groups: int,
        renormalize: bool,
        scaling: float,
        device,
    ) -> None:
        super().__init__()
        self.top_k, self.num_groups, self.topk_groups = top_k, num_groups, topk_groups
        self.renormalize, self.scaling = renormalize, scaling
        self.weight = nn.Parameter(
            torch.empty(num_experts, hidden, device=device), requires_grad=False
        )
        self.register_buffer("e_score_correction_bias", torch.zeros(num_experts, device=device))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [T, hidden] -> (weights [T, k] float32, ids [T, k])``."""
        logits = F.linear(x.float(), self.weight.float())  # [T, E]
        return route_grouped_sigmoid(
            logits,
            self.top_k,
            self.num_groups,
            self.topk_groups,
            self.e_score_correction_bias,
            self.renormalize,
            self.scaling,
        )


class SharedExpertMoeBlock(nn.Module):
    """DeepSeek-style fine-grained MoE: routed experts plus always-on shared experts (no gate).

    ``out = sum_k w_k * expert_k(x) + shared_experts(x)``; the ``n_shared`` shared experts
    are one SwiGLU MLP of width ``n_shared * intermediate`` (as checkpoints store them).
    Source: DeepSeekMoE (arXiv:2401.06066); transformers' ``DeepseekV3MoE``.
    """

    def __init__(
        self,
        router: nn.Module,
        hidden: int,
        num_experts: int,
        intermediate: int,
        shared_intermediate: int,
        act: str,
        dtype,
        device,
    ) -> None:
        super().__init__()
        self.gate = router
        self.experts = FusedExperts(num_experts, hidden, intermediate, dtype, device)
        self.shared_experts = GatedMLP(hidden, shared_intermediate, False, act, dtype, device)
        # routing of the last call (tests compare it)
        self.last_topk_ids: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [T, hidden] -> [T, hidden]``; records the routing in ``last_topk_ids``."""
        weights, ids = self.gate(x)  # [T, k] each
        self.last_topk_ids = ids
        return self.experts(x, weights.to(x.dtype), ids) + self.shared_experts(x)


def is_sparse_layer(config, layer_idx: int) -> bool:
    """Whether layer ``layer_idx`` of a Qwen2-MoE / Qwen3-MoE config has routed experts.

    As transformers: not listed in ``mlp_only_layers``, ``num_experts > 0`` and
    ``(layer_idx + 1) % decoder_sparse_step == 0``; otherwise the layer has a dense MLP.
    """
    step = int(getattr(config, "decoder_sparse_step", 1) or 1)
    return (
        layer_idx not in (getattr(config, "mlp_only_layers", None) or [])
        and config.num_experts > 0
        and (layer_idx + 1) % step == 0
    )


def stack_expert_weights(
    state: dict[str, torch.Tensor],
    old_block: str,
    new_block: str,
    names: tuple[str, str, str],
    num_experts: int,
) -> dict[str, torch.Tensor]:
    """Rewrite per-expert checkpoint tensors into the fused v5 layout (other entries pass through).

    ``{prefix}{old_block}.experts.{e}.{gate}.weight`` / ``{up}`` / ``{down}`` become
    ``{prefix}{new_block}.experts.gate_up_proj`` ``[E, 2I, H]`` and ``.down_proj`` ``[E, H, I]``;
    the rest of ``{old_block}.`` is renamed to ``{new_block}.``.

    Args:
        state: checkpoint tensors (not mutated).
        old_block: module name in the checkpoint (``block_sparse_moe`` for Mixtral, ``mlp``).
        new_block: our module name (``mlp``).
        names: per-expert (gate, up, down) names (``w1, w3, w2`` for Mixtral).
        num_experts: E.
    """
    gate_n, up_n, down_n = names
    out: dict[str, torch.Tensor] = {}
    groups: dict[str, dict[str, torch.Tensor]] = {}
    marker = f".{old_block}.experts."
    for key, value in state.items():
        if marker in key:
            prefix, rest = key.split(marker, 1)
            groups.setdefault(prefix, {})[rest] = value
        elif f".{old_block}." in key:
            out[key.replace(f".{old_block}.", f".{new_block}.", 1)] = value
        else:
            out[key] = value
    for prefix, g in groups.items():
        base = f"{prefix}.{new_block}.experts."
        if "gate_up_proj" in g:  # already fused
            out[base + "gate_up_proj"], out[base + "down_proj"] = g["gate_up_proj"], g["down_proj"]
            continue
        gate_up = [
            torch.cat((g[f"{e}.{gate_n}.weight"], g[f"{e}.{up_n}.weight"]), 0)
            for e in range(num_experts)
        ]
        out[base + "gate_up_proj"] = torch.stack(gate_up)
        out[base + "down_proj"] = torch.stack(
            [g[f"{e}.{down_n}.weight"] for e in range(num_experts)]
        )
    return out
