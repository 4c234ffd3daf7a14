"""store_kv: write the new tokens' K/V rows into their KV-cache slots (in place).

Layout: a layer's cache viewed as slots ``[num_slots, num_kv_heads, head_dim]``
(``KVPool.k_slots(layer)``; slot ``page * page_size + offset``). One program copies one
token's ``num_kv_heads * head_dim`` K and V values, casting to the cache dtype.
"""

from __future__ import annotations

import torch

from structgen.kernels._triton import (
    check,
    check_index,
    check_same_device,
    jit,
    launch,
    next_pow2,
    resolve_backend,
    tl,
)

__all__ = ["store_kv", "store_kv_ref"]


def store_kv_ref(
    k: torch.Tensor,
    v: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    out_slots: torch.Tensor,
) -> None:
    """Write ``k``/``v`` ``[T, kv_heads, d]`` into rows ``out_slots`` ``[T]`` of the caches.

    Args:
        k: ``[T, kv_heads, d]`` new keys (RoPE applied).
        v: ``[T, kv_heads, d]`` new values.
        k_slots: ``[num_slots, kv_heads, d]`` K cache, modified in place.
        v_slots: ``[num_slots, kv_heads, d]`` V cache, modified in place.
        out_slots: ``[T]`` int64 slot of each new token (distinct).
    """
    k_slots.index_copy_(0, out_slots, k.to(k_slots.dtype))
    v_slots.index_copy_(0, out_slots, v.to(v_slots.dtype))


@jit
def _store_kv_kernel(
    k_ptr,  # [T, KVH, D], rows of ROW elements (contiguous per token)
    v_ptr,
    k_cache_ptr,  # [num_slots, KVH, D] contiguous per slot
    v_cache_ptr,
    slots_ptr,  # [T] int
    stride_kt,
    stride_vt,
    stride_kc,
    stride_vc,
    ROW: tl.constexpr,  # KVH * D
    BLOCK: tl.constexpr,
):
    t = tl.program_id(0)
    slot = tl.load(slots_ptr + t).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < ROW
    tt = t.to(tl.int64)
    k = tl.load(k_ptr + tt * stride_kt + offs, mask=mask)
    v = tl.load(v_ptr + tt * stride_vt + offs, mask=mask)
    tl.store(k_cache_ptr + slot * stride_kc + offs, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_cache_ptr + slot * stride_vc + offs, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def _rows_contiguous(x: torch.Tensor) -> bool:
    """Whether each leading-axis row of ``[N, H, D]`` is one contiguous run."""
    return x.stride(2) == 1 and x.stride(1) == x.shape[2]


def _store_kv_triton(k, v, k_slots, v_slots, out_slots) -> None:
    check(
        k.dim() == 3 and k.shape == v.shape,
        f"k/v must be [T, kv_heads, d], got {k.shape}, {v.shape}",
    )
    check(
        k_slots.dim() == 3 and k_slots.shape == v_slots.shape, "caches must be [slots, kv_heads, d]"
    )
    check(
        k.shape[1:] == k_slots.shape[1:],
        f"k {tuple(k.shape)} does not fit cache {tuple(k_slots.shape)}",
    )
    check(out_slots.dim() == 1 and out_slots.shape[0] == k.shape[0], "out_slots must be [T]")
    check_index(out_slots=out_slots)
    check(k_slots.dtype == v_slots.dtype, "K and V caches must share a dtype")
    check_same_device(k=k, v=v, k_slots=k_slots, v_slots=v_slots, out_slots=out_slots)
    k = k if _rows_contiguous(k) else k.contiguous()
    v = v if _rows_contiguous(v) else v.contiguous()
    check(
        _rows_contiguous(k_slots) and _rows_contiguous(v_slots),
        "cache slots must be contiguous rows",
    )
    num_tokens = k.shape[0]
    if num_tokens == 0:
        return
    row = k.shape[1] * k.shape[2]
    launch(
        _store_kv_kernel,
        (num_tokens,),
        k.device,
        k,
        v,
        k_slots,
        v_slots,
        out_slots.contiguous(),
        k.stride(0),
        v.stride(0),
        k_slots.stride(0),
        v_slots.stride(0),
        ROW=row,
        BLOCK=next_pow2(row),
    )


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    out_slots: torch.Tensor,
    *,
    backend: str = "auto",
) -> None:
    """Write new K/V into their slots in place; same contract as :func:`store_kv_ref`.

    Raises:
        ValueError: (Triton backend) shape, dtype, device or layout mismatch.
    """
    if resolve_backend(backend, k.device) == "triton":
        _store_kv_triton(k, v, k_slots, v_slots, out_slots)
    else:
        store_kv_ref(k, v, k_slots, v_slots, out_slots)
