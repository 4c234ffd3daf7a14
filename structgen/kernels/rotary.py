"""rotary: rotary position embedding applied in place to q and k (rotate-half layout).

``cos``/``sin`` are the model's per-token tables ``[T, rotary_dim]`` in the Hugging Face
layout (``cat(freqs, freqs)``, see ``RotaryEmbedding``). Only the first ``rotary_dim``
dims of each head rotate (partial rotary, e.g. Phi / GPT-NeoX); the rest pass through.
Math in float32, one rounding to the tensor's dtype. One program per token.
"""

from __future__ import annotations

import torch

from structgen.kernels._triton import (
    check,
    check_same_device,
    jit,
    launch,
    next_pow2,
    resolve_backend,
    tl,
)

__all__ = ["rotary", "rotary_ref"]


def rotary_ref(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Rotate ``q`` ``[T, heads, d]`` and ``k`` ``[T, kv_heads, d]`` in place (torch reference).

    Args:
        q: ``[T, heads, d]`` queries, modified in place.
        k: ``[T, kv_heads, d]`` keys, modified in place.
        cos: ``[T, rotary_dim]`` (``rotary_dim`` even, ``<= d``).
        sin: ``[T, rotary_dim]``.
    """
    rd = cos.shape[-1]
    half = rd // 2
    c = cos.float()[:, None, :half]  # [T, 1, rd/2]
    s = sin.float()[:, None, :half]
    for x in (q, k):
        x1 = x[..., :half].float()
        x2 = x[..., half:rd].float()
        out1 = x1 * c - x2 * s
        out2 = x2 * c + x1 * s
        x[..., :half] = out1.to(x.dtype)
        x[..., half:rd] = out2.to(x.dtype)


@jit
def _rotary_kernel(
    x_ptr,  # [T, H, D]
    cos_ptr,  # [T, RD]
    sin_ptr,
    stride_xt,
    stride_xh,
    stride_ct,
    stride_st,
    NUM_HEADS: tl.constexpr,
    HALF: tl.constexpr,  # rotary_dim // 2
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    offs_h = tl.arange(0, BLOCK_H)
    offs_r = tl.arange(0, BLOCK_HALF)
    r_mask = offs_r < HALF
    c = tl.load(cos_ptr + t * stride_ct + offs_r, mask=r_mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + t * stride_st + offs_r, mask=r_mask, other=0.0).to(tl.float32)
    mask = (offs_h[:, None] < NUM_HEADS) & r_mask[None, :]
    p1 = (
        x_ptr + t * stride_xt + offs_h[:, None] * stride_xh + offs_r[None, :]
    )  # [BLOCK_H, BLOCK_HALF]
    x1 = tl.load(p1, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(p1 + HALF, mask=mask, other=0.0).to(tl.float32)
    out1 = x1 * c[None, :] - x2 * s[None, :]
    out2 = x2 * c[None, :] + x1 * s[None, :]
    tl.store(p1, out1.to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(p1 + HALF, out2.to(x_ptr.dtype.element_ty), mask=mask)


def _rotary_triton(q, k, cos, sin) -> None:
    check(q.dim() == 3 and k.dim() == 3 and q.shape[0] == k.shape[0], "q/k must be [T, heads, d]")
    check(q.shape[2] == k.shape[2], "q and k must share head_dim")
    check(
        cos.dim() == 2 and cos.shape == sin.shape and cos.shape[0] == q.shape[0],
        "cos/sin must be [T, rotary_dim]",
    )
    rd = cos.shape[1]
    check(
        rd % 2 == 0 and rd <= q.shape[2],
        f"rotary_dim {rd} must be even and <= head_dim {q.shape[2]}",
    )
    check(q.stride(2) == 1 and k.stride(2) == 1, "q/k head_dim must be contiguous (in place)")
    check(cos.stride(1) == 1 and sin.stride(1) == 1, "cos/sin must be contiguous along rotary_dim")
    check_same_device(q=q, k=k, cos=cos, sin=sin)
    if q.shape[0] == 0 or rd == 0:
        return
    for x in (q, k):
        launch(
            _rotary_kernel,
            (x.shape[0],),
            x.device,
            x, cos, sin, x.stride(0), x.stride(1), cos.stride(0), sin.stride(0),
            NUM_HEADS=x.shape[1], HALF=rd // 2,
            BLOCK_H=next_pow2(x.shape[1]), BLOCK_HALF=next_pow2(rd // 2),
        )  # fmt: skip


def rotary(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    backend: str = "auto",
) -> None:
    """Apply RoPE in place; same contract as :func:`rotary_ref`.

    Raises:
        ValueError: (Triton backend) shape, device or layout mismatch.
    """
    if resolve_backend(backend, q.device) == "triton":
        _rotary_triton(q, k, cos, sin)
    else:
        rotary_ref(q, k, cos, sin)
