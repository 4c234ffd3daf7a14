"""Shared test helpers: the tokens one row of a packed token bitmask allows.

A row is ``W`` int32 words, token ``t`` at bit ``t % 32`` of word ``t // 32`` (the layout
``fill_bitmask`` writes and ``structgen.kernels.apply_token_bitmask`` reads); it is unpacked by
that module's ``unpack_bitmask`` (checked against brute-force packing in
``tests/runtime/test_sampler.py``).
"""

from __future__ import annotations

import numpy as np
import torch

from structgen.kernels.apply_token_bitmask import unpack_bitmask


def mask_bits(row, n: int | None = None) -> np.ndarray:
    """Bool ``[n]``: whether each token ``0..n-1`` is allowed by the bitmask ``row``.

    ``row``: one row, a 1-D CPU torch tensor or numpy array of ``W`` 4-byte integer words
    (int32 or uint32). ``n`` defaults to ``32 * W`` (every bit, the padding past the
    vocabulary included); tokens past ``32 * W`` read as not allowed.

    Raises:
        ValueError: ``row`` is not 1-D or its words are not 4-byte integers.
    """
    words = np.asarray(row)
    if words.ndim != 1 or words.dtype.kind not in "iu" or words.dtype.itemsize != 4:
        raise ValueError(f"a bitmask row is 1-D 4-byte words, got {words.dtype} {words.shape}")
    packed = torch.from_numpy(np.array(words).view(np.int32))  # a copy: a read-only row too
    return unpack_bitmask(packed[None], 32 * len(words) if n is None else n)[0].numpy()


def allowed_ids(row, n: int | None = None) -> list[int]:
    """The ids of the tokens ``0..n-1`` allowed by the bitmask ``row``, ascending
    (``mask_bits``' set bits; same arguments and errors)."""
    return np.flatnonzero(mask_bits(row, n)).tolist()
