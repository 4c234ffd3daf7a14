"""apply_token_bitmask: mask a batch of logits with packed int32 token bitmasks.

Bitmask layout (shared with ``structgen.fsm.Matcher.fill_bitmask``): an int32 tensor
``[num_rows, ceil(vocab / 32)]``; bit ``i % 32`` of word ``i // 32`` (least-significant
bit first) is set when token ``i`` is allowed. Disallowed logits become ``-inf``.
This file holds the torch reference; the Triton kernel (kernels issue) plugs in here
with the same signature.
"""

from __future__ import annotations

import torch

__all__ = ["apply_token_bitmask", "apply_token_bitmask_ref", "unpack_bitmask"]

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
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32, got {bitmask.dtype}")
    rows = bitmask.shape[0] if indices is None else indices.shape[0]
    if bitmask.shape[0] != rows or (indices is None and rows != logits.shape[0]):
        raise ValueError(f"bitmask rows {bitmask.shape[0]} do not match logits rows {rows}")
    if rows == 0:
        return
    allowed = unpack_bitmask(bitmask, logits.shape[1])  # [R, V]
    if indices is None:
        logits.masked_fill_(~allowed, float("-inf"))
    else:
        sub = logits[indices]
        sub.masked_fill_(~allowed, float("-inf"))
        logits[indices] = sub


def apply_token_bitmask(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None = None
) -> None:
    """Mask logits in place with the best backend for their device (torch reference for now).

    Same contract as :func:`apply_token_bitmask_ref`.
    """
    apply_token_bitmask_ref(logits, bitmask, indices)
