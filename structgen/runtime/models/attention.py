"""Paged attention over the KV pool, and the backend scope of every kernel dispatch of the model.

:func:`paged_attention` and :func:`store_kv` run the Triton kernels of
``structgen.kernels`` on CUDA, the fused C kernel on CPU where it applies
(``structgen.runtime.cpu.attention``) and the SDPA path (``attention_sdpa``, ``index_copy_``)
elsewhere; :func:`attention_backend` forces one for a scope (the model runner's
``attention_backend``; tests force ``"triton"`` on CPU, interpreted). The model's other ops
with a Triton kernel (``RMSNorm``, the rotary embedding, the MoE experts, quantized linears)
ask :func:`use_triton` the same question, so the scope forces them too.

Layout: ``k_slots``/``v_slots`` are a layer's cache viewed as
``[num_slots, num_kv_heads, head_dim]`` (``KVPool.k_slots(layer)``); slot
``page * page_size + offset`` holds the token at position
``page_index * page_size + offset`` of the sequence that owns ``page``.
"""

from __future__ import annotations

import contextlib
import contextvars

import torch

from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.cpu.attention import paged_attention_cpu
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.models.attention_sdpa import (
    SdpaAttentionGroup,
    SdpaAttentionPlan,
    paged_attention_sdpa,
    plan_sdpa_attention,
)

__all__ = [
    "SdpaAttentionGroup",
    "SdpaAttentionPlan",
    "attention_backend",
    "cpu_attention",
    "paged_attention",
    "paged_attention_sdpa",
    "plan_sdpa_attention",
    "plan_triton_attention",
    "store_kv",
    "use_triton",
]

_BACKENDS = ("auto", "triton", "torch")
_BACKEND: contextvars.ContextVar[str] = contextvars.ContextVar(
    "structgen_attention_backend", default="auto"
)


@contextlib.contextmanager
def attention_backend(name: str):
    """Within the ``with`` block, :func:`paged_attention` and :func:`store_kv` use ``name``.

    Args:
        name: ``"auto"`` (Triton on CUDA, the C kernels or torch on CPU), ``"triton"`` (the
            Triton kernels of every op that has one; on CPU only under Triton's interpreter, for
            tests) or ``"torch"`` (the torch paths).

    Raises:
        ValueError: an unknown name.
    """
    if name not in _BACKENDS:
        raise ValueError(f"attention backend must be one of {_BACKENDS}, got {name!r}")
    token = _BACKEND.set(name)
    try:
        yield
    finally:
        _BACKEND.reset(token)


def cpu_attention(x: torch.Tensor) -> bool:
    """True when attention on ``x``'s device and dtype runs the fused CPU ops
    (``structgen.runtime.cpu.ops``): backend ``"auto"``, CPU, fp32/bf16, extension built.
    """
    return _BACKEND.get() == "auto" and cpu_ops.enabled(x)


def use_triton(t: torch.Tensor) -> bool:
    """True when the model's ops on ``t`` run their Triton kernels: backend ``"triton"``, or
    ``"auto"`` and ``t`` on CUDA. Raises: never.
    """
    backend = _BACKEND.get()
    return backend == "triton" or (backend == "auto" and t.is_cuda)


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    out_slots: torch.Tensor,
) -> None:
    """Write new tokens' K/V ``[T, kv_heads, d]`` in place into cache rows ``out_slots`` ``[T]``.

    On CUDA (or under ``attention_backend("triton")``) this is the Triton ``store_kv``
    kernel (same signature); elsewhere ``index_copy_``.
    """
    if use_triton(k):
        from structgen.kernels.store_kv import store_kv as store_kv_kernel

        store_kv_kernel(k, v, k_slots, v_slots, out_slots, backend="triton")
        return
    k_slots.index_copy_(0, out_slots, k.to(k_slots.dtype))
    v_slots.index_copy_(0, out_slots, v.to(v_slots.dtype))


def plan_triton_attention(
    batch: ForwardBatch, max_extend_len: int | None = None
) -> tuple[int, bool]:
    """``(max_extend_len, is_decode)`` of the step for the kernels, planned once, cached in
    ``batch.plans``.

    Args:
        batch: the step's metadata.
        max_extend_len: the longest extension if the caller knows it (no host sync; the
            CUDA-graph runner passes 1 for its padded decode batches); None reads it from
            ``batch.extend_lens`` (one host sync per step).

    Returns:
        The longest extension, and whether the step is pure decode (one new token per
        sequence, in batch order), which runs ``paged_decode_attention``.
    """
    plan = batch.plans.get("triton")
    if plan is None:
        max_ext = int(batch.extend_lens.max()) if max_extend_len is None else int(max_extend_len)
        plan = batch.plans["triton"] = (
            max_ext,
            max_ext == 1 and batch.num_tokens == batch.batch_size,
        )
    return plan


def paged_attention(
    q: torch.Tensor,
    k_slots: torch.Tensor,
    v_slots: torch.Tensor,
    batch: ForwardBatch,
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Backend dispatch; same contract as :func:`paged_attention_sdpa`.

    On CUDA (or under ``attention_backend("triton")``) it runs the Triton kernels of
    ``structgen.kernels``: ``paged_decode_attention`` for a pure decode step,
    ``extend_attention`` otherwise, both with the layer's sliding window; elsewhere the
    SDPA path. The kernels read the cache as pages,
    ``[num_pages, page_size, kv_heads, d]``; the step's plan (one host sync, the longest
    extension) is made once and shared by all layers (:func:`plan_triton_attention`).
    On CPU with the fused ops built (``structgen.runtime.cpu.ops``; fp32/bf16, value dim equal to
    key dim, backend ``"auto"``) every token takes the C kernel (:func:`paged_attention_cpu`:
    rows independent of chunking and batch composition).
    """
    if not use_triton(q):
        if cpu_attention(q) and k_slots.shape[-1] == v_slots.shape[-1]:
            return paged_attention_cpu(q, k_slots, v_slots, batch, scale, sliding_window)
        return paged_attention_sdpa(q, k_slots, v_slots, batch, scale, sliding_window)
    from structgen.kernels.extend_attention import extend_attention
    from structgen.kernels.paged_decode_attention import paged_decode_attention

    max_ext, is_decode = plan_triton_attention(batch)
    kv_heads, d = k_slots.shape[1:]
    k_cache = k_slots.view(-1, batch.page_size, kv_heads, d)  # [pages, page_size, kvh, d]
    v_cache = v_slots.view(-1, batch.page_size, kv_heads, d)
    if is_decode:
        seq_lens = batch.prefix_lens + batch.extend_lens  # [B]
        return paged_decode_attention(
            q,
            k_cache,
            v_cache,
            batch.page_table,
            seq_lens,
            scale,
            None,
            sliding_window,
            backend="triton",
        )
    return extend_attention(
        q,
        k_cache,
        v_cache,
        batch.page_table,
        batch.prefix_lens,
        batch.extend_lens,
        scale,
        max_ext,
        sliding_window,
        backend="triton",
    )
