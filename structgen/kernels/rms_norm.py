"""rms_norm: root-mean-square norm over the last axis, optionally fused with the residual add.

Numerics follow transformers' ``LlamaRMSNorm`` (``structgen.runtime.models.layers.RMSNorm`` calls
this module): ``h = x (+ residual)`` rounded to the input dtype, statistics in float32, the
normalised value cast back to the input dtype before the weight multiplies it. One program per row.
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

__all__ = ["add_rms_norm_ref", "rms_norm", "rms_norm_ref"]


def rms_norm_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of ``x`` (or of ``x + residual``), torch reference.

    Args:
        x: ``[..., hidden]`` activations.
        weight: ``[hidden]`` gain.
        eps: variance epsilon.
        residual: optional ``[..., hidden]`` added to ``x`` first.

    Returns:
        ``out`` ``[..., hidden]`` in ``x.dtype``; with ``residual``, ``(out, x + residual)``
        where the sum is the next layer's residual stream. Inputs are not modified.
    """
    dtype = x.dtype
    h = x if residual is None else x + residual
    hf = h.float()
    normed = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)
    out = weight * normed
    return out if residual is None else (out, h)


def add_rms_norm_ref(
    residual: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    """``residual += delta`` in place (when ``delta`` is given), then :func:`rms_norm_ref` of it.

    The reference of the fused CPU op ``structgen.runtime.cpu.ops.add_rms_norm`` (the residual
    stream updated in place; :func:`rms_norm` with ``residual`` returns the sum instead).

    Args:
        residual: ``[..., hidden]`` the residual stream; mutated when ``delta`` is given.
        delta: ``[..., hidden]`` what the previous block added, or None.
        weight: ``[hidden]`` gain.
        eps: variance epsilon.

    Returns:
        ``[..., hidden]`` normed hidden states.
    """
    if delta is not None:
        residual.add_(delta)
    return rms_norm_ref(residual, weight, eps)


@jit
def _rms_norm_kernel(
    x_ptr,  # [R, N]
    res_ptr,  # [R, N] (HAS_RESIDUAL)
    w_ptr,  # [N]
    out_ptr,  # [R, N]
    sum_ptr,  # [R, N] x + residual (HAS_RESIDUAL)
    stride_x,
    stride_r,
    stride_o,
    stride_s,
    n_cols,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    h = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + row * stride_r + cols, mask=mask, other=0.0)
        h = (h.to(tl.float32) + r.to(tl.float32)).to(x_ptr.dtype.element_ty)  # torch's rounding
        tl.store(sum_ptr + row * stride_s + cols, h, mask=mask)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, 0) / n_cols + eps)
    normed = (hf * rstd).to(x_ptr.dtype.element_ty)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    out = w.to(tl.float32) * normed.to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def _rms_norm_triton(x, weight, eps, residual):
    check(weight.dim() == 1 and x.shape[-1] == weight.shape[0], "weight must be [hidden]")
    check(x.is_floating_point(), f"x must be floating point, got {x.dtype}")
    check_same_device(x=x, weight=weight, residual=residual)
    if residual is not None:
        check(
            residual.shape == x.shape and residual.dtype == x.dtype,
            f"residual must match x {tuple(x.shape)} {x.dtype}, got {tuple(residual.shape)} "
            f"{residual.dtype}",
        )
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out_dtype = torch.promote_types(weight.dtype, x.dtype)
    out = torch.empty(x2.shape, dtype=out_dtype, device=x.device)
    r2 = s2 = None
    if residual is not None:
        r2 = residual.reshape(-1, hidden)
        if r2.stride(-1) != 1:
            r2 = r2.contiguous()
        s2 = torch.empty_like(x2)
    rows = x2.shape[0]
    if rows:
        launch(
            _rms_norm_kernel,
            (rows,),
            x.device,
            x2, r2 if r2 is not None else x2, weight.contiguous(), out,
            s2 if s2 is not None else out,
            x2.stride(0), r2.stride(0) if r2 is not None else 0, out.stride(0),
            s2.stride(0) if s2 is not None else 0,
            hidden, float(eps),
            HAS_RESIDUAL=residual is not None, BLOCK=next_pow2(hidden),
        )  # fmt: skip
    out = out.view(x.shape)
    return out if residual is None else (out, s2.view(x.shape))


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual: torch.Tensor | None = None,
    *,
    backend: str = "auto",
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm (optionally fused with the residual add); same contract as :func:`rms_norm_ref`.

    Raises:
        ValueError: (Triton backend) shape, dtype or device mismatch.
    """
    if resolve_backend(backend, x.device) == "triton":
        return _rms_norm_triton(x, weight, eps, residual)
    return rms_norm_ref(x, weight, eps, residual)
