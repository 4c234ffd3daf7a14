"""apply_token_bitmask: mask a batch of logits with packed int32 token bitmasks.

Bitmask layout (shared with ``structgen.fsm.Matcher.fill_bitmask``): an int32 tensor
``[num_rows, ceil(vocab / 32)]``; bit ``i % 32`` of word ``i // 32`` (least-significant
bit first) is set when token ``i`` is allowed. Disallowed logits become ``-inf``.

The Triton kernel writes only the disallowed entries (one masked store per vocabulary
block), so allowed logits and unselected rows are never touched. On CPU the bits are unpacked
and the logits written through numpy (``token_bitmask_host``, which imports no torch:
``np.unpackbits`` on the words' little-endian bytes):
torch's elementwise integer ops there go through its intra-op thread pool, which cost
milliseconds a call on a small vocabulary-sized mask. The torch reference
:func:`apply_token_bitmask_ref` is the oracle.
"""

from __future__ import annotations

import sys

import torch

from structgen.kernels._triton import (
    cdiv,
    check,
    check_index,
    check_same_device,
    jit,
    launch,
    resolve_backend,
    tl,
)
from structgen.kernels.token_bitmask_host import _mask_rows_host, apply_token_bitmask_host

__all__ = [
    "apply_token_bitmask",
    "apply_token_bitmask_host",
    "apply_token_bitmask_ref",
    "unpack_bitmask",
]

_SHIFTS_CACHE: dict[torch.device, torch.Tensor] = {}


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Unpack ``[R, W]`` int32 words into a ``[R, vocab_size]`` bool "allowed" tensor.

    Tokens past ``32 * W`` are reported as disallowed.
    """
    dev = bitmask.device
    shifts = _SHIFTS_CACHE.get(dev)
    if shifts is None:
        shifts = _SHIFTS_CACHE[dev] = torch.arange(32, dtype=torch.int32, device=dev)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [R, W, 32]
    allowed = bits.reshape(bitmask.shape[0], -1).bool()  # [R, 32 * W]
    if allowed.shape[1] >= vocab_size:
        return allowed[:, :vocab_size]
    pad = torch.zeros(
        (bitmask.shape[0], vocab_size - allowed.shape[1]), dtype=torch.bool, device=dev
    )
    return torch.cat([allowed, pad], dim=1)


def _check_args(logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None) -> int:
    """Validate shapes/dtypes; return the number of masked rows ``R``."""
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32, got {bitmask.dtype}")
    rows = bitmask.shape[0] if indices is None else indices.shape[0]
    if bitmask.shape[0] != rows or (indices is None and rows != logits.shape[0]):
        raise ValueError(f"bitmask rows {bitmask.shape[0]} do not match logits rows {rows}")
    return rows


def apply_token_bitmask_ref(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None = None
) -> None:
    """Set disallowed logits to ``-inf`` in place (torch reference).

    Args:
        logits: ``[B, V]`` float tensor, modified in place.
        bitmask: ``[R, ceil(V' / 32)]`` int32 (``V'`` may differ from ``V``: missing bits
            count as disallowed, extra bits are ignored).
        indices: ``[R]`` int64 rows of ``logits`` that ``bitmask``'s rows apply to; None
            means ``R == B`` and row ``r`` masks logits row ``r``. Other rows are untouched.

    Raises:
        ValueError: dtype or shape mismatch.
    """
    rows = _check_args(logits, bitmask, indices)
    if rows == 0:
        return
    allowed = unpack_bitmask(bitmask, logits.shape[1])  # [R, V]
    if indices is None:
        logits.masked_fill_(~allowed, float("-inf"))
    else:
        sub = logits[indices]
        sub.masked_fill_(~allowed, float("-inf"))
        logits[indices] = sub


_NUMPY_DTYPES = (torch.float32, torch.float64, torch.float16)


def _apply_token_bitmask_numpy(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None
) -> None:
    """CPU path of :func:`apply_token_bitmask`: same contract as the reference (``logits``
    float16/32/64 on CPU, little-endian host; the caller checks).
    """
    rows = _check_args(logits, bitmask, indices)
    if rows == 0 or logits.shape[1] == 0:
        return
    _mask_rows_host(
        logits.detach().numpy(),  # a view: writes land in ``logits``
        bitmask.detach().contiguous().numpy(),
        range(rows) if indices is None else indices.tolist(),
    )


@jit
def _bitmask_kernel(
    logits_ptr,  # [B, V] float, row stride stride_l, unit column stride
    bitmask_ptr,  # [R, W] int32, row stride stride_m, unit column stride
    indices_ptr,  # [R] int32/int64 (unused unless HAS_INDICES)
    vocab,  # V
    num_words,  # W
    stride_l,
    stride_m,
    HAS_INDICES: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    r = tl.program_id(0)  # bitmask row
    vb = tl.program_id(1)  # vocabulary block
    if HAS_INDICES:
        row = tl.load(indices_ptr + r).to(tl.int64)
    else:
        row = r.to(tl.int64)
    cols = vb * BLOCK_V + tl.arange(0, BLOCK_V)  # [BLOCK_V] token ids
    in_vocab = cols < vocab
    word_idx = cols // 32
    words = tl.load(
        bitmask_ptr + r.to(tl.int64) * stride_m + word_idx,
        mask=in_vocab & (word_idx < num_words),
        other=0,
    )
    allowed = ((words >> (cols % 32)) & 1) != 0
    neg_inf = tl.full((BLOCK_V,), float("-inf"), tl.float32).to(logits_ptr.dtype.element_ty)
    tl.store(logits_ptr + row * stride_l + cols, neg_inf, mask=in_vocab & ~allowed)


def _apply_token_bitmask_triton(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None
) -> None:
    rows = _check_args(logits, bitmask, indices)
    check(logits.dim() == 2 and bitmask.dim() == 2, "logits and bitmask must be 2-D")
    check(logits.is_floating_point(), f"logits must be floating point, got {logits.dtype}")
    check(logits.stride(1) == 1, "logits must be contiguous along the vocabulary")
    check(bitmask.stride(1) == 1, "bitmask must be contiguous along its words")
    check_same_device(logits=logits, bitmask=bitmask, indices=indices)
    if indices is not None:
        check(indices.dim() == 1, f"indices must be [R], got {tuple(indices.shape)}")
        check_index(indices=indices)
        indices = indices.contiguous()
    if rows == 0 or logits.shape[1] == 0:
        return
    vocab = logits.shape[1]
    block_v = 4096 if logits.is_cuda else 1024
    grid = (rows, cdiv(vocab, block_v))
    launch(
        _bitmask_kernel,
        grid,
        logits.device,
        logits,
        bitmask,
        indices if indices is not None else bitmask,
        vocab,
        bitmask.shape[1],
        logits.stride(0),
        bitmask.stride(0),
        HAS_INDICES=indices is not None,
        BLOCK_V=block_v,
    )


def apply_token_bitmask(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: torch.Tensor | None = None,
    *,
    backend: str = "auto",
) -> None:
    """Mask logits in place with the best backend for their device.

    Same contract as :func:`apply_token_bitmask_ref`. ``backend``: ``"auto"`` (Triton on
    CUDA; on CPU numpy for float16/32/64 logits, else torch), ``"triton"`` (interpreted on
    CPU) or ``"torch"`` (the reference).
    """
    if resolve_backend(backend, logits.device) == "triton":
        _apply_token_bitmask_triton(logits, bitmask, indices)
    elif (
        backend == "auto"
        and logits.device.type == "cpu"
        and bitmask.device.type == "cpu"
        and logits.dtype in _NUMPY_DTYPES
        and sys.byteorder == "little"
    ):
        _apply_token_bitmask_numpy(logits, bitmask, indices)
    else:
        apply_token_bitmask_ref(logits, bitmask, indices)
