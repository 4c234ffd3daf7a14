"""Rotary position embedding tables in numpy: the one implementation for every decoder.

The torch models' :class:`~structgen.runtime.models.layers.RotaryEmbedding` and the torch-free
CPU path (``benchmarks/startup_floor.py``, the numpy decoder of ``docs/torch_free_cpu.md``)
both take their ``cos`` / ``sin`` tables from :func:`rope_tables`, so their rotary arithmetic
is the same bits. This module imports numpy only (no torch).

Arithmetic, fixed so that every caller gets the same float32 tables on every platform: the
angles are float32 products ``position * inv_freq`` (as transformers computes them); their
cosine and sine are taken in float64 (numpy's double-precision libm, correctly rounded to
well under an ulp of float32), multiplied by the attention scaling in float64 and rounded to
float32 once. (torch's float32 ``cos`` / ``sin`` (SLEEF) differ from these by one ulp on
about 5% of the entries of an 8192-position table; numpy's own float32 ``cos`` differs
more.)
"""

from __future__ import annotations

import numpy as np

__all__ = ["RopeTables", "default_inv_freq", "rope_tables"]


def default_inv_freq(theta: float, dim: int) -> np.ndarray:
    """Inverse frequencies of the default (unscaled) RoPE: ``1 / theta ** (2i / dim)``.

    transformers' ``_compute_default_rope_parameters`` formula with its roundings (the
    exponent ``2i / dim`` and the reciprocal in float32) but the power taken in float64 and
    rounded to float32 (torch's float32 power is off by an ulp here and there: for bases
    10000 / 100000 / 500000 and head dims 64 / 128 the two are equal but for one entry of
    ``(128, 1e6)``; elsewhere up to a few entries differ by one ulp).

    Args:
        theta: the RoPE base (``rope_theta``), > 0.
        dim: rotated dimensions per head (even, > 0).

    Returns:
        ``[dim // 2]`` float32.

    Raises:
        ModelLoadError: ``dim`` not a positive even number, or ``theta`` not positive.
    """
    if dim <= 0 or dim % 2 or not theta > 0:
        from structgen.errors import ModelLoadError

        raise ModelLoadError(
            f"rotary: need an even head_dim > 0 and rope_theta > 0, got {dim}, {theta}"
        )
    exps = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    power = (np.float64(theta) ** exps.astype(np.float64)).astype(np.float32)
    return np.float32(1.0) / power


def rope_tables(
    inv_freq: np.ndarray, positions: int, attention_scaling: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """``cos`` and ``sin`` of every position's angles, in the rotate-half layout.

    Args:
        inv_freq: ``[dim // 2]`` inverse frequencies (radians per position), any float dtype;
            rounded to float32 first (the angles are float32 products, as transformers').
        positions: the table covers positions ``0 .. positions - 1`` (>= 0).
        attention_scaling: factor on both tables (YaRN's ``mscale``; 1.0 for the others).

    Returns:
        ``(cos, sin)``, each ``[positions, dim]`` float32, C-contiguous; row ``p`` is
        ``f(p * inv_freq)`` for the first half and again for the second half.

    Raises:
        ModelLoadError: ``inv_freq`` not one-dimensional, or ``positions`` negative.
    """
    inv = np.asarray(inv_freq)
    if inv.ndim != 1 or positions < 0:
        from structgen.errors import ModelLoadError

        raise ModelLoadError(
            f"rotary: need inv_freq [dim/2] and positions >= 0, got {inv.shape}, {positions}"
        )
    freqs = np.outer(np.arange(positions, dtype=np.float32), inv.astype(np.float32))
    angles = np.concatenate((freqs, freqs), axis=-1).astype(np.float64)  # [n, dim]
    scale = np.float64(attention_scaling)
    cos = (np.cos(angles) * scale).astype(np.float32)
    sin = (np.sin(angles) * scale).astype(np.float32)
    return cos, sin


class RopeTables:
    """Growable numpy ``cos`` / ``sin`` tables of one model (the torch-free twin of
    ``RotaryEmbedding``'s, the same bits: :func:`rope_tables`).

    Attributes:
        _cos, _sin: ``[n, dim]`` float32 tables covering positions ``0 .. n - 1`` (the names
            ``RotaryEmbedding`` uses, which ``runtime.cpu.decoder.CpuDecoder`` reads).
    """

    def __init__(self, inv_freq: np.ndarray, positions: int, attention_scaling: float = 1.0):
        """Tables over ``inv_freq`` ``[dim // 2]`` for ``positions`` positions (``rope_tables``'
        arguments and errors).
        """
        self._inv_freq = np.asarray(inv_freq, dtype=np.float32)
        self._scaling = float(attention_scaling)
        self._len = 0
        self._cos = self._sin = np.empty((0, 2 * self._inv_freq.shape[0]), np.float32)
        self.ensure(positions)

    def ensure(self, n: int) -> None:
        """Grow the tables to cover positions ``0 .. n - 1`` (rows already there keep their
        values: each row depends on its position only). Raises: never for ``n >= 0``.
        """
        if n <= self._len:
            return
        self._cos, self._sin = rope_tables(self._inv_freq, n, self._scaling)
        self._len = n
