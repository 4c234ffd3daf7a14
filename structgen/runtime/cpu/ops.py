"""Fused CPU ops for the decoder layers (``csrc/cpuops.c``), each with its torch reference.

After the weight matmuls, a CPU decode step spent most of its time in small torch ops
around them (norms, rotary, K/V stores, page gathers, SDPA, residual adds, SiLU), each a
pass over memory, an allocation and an OpenMP fork/join, plus the Python that calls them.
Each function here does in one C call what several of those did:

- :func:`add_rms_norm`: ``residual += delta``; ``weight * rmsnorm(residual)`` (vLLM's
  ``fused_add_rms_norm``; transformers' ``LlamaRMSNorm`` numerics).
- :func:`rope_store_kv`: optional per-head q/k RMSNorm (Qwen3), rotary embedding of q and k
  in place (rotate-half layout, RoFormer, arXiv:2104.09864), K and V written to their slots.
- :func:`paged_attention`: causal attention of each query token over its sequence's cached
  keys, read through the page table in place (no gather copy); for short extensions.
- :func:`silu_mul`: ``silu(gate) * up``.

Every function checks in O(1) that its arguments agree with each other (shapes; else
:class:`~structgen.errors.KernelArgumentError`, before any C call) and what the kernel needs
(CPU, fp32 or bf16 throughout, the strides it reads); where the kernel does not take them it
computes the torch reference, so callers never branch. The references are
``structgen.kernels.rms_norm.add_rms_norm_ref``,
``structgen.kernels.paged_attention.paged_attention_ref`` (both shared with the Triton kernels'
tests) and :func:`rope_store_kv_ref`, :func:`silu_mul_ref` here. :func:`set_enabled` with False
makes every function use its reference (an ``Engine`` applies ``structgen.env``'s ``cpu_ops``
setting; the kernel is on by default). The kernel computes in fp32 and, in bf16, rounds where
transformers rounds between ops, so results equal the references up to summation order (fp32) or one
bf16 rounding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from structgen.errors import KernelArgumentError
from structgen.kernels.paged_attention import paged_attention_ref
from structgen.kernels.rms_norm import add_rms_norm_ref, rms_norm_ref
from structgen.runtime.cpu.threads import kernel_threads

__all__ = [
    "MAX_HEAD_DIM",
    "add_rms_norm",
    "enabled",
    "kernel_available",
    "paged_attention",
    "rope_store_kv",
    "rope_store_kv_ref",
    "set_enabled",
    "silu_mul",
    "silu_mul_ref",
]

MAX_HEAD_DIM = 512  # csrc/cpuops.c MAX_HEAD_DIM

try:  # built by setup.py; optional
    from structgen.runtime.cpu import _cpuops as _ext
except ImportError:  # pragma: no cover - depends on the build
    _ext = None

MISSING_WARNING = (
    "structgen's fused CPU ops are not built (no C compiler at install?): "
    "the decoder uses torch ops"
)
_ENABLED = True  # set_enabled (tests patch it)
_DT = {torch.float32: 0, torch.bfloat16: 1}
# a KV cache's dtype (kv_cache_dtype, apart from the compute dtype): fp16 too (csrc/sg_simd.h dt 2)
KV_DT = {**_DT, torch.float16: 2}


def set_enabled(enabled: bool) -> None:
    """Turn the kernels on (the default) or off for the process (off: the references)."""
    global _ENABLED
    _ENABLED = bool(enabled)


def kernel_available() -> bool:
    """True when the extension is built and not turned off (:func:`set_enabled`)."""
    return _ext is not None and _ENABLED


def enabled(x: torch.Tensor) -> bool:
    """True when the kernel can take ``x``'s device and dtype (CPU, fp32 or bf16)."""
    return _ENABLED and _ext is not None and x.is_cpu and x.dtype in _DT


def _rows_ok(t: torch.Tensor, dtype: torch.dtype) -> bool:
    """2-D, ``dtype``, unit stride along the last dim (any row stride)."""
    return t.dim() == 2 and t.dtype is dtype and t.stride(1) == 1 and t.is_cpu


def _dense(t: torch.Tensor, dtype: torch.dtype) -> bool:
    """``dtype``, contiguous, on CPU."""
    return t.dtype is dtype and t.is_contiguous() and t.is_cpu


def _shape(t: torch.Tensor | None) -> str:
    return "None" if t is None else f"{tuple(t.shape)}"


def _bad(fn: str, want: str, **tensors: torch.Tensor | None) -> KernelArgumentError:
    got = ", ".join(f"{name} {_shape(t)}" for name, t in tensors.items())
    return KernelArgumentError(f"{fn}: expected {want}; got {got}")


# ---------------------------------------------------------------- add_rms_norm
def add_rms_norm(
    residual: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    """``residual += delta`` (in place, when ``delta`` is given), then
    ``weight * rmsnorm(residual)``.

    Args:
        residual: ``[T, H]`` the residual stream (unit stride along H); mutated when ``delta`` is
            given.
        delta: ``[T, H]`` what the previous block added, or None.
        weight: ``[H]`` the norm's weight, same dtype as ``residual``.
        eps: added to the mean square.

    Returns:
        ``[T, H]`` normed hidden states, dtype of ``residual``.

    Raises:
        KernelArgumentError: ``residual`` not 2-D, ``delta`` of another shape, ``weight`` not
            ``[H]``.
    """
    dtype = residual.dtype
    if (
        residual.dim() != 2
        or weight.shape != residual.shape[1:]
        or (delta is not None and delta.shape != residual.shape)
    ):
        raise _bad(
            "add_rms_norm",
            "residual [T, H], delta None or [T, H], weight [H]",
            residual=residual,
            delta=delta,
            weight=weight,
        )
    if not (
        enabled(residual)
        and _rows_ok(residual, dtype)
        and _dense(weight, dtype)
        and (delta is None or (_rows_ok(delta, dtype) and delta.shape == residual.shape))
    ):
        return add_rms_norm_ref(residual, delta, weight, eps)
    t, h = residual.shape
    out = torch.empty(t, h, dtype=dtype)
    _ext.add_rms_norm(
        residual.data_ptr(),
        residual.stride(0),
        0 if delta is None else delta.data_ptr(),
        0 if delta is None else delta.stride(0),
        weight.data_ptr(),
        out.data_ptr(),
        h,
        t,
        h,
        float(eps),
        _DT[dtype],
        kernel_threads(),
    )
    return out


# ---------------------------------------------------------------- rope_store_kv
def rope_store_kv_ref(
    q, k, v, cos, sin, k_slots, v_slots, out_slots, q_norm=None, k_norm=None, eps=1e-6
) -> None:
    """Reference of :func:`rope_store_kv` (same arguments, same in-place effects; the model's
    torch ops: ``rms_norm_ref``, ``apply_rotary``, ``index_copy_``).
    """
    from structgen.runtime.models.layers import apply_rotary  # (layers imports this module)

    t, d = q.shape[0], cos.shape[-1]
    qh, kh = q.view(t, -1, d), k.view(t, -1, d)
    if q_norm is not None:
        qh.copy_(rms_norm_ref(qh, q_norm, eps))
        kh.copy_(rms_norm_ref(kh, k_norm, eps))
    c, s = cos.view(t, 1, d), sin.view(t, 1, d)
    qh.copy_(apply_rotary(qh, c, s))
    kh.copy_(apply_rotary(kh, c, s))
    k_slots.index_copy_(0, out_slots, kh.to(k_slots.dtype))
    v_slots.index_copy_(0, out_slots, v.reshape(t, -1, d).to(v_slots.dtype))


def _check_rope_store_kv(q, k, v, cos, sin, k_slots, v_slots, out_slots, q_norm, k_norm) -> None:
    """Raise unless the shapes of :func:`rope_store_kv`'s arguments agree (O(1))."""
    d = cos.shape[-1]
    t = q.shape[0]
    kv_width = k_slots.shape[1] * d if k_slots.dim() == 3 else -1
    if not (
        q.dim() == 2
        and k.dim() == 2
        and v.dim() == 2
        and d > 0
        and q.shape[1] % d == 0
        and k.shape == v.shape == (t, kv_width)
        and k_slots.dim() == 3
        and k_slots.shape[2] == d
        and v_slots.shape == k_slots.shape
        and cos.numel() == t * d
        and sin.shape == cos.shape
        and out_slots.shape == (t,)
        and (q_norm is None) == (k_norm is None)
        and (q_norm is None or q_norm.shape == (d,) == k_norm.shape)
    ):
        raise _bad(
            "rope_store_kv",
            "q [T, H*d], k and v [T, KVH*d], cos and sin [T, d] (or [T, 1, d]), "
            "k_slots and v_slots [num_slots, KVH, d], out_slots [T], q_norm and k_norm both None "
            "or [d]",
            q=q,
            k=k,
            v=v,
            cos=cos,
            sin=sin,
            k_slots=k_slots,
            v_slots=v_slots,
            out_slots=out_slots,
            q_norm=q_norm,
            k_norm=k_norm,
        )


def rope_store_kv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    out_slots: torch.Tensor,
    q_norm: torch.Tensor | None = None,
    k_norm: torch.Tensor | None = None,
    eps: float = 1e-6,
) -> None:
    """Rotate q and k in place (after an optional per-head RMSNorm) and store K/V in the cache.

    Args:
        q: ``[T, H * d]`` queries (unit stride along the features; e.g. a column slice of a fused
            q/k/v output); rotated in place.
        k: ``[T, KVH * d]`` keys, rotated in place.
        v: ``[T, KVH * d]`` values.
        cos: ``[T, d]`` (or ``[T, 1, d]``) rotary cosine table of the tokens' positions, dtype
            of q (rotate-half layout: ``x * cos + rotate_half(x) * sin``).
        sin: the sine table, likewise.
        k_slots: ``[num_slots, KVH, d]`` a layer's key cache (contiguous), dtype of q or
            another (kv_cache_dtype: values rounded to it; the C kernel takes fp32/bf16/fp16).
        v_slots: the layer's value cache, likewise.
        out_slots: ``[T]`` int64 slot of each token.
        q_norm: ``[d]`` per-head RMSNorm weight of q applied before the rotation (Qwen3), or
            None.
        k_norm: the same for k; None exactly when ``q_norm`` is.
        eps: the per-head norm's epsilon.

    Raises:
        KernelArgumentError: shapes that disagree (an odd or > 512 head dim is not one: such
            shapes take the reference).
    """
    _check_rope_store_kv(q, k, v, cos, sin, k_slots, v_slots, out_slots, q_norm, k_norm)
    dtype, d = q.dtype, cos.shape[-1]
    t = q.shape[0]
    ok = (  # explicit checks: this runs once per layer and step
        enabled(q)
        and d % 2 == 0
        and d <= MAX_HEAD_DIM
        and _rows_ok(q, dtype)
        and _rows_ok(k, dtype)
        and _rows_ok(v, dtype)
        and _dense(cos, dtype)
        and _dense(sin, dtype)
        and k_slots.dtype in KV_DT
        and _dense(k_slots, k_slots.dtype)
        and _dense(v_slots, k_slots.dtype)
        and cos.numel() == t * d
        and sin.numel() == t * d
        and _dense(out_slots, torch.int64)
        and (
            q_norm is None
            and k_norm is None
            or q_norm is not None
            and k_norm is not None
            and _dense(q_norm, dtype)
            and _dense(k_norm, dtype)
        )
    )
    if not ok:
        rope_store_kv_ref(q, k, v, cos, sin, k_slots, v_slots, out_slots, q_norm, k_norm, eps)
        return
    kv_heads = k_slots.shape[1]
    _ext.rope_store_kv(
        q.data_ptr(),
        q.stride(0),
        k.data_ptr(),
        k.stride(0),
        v.data_ptr(),
        v.stride(0),
        cos.data_ptr(),
        sin.data_ptr(),
        0 if q_norm is None else q_norm.data_ptr(),
        0 if k_norm is None else k_norm.data_ptr(),
        float(eps),
        k_slots.data_ptr(),
        v_slots.data_ptr(),
        out_slots.data_ptr(),
        t,
        q.shape[1] // d,
        kv_heads,
        d,
        _DT[dtype] | KV_DT[k_slots.dtype] << 8,  # the cache's dtype may differ (kv_cache_dtype)
        kernel_threads(),
    )


# ---------------------------------------------------------------- paged_attention
def _paged_attention_ref(
    q, k_slots, v_slots, page_table, seq_ids, positions, page_size, scale, sliding_window
):
    """:func:`~structgen.kernels.paged_attention.paged_attention_ref` over this layout (slots viewed
    as pages).
    """
    t, d = q.shape[0], k_slots.shape[-1]
    k_cache = k_slots.unflatten(0, (-1, page_size))  # [num_pages, page_size, KVH, d]
    v_cache = v_slots.unflatten(0, (-1, page_size))
    return paged_attention_ref(
        q.reshape(t, -1, d), k_cache, v_cache, page_table, seq_ids, positions, scale, sliding_window
    )


def paged_attention(
    q: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    page_table: torch.Tensor,
    seq_ids: torch.Tensor,
    positions: torch.Tensor,
    page_size: int,
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Attention of each query token to keys ``0 .. position`` of its sequence, read in place.

    The tokens' own K/V must already be in the cache. Work is O(tokens x keys x heads x d) with
    no gather copy; each query row is computed on its own in one summation order, so a row's
    output does not depend on the other rows of the call (every CPU extension runs here:
    ``structgen.runtime.cpu.attention``).

    Args:
        q: ``[T, H, d]`` or ``[T, H * d]`` queries (RoPE applied; unit stride along the features).
        k_slots: ``[num_slots, KVH, d]`` a layer's key cache, contiguous (``H % KVH == 0``).
        v_slots: the layer's value cache, likewise.
        page_table: ``[B, P]`` int64 page ids of each sequence.
        seq_ids: ``[T]`` int64 row of ``page_table`` of each token.
        positions: ``[T]`` int64 position of each token (it sees keys ``0 .. position``).
        page_size: tokens per page.
        scale: softmax scale.
        sliding_window: None, or ``W``: keys ``position - W + 1 .. position`` (Mistral).

    Returns:
        ``[T, H, d]`` attention output, dtype of ``q`` (fp32 accumulation).

    Raises:
        KernelArgumentError: shapes that disagree (caches, ``H % KVH``, metadata lengths).
    """
    t = q.shape[0]
    width = (
        q.shape[1] if q.dim() == 2 else (q.shape[1] * q.shape[2] if q.dim() == 3 else 0)
    )  # H * d
    kv_d = k_slots.shape[1:] if k_slots.dim() == 3 else (0, 0)
    if not (
        kv_d[0] > 0
        and kv_d[1] > 0
        and v_slots.shape == k_slots.shape
        and width > 0
        and width % kv_d[1] == 0
        and (width // kv_d[1]) % kv_d[0] == 0
        and (q.dim() == 2 or q.shape[2] == kv_d[1])
        and page_table.dim() == 2
        and seq_ids.shape == (t,)
        and positions.shape == (t,)
        and page_size > 0
        and k_slots.shape[0] % page_size == 0
    ):
        raise _bad(
            "paged_attention",
            "q [T, H, d] or [T, H*d], k_slots and v_slots [num_pages*page_size, KVH, d] "
            "with H % KVH == 0, page_table [B, P], seq_ids and positions [T]",
            q=q,
            k_slots=k_slots,
            v_slots=v_slots,
            page_table=page_table,
            seq_ids=seq_ids,
            positions=positions,
        )
    kv_heads, d = k_slots.shape[1], k_slots.shape[2]
    q2 = q.reshape(t, -1) if q.dim() == 3 and q.stride(2) == 1 and q.stride(1) == d else q
    heads = q2.shape[1] // d if q2.dim() == 2 else 0
    ok = (
        enabled(q)
        and q2.dim() == 2
        and _rows_ok(q2, q.dtype)
        and d <= MAX_HEAD_DIM
        and heads % kv_heads == 0
        and k_slots.dtype in KV_DT
        and _dense(k_slots, k_slots.dtype)
        and _dense(v_slots, k_slots.dtype)
        and _dense(page_table, torch.int64)
        and _dense(seq_ids, torch.int64)
        and _dense(positions, torch.int64)
    )
    if not ok:
        return _paged_attention_ref(
            q, k_slots, v_slots, page_table, seq_ids, positions, page_size, scale, sliding_window
        )
    out = torch.empty(t, heads, d, dtype=q.dtype)
    _ext.paged_attention(
        q2.data_ptr(),
        q2.stride(0),
        k_slots.data_ptr(),
        v_slots.data_ptr(),
        page_table.data_ptr(),
        page_table.stride(0),
        seq_ids.data_ptr(),
        positions.data_ptr(),
        int(page_size),
        t,
        heads,
        kv_heads,
        d,
        float(scale),
        int(sliding_window or 0),
        out.data_ptr(),
        _DT[q.dtype] | KV_DT[k_slots.dtype] << 8,  # the cache's dtype may differ
        kernel_threads(),
    )
    return out


# ---------------------------------------------------------------- silu_mul
def silu_mul_ref(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Reference of :func:`silu_mul`."""
    return F.silu(gate) * up


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` (SwiGLU's gating; Shazeer, arXiv:2002.05202).

    Args:
        gate: ``[T, I]`` (unit stride along I; e.g. the first half of a fused gate/up output).
        up: ``[T, I]`` likewise (e.g. the second half).

    Returns:
        ``[T, I]`` contiguous, dtype of ``gate``.

    Raises:
        KernelArgumentError: ``gate`` and ``up`` of different shapes.
    """
    if gate.shape != up.shape:
        raise _bad("silu_mul", "gate and up of one shape", gate=gate, up=up)
    dtype = gate.dtype
    if not (
        enabled(gate) and _rows_ok(gate, dtype) and _rows_ok(up, dtype) and gate.shape == up.shape
    ):
        return silu_mul_ref(gate, up)
    t, i = gate.shape
    out = torch.empty(t, i, dtype=dtype)
    _ext.silu_mul(
        gate.data_ptr(),
        gate.stride(0),
        up.data_ptr(),
        up.stride(0),
        out.data_ptr(),
        i,
        t,
        i,
        _DT[dtype],
        kernel_threads(),
    )
    return out
