"""Token-bitmask masking of host logits in numpy: no torch, no Triton.

The default CPU engine's step masks its ``ndarray`` logits here (``runtime.step``); the torch
entry point ``apply_token_bitmask.apply_token_bitmask`` runs the same code on a CPU tensor's
memory. Bitmask layout: as ``apply_token_bitmask`` (int32 ``[R, ceil(V / 32)]``, bit
``i % 32`` of word ``i // 32``, least-significant first, set when token ``i`` is allowed).
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["apply_token_bitmask_host"]


def _mask_rows_host(out: np.ndarray, words: np.ndarray, targets) -> None:
    """``out[targets[r]]`` masked by ``words[r]`` in place (int32 words, little-endian host)."""
    vocab = out.shape[1]
    bits = np.unpackbits(
        words.view(np.uint8), axis=1, count=min(vocab, 32 * words.shape[1]), bitorder="little"
    )
    for r, row in enumerate(targets):
        np.putmask(out[row, : bits.shape[1]], bits[r] == 0, -np.inf)
        out[row, bits.shape[1] :] = -np.inf  # tokens past 32 * W: disallowed


def apply_token_bitmask_host(
    logits: np.ndarray, bitmask: np.ndarray, indices: np.ndarray | list[int] | None = None
) -> None:
    """:func:`apply_token_bitmask` for host arrays: numpy only, no torch op.

    Args:
        logits: ``[B, V]`` floating-point ``ndarray``, modified in place.
        bitmask: ``[R, W]`` int32 ``ndarray`` (or what ``np.asarray`` reads as one, a CPU
            tensor included); layout as for :func:`apply_token_bitmask_ref`.
        indices: ``[R]`` integer rows of ``logits`` the bitmask rows apply to; None means
            ``R == B``. Other rows are untouched.

    Raises:
        ValueError: a dtype or shape mismatch, or a big-endian host.
    """
    words = np.ascontiguousarray(np.asarray(bitmask))
    if words.dtype != np.int32 or words.ndim != 2:
        raise ValueError(f"bitmask must be a 2-D int32 array, got {words.dtype} {words.shape}")
    if not isinstance(logits, np.ndarray) or logits.ndim != 2 or logits.dtype.kind != "f":
        raise ValueError("logits must be a 2-D floating-point ndarray")
    if sys.byteorder != "little":
        raise ValueError("apply_token_bitmask_host needs a little-endian host")
    targets = range(logits.shape[0]) if indices is None else np.asarray(indices).tolist()
    if len(targets) != words.shape[0]:
        raise ValueError(f"bitmask rows {words.shape[0]} do not match logits rows {len(targets)}")
    if len(targets) == 0 or logits.shape[1] == 0:
        return
    _mask_rows_host(logits, words, targets)
