"""fused_moe: top-k mixture-of-experts MLP (SwiGLU experts) as two grouped GEMMs.

Weights (stacked per expert, ``nn.Linear`` layout): ``w_gate_up`` ``[E, 2 * I, H]`` (gate
rows ``0 .. I-1``, up rows ``I .. 2I-1``), ``w_down`` ``[E, H, I]``. Routing comes from
the caller: ``topk_weights``/``topk_ids`` ``[T, top_k]`` (already normalised or not, as
the model family wants).

Steps (as in vLLM/SGLang's fused MoE):

1. align (torch, on device, no host sync): the ``T * top_k`` (token, expert) pairs are
   sorted by expert and each expert's run padded to ``BLOCK_M`` so that every row block
   belongs to one expert (``sorted_pairs`` with a sentinel for padding, ``block_expert``
   with -1 for unused blocks);
2. grouped GEMM 1 with the activation fused: per block, ``silu(x @ Wg.T) * (x @ Wu.T)``
   ``[pairs, I]``;
3. grouped GEMM 2: ``act @ Wd.T`` times the pair's routing weight ``[pairs, H]``;
4. combine: the ``top_k`` rows of each token are summed (torch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from structgen.kernels._triton import (
    cdiv,
    check,
    check_float,
    check_index,
    check_same_device,
    dot_in_f32,
    jit,
    launch,
    resolve_backend,
    tl,
)

__all__ = ["fused_moe", "fused_moe_ref", "moe_align"]


def fused_moe_ref(
    x: torch.Tensor,
    w_gate_up: torch.Tensor,
    w_down: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
) -> torch.Tensor:
    """Top-k SwiGLU MoE (torch reference, float32 math, a loop over experts).

    Args:
        x: ``[T, H]`` tokens.
        w_gate_up: ``[E, 2 * I, H]`` gate then up projections of each expert.
        w_down: ``[E, H, I]`` down projection of each expert.
        topk_weights: ``[T, top_k]`` routing weight of each chosen expert.
        topk_ids: ``[T, top_k]`` int expert ids.

    Returns:
        ``[T, H]`` in ``x.dtype``: ``sum_j w[t, j] * expert_{id[t, j]}(x[t])``.
    """
    inter = w_down.shape[2]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    xf = x.float()
    for e in torch.unique(topk_ids).tolist():
        tok, slot = torch.nonzero(topk_ids == e, as_tuple=True)
        gu = xf[tok] @ w_gate_up[e].float().T  # [n, 2I]
        h = F.silu(gu[:, :inter]) * gu[:, inter:]
        y = h @ w_down[e].float().T  # [n, H]
        out.index_add_(0, tok, y * topk_weights[tok, slot].float()[:, None])
    return out.to(x.dtype)


def moe_align(
    topk_ids: torch.Tensor, num_experts: int, block_m: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort (token, expert) pairs by expert, padding each expert's run to ``block_m``.

    Returns:
        ``sorted_pairs`` ``[num_blocks * block_m]`` int32: flat pair index ``t * top_k + j``
        per row, ``T * top_k`` for padding; ``block_expert`` ``[num_blocks]`` int32: expert
        of each row block, -1 for blocks past the last expert's run. ``num_blocks`` is
        the bound ``cdiv(T * top_k, block_m) + E``, so no host sync is needed.
    """
    flat = topk_ids.reshape(-1).long()  # [P] expert of each pair
    num_pairs = flat.numel()
    dev = flat.device
    counts = torch.bincount(flat, minlength=num_experts)  # [E]
    padded = (counts + block_m - 1) // block_m * block_m
    pad_end = torch.cumsum(padded, 0)  # [E]
    pad_start = pad_end - padded
    order = torch.sort(flat, stable=True).indices  # [P] pairs grouped by expert
    sorted_exp = flat[order]
    run_start = torch.cumsum(counts, 0) - counts  # [E] first sorted index of each expert
    rank = torch.arange(num_pairs, device=dev) - run_start[sorted_exp]
    num_blocks = cdiv(num_pairs, block_m) + num_experts
    sorted_pairs = torch.full((num_blocks * block_m,), num_pairs, dtype=torch.int32, device=dev)
    sorted_pairs[pad_start[sorted_exp] + rank] = order.to(torch.int32)
    block_start = torch.arange(num_blocks, device=dev) * block_m
    block_expert = torch.searchsorted(pad_end, block_start, right=True)  # [num_blocks]
    block_expert = torch.where(block_expert < num_experts, block_expert, -1).to(torch.int32)
    return sorted_pairs, block_expert


@jit
def _moe_gemm_kernel(
    a_ptr,  # GATE_UP: x [T, K]; else act [P, K]
    w_ptr,  # [E, N_w, K]
    out_ptr,  # [P, N]
    sorted_pairs_ptr,  # [num_blocks * BLOCK_M]
    block_expert_ptr,  # [num_blocks]
    topk_w_ptr,  # [P] routing weights (not GATE_UP)
    N,  # output columns (I for GATE_UP, H otherwise)
    K,
    num_pairs,
    stride_am,
    stride_we,
    stride_wn,
    stride_om,
    TOP_K: tl.constexpr,
    GATE_UP: tl.constexpr,  # rows n and N + n of w, silu(gate) * up
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert >= 0:
        pairs = tl.load(sorted_pairs_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))  # [BLOCK_M]
        p_mask = pairs < num_pairs
        if GATE_UP:
            a_rows = (pairs // TOP_K).to(tl.int64)  # token of each pair
        else:
            a_rows = pairs.to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        n_mask = offs_n < N
        w_base = w_ptr + expert.to(tl.int64) * stride_we
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        acc_up = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            k_mask = offs_k < K
            a = tl.load(
                a_ptr + a_rows[:, None] * stride_am + offs_k[None, :],
                mask=p_mask[:, None] & k_mask[None, :],
                other=0.0,
            )  # [BLOCK_M, BLOCK_K]
            wk_mask = k_mask[:, None] & n_mask[None, :]
            w = tl.load(
                w_base + offs_n[None, :] * stride_wn + offs_k[:, None], mask=wk_mask, other=0.0
            )
            if DOT_F32:
                a = a.to(tl.float32)
                w = w.to(tl.float32)
            acc += tl.dot(a, w)
            if GATE_UP:
                wu = tl.load(
                    w_base + (N + offs_n[None, :]) * stride_wn + offs_k[:, None],
                    mask=wk_mask,
                    other=0.0,
                )
                if DOT_F32:
                    wu = wu.to(tl.float32)
                acc_up += tl.dot(a, wu)
        if GATE_UP:
            gate = acc.to(out_ptr.dtype.element_ty).to(tl.float32)  # round like the torch path
            up = acc_up.to(out_ptr.dtype.element_ty).to(tl.float32)
            res = gate / (1.0 + tl.exp(-gate)) * up
        else:
            wt = tl.load(topk_w_ptr + pairs, mask=p_mask, other=0.0).to(tl.float32)
            res = acc * wt[:, None]
        o_ptrs = out_ptr + pairs.to(tl.int64)[:, None] * stride_om + offs_n[None, :]
        tl.store(o_ptrs, res.to(out_ptr.dtype.element_ty), mask=p_mask[:, None] & n_mask[None, :])


def _check_moe_args(x, w_gate_up, w_down, topk_weights, topk_ids) -> None:
    check(
        x.dim() == 2 and w_gate_up.dim() == 3 and w_down.dim() == 3, "x [T, H], weights [E, ., .]"
    )
    num_experts, two_inter, hidden = w_gate_up.shape
    check(two_inter % 2 == 0 and hidden == x.shape[1], f"w_gate_up must be [E, 2I, {x.shape[1]}]")
    check(w_down.shape == (num_experts, hidden, two_inter // 2), "w_down must be [E, H, I]")
    check(x.dtype == w_gate_up.dtype == w_down.dtype, "x and weights must share a dtype")
    check_float("x", x)
    check(
        topk_ids.shape == topk_weights.shape and topk_ids.dim() == 2,
        "topk_ids/weights must be [T, top_k]",
    )
    check(topk_ids.shape[0] == x.shape[0], "topk rows must match tokens")
    check_index(topk_ids=topk_ids)
    check(
        x.stride(1) == 1 and w_gate_up.stride(2) == 1 and w_down.stride(2) == 1,
        "inner dims must be contiguous",
    )
    check_same_device(
        x=x, w_gate_up=w_gate_up, w_down=w_down, topk_weights=topk_weights, topk_ids=topk_ids
    )


def _fused_moe_triton(x, w_gate_up, w_down, topk_weights, topk_ids) -> torch.Tensor:
    _check_moe_args(x, w_gate_up, w_down, topk_weights, topk_ids)
    num_tokens, hidden = x.shape
    num_experts, inter = w_down.shape[0], w_down.shape[2]
    top_k = topk_ids.shape[1]
    num_pairs = num_tokens * top_k
    if num_tokens == 0:
        return torch.zeros_like(x)
    block_m = 16 if (not x.is_cuda or num_pairs <= 64 * num_experts) else 64
    block_n, block_k = (64, 64) if x.is_cuda else (32, 32)
    sorted_pairs, block_expert = moe_align(topk_ids, num_experts, block_m)
    num_blocks = block_expert.shape[0]
    act = torch.empty(num_pairs, inter, dtype=x.dtype, device=x.device)  # [P, I]
    out = torch.empty(num_pairs, hidden, dtype=x.dtype, device=x.device)  # [P, H]
    flat_w = topk_weights.reshape(-1).contiguous()
    common = dict(TOP_K=top_k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                  DOT_F32=dot_in_f32(x.dtype, x.device))  # fmt: skip
    launch(
        _moe_gemm_kernel,
        (num_blocks, cdiv(inter, block_n)),
        x.device,
        x, w_gate_up, act, sorted_pairs, block_expert, flat_w, inter, hidden, num_pairs,
        x.stride(0), w_gate_up.stride(0), w_gate_up.stride(1), act.stride(0),
        GATE_UP=True, **common,
    )  # fmt: skip
    launch(
        _moe_gemm_kernel,
        (num_blocks, cdiv(hidden, block_n)),
        x.device,
        act, w_down, out, sorted_pairs, block_expert, flat_w, hidden, inter, num_pairs,
        act.stride(0), w_down.stride(0), w_down.stride(1), out.stride(0),
        GATE_UP=False, **common,
    )  # fmt: skip
    return out.view(num_tokens, top_k, hidden).sum(1, dtype=torch.float32).to(x.dtype)


def fused_moe(
    x: torch.Tensor,
    w_gate_up: torch.Tensor,
    w_down: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """Top-k SwiGLU MoE; same contract as :func:`fused_moe_ref`.

    Raises:
        ValueError: (Triton backend) shape, dtype, device or layout mismatch.
    """
    if resolve_backend(backend, x.device) == "triton":
        return _fused_moe_triton(x, w_gate_up, w_down, topk_weights, topk_ids)
    return fused_moe_ref(x, w_gate_up, w_down, topk_weights, topk_ids)
