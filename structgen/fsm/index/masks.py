"""Writing a packed token mask into one row of a bitmask tensor (the per-token path of
``Matcher.fill_bitmask``).

Why: the mask itself is a cached int32 array, so a warm ``fill_bitmask`` is a copy of
``ceil(vocab / 32)`` words; the cost is the way to the tensor's memory (``tensor.numpy()``,
``tensor.shape`` / ``stride()``, numpy slice assignments; figures in
``benchmarks/RESULTS.md``, "Moved from docstrings: fsm"). Here the tensor's layout is
read once and kept as a destination tuple ``(tensor, version, base, rows, stride, cols)``
(``describe``). Later calls with the same tensor only check that it is the same object
with the same version counter (bumped by every in-place op, metadata ones such as
``resize_``, ``t_`` or ``as_strided_`` included) and the same data pointer (a swapped or
reallocated storage), then write with one C call (``fill_row`` in ``csrc/tokentrie.c``:
the check, a memcpy, and a memset of the words past the vocabulary; for a tensor of exactly
``torch.Tensor`` the check calls the type's ``_version`` and ``data_ptr`` descriptors
directly, ``bind_tensor_type``, bound at the first tensor ``describe`` reads) or, without the
extension, through a cached numpy view of the tensor. The matcher hands ``fill_row`` each
state's mask in the form ``row_form`` chose once per state (``TokenIndex.fill_form``): a
mask with few nonzero words as (index, word) pairs, so the write reads a few bytes instead
of the whole row.

One destination is cached per process (``last``): the tensor most recently written, so a
batch step that fills every row of one tensor (``runtime/step.py``) reads the layout once
per step. The cache holds a reference to that one tensor until another replaces it.

Not caught by the check: ``tensor.data = other`` where ``other`` starts at the same
address with another layout (no version bump); call ``forget()`` after such a swap.
Inference-mode tensors (``torch.inference_mode``: the runtime's) have no version counter:
their layout is read on every call, never cached.
CUDA and other non-CPU tensors, other dtypes, and CPU tensors whose rows are not
contiguous words take torch ops on ``bitmask[row]`` (no cache).

A numpy bitmask (int32 ``ndarray`` ``[rows, cols]``, the torch-free CPU engine's,
``docs/torch_free_cpu.md``) is written by numpy on ``bitmask[row]`` at every call (no cache:
an array has no version counter; ``fill_row``'s checks read a tensor's). This module imports
no torch: a tensor can only be one when torch is in ``sys.modules``, so the grammar layer
compiles and fills numpy masks without it.

:func:`use_extension` turns ``fill_row`` off (``compile_*`` applies ``structgen.env``'s
``tokentrie`` setting here and to the walk, ``trie.use_extension``); an extension built
before ``fill_row`` existed is used for the walk only.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from . import trie

if TYPE_CHECKING:
    import torch

__all__ = ["last", "fill_row", "write", "describe", "forget", "row_form", "use_extension"]

# C writer: fill_row(dst, tensor, row, words) -> False when dst is not (or no longer) the
# tensor's layout; fill_row(dst, tensor, row, forms, state) takes the words from
# forms[state] (None: no entry). None here: the numpy writer. Tests swap it with
# ``monkeypatch.setattr``.
fill_row = getattr(trie._EXT, "fill_row", None)
_row_form_c = getattr(trie._EXT, "row_form", None)  # row_form in one C pass; None: numpy
_bound = False  # bind_tensor_type(torch.Tensor) done (at the first tensor describe reads)

_NONE = (None, -1, -1, 0, 0, 0)
last: tuple = _NONE  # the C writer's destination: (tensor, version, base, rows, stride, cols)
_last_np: tuple = _NONE  # the numpy writer's: (tensor, version, base, rows, view, cols)


def use_extension(enabled: bool) -> None:
    """Write masks with the C ``fill_row`` (the default, where built) or with numpy, for the
    process. Raises: never.
    """
    global fill_row, _row_form_c
    fill_row = getattr(trie._EXT, "fill_row", None) if enabled else None
    _row_form_c = getattr(trie._EXT, "row_form", None) if enabled else None


def row_form(mask: np.ndarray) -> bytes | tuple:
    """The form of a cached mask (int32 ``[n]``, read-only, never mutated) that
    ``fill_row`` writes fastest: ``bytes`` of little-endian int32 (word index, word) pairs
    when at most 1/8 of the words are nonzero (structural states: a few allowed tokens;
    the write reads 8 bytes per nonzero word instead of the whole row), else
    ``(mask, address, n)`` (no buffer request per write; the tuple keeps the mask alive).
    One C pass (``csrc/tokentrie.c``) where the extension is built and on, else numpy.
    Raises: never.
    """
    if _row_form_c is not None:
        form = _row_form_c(mask)
        if form is not None:
            return form
    return _row_form_numpy(mask)


def _row_form_numpy(mask: np.ndarray) -> bytes | tuple:
    """``row_form`` with numpy (the reference of the C pass)."""
    nonzero = np.flatnonzero(mask)
    if 8 * nonzero.size <= mask.shape[0]:
        pairs = np.empty((nonzero.size, 2), "<i4")
        pairs[:, 0] = nonzero
        pairs[:, 1] = mask[nonzero]
        return pairs.tobytes()
    mask = np.ascontiguousarray(mask, np.int32)
    return (mask, mask.ctypes.data, mask.shape[0])


def forget() -> None:
    """Drop the cached destinations (after a ``tensor.data = ...`` swap; tests)."""
    global last, _last_np
    last = _last_np = _NONE


def describe(bitmask: torch.Tensor, numpy_view: bool = False) -> tuple | None:
    """The destination tuple of a CPU int32 ``[rows, cols]`` tensor whose rows are
    contiguous words, or None (another device, dtype, rank or layout: torch path).

    Returns ``(tensor, version, base, rows, stride, cols)``: ``base`` the address of
    element ``[0, 0]``, ``stride`` the words between rows; with ``numpy_view`` the fifth
    item is instead the tensor's numpy view ``[rows, cols]``. Raises: never.
    """
    global _bound
    torch = sys.modules.get("torch")  # not imported: bitmask is no tensor
    if torch is None or not isinstance(bitmask, torch.Tensor) or not bitmask.is_cpu:
        return None
    if not _bound:  # checks of a plain tensor skip the attribute lookup
        _bound = True
        if hasattr(trie._EXT, "bind_tensor_type"):
            trie._EXT.bind_tensor_type(torch.Tensor)
    if bitmask.dtype is not torch.int32 or bitmask.dim() != 2:
        return None
    rows, cols = bitmask.shape
    stride_rows, stride_cols = bitmask.stride()
    base = bitmask.data_ptr()
    if rows == 0 or cols == 0 or base == 0 or (stride_cols != 1 and cols > 1):
        return None
    fifth = bitmask.numpy() if numpy_view else stride_rows
    # inference-mode tensors have no version counter: None, and such a tuple is used for
    # the one write only, never cached (write)
    version = None if bitmask.is_inference() else bitmask._version
    return (bitmask, version, base, rows, fifth, cols)


def write(bitmask: torch.Tensor | np.ndarray, row: int, words: np.ndarray | None) -> None:
    """Write ``words`` (int32 ``[n]``; None = all zero) into ``bitmask[row]``: the first
    ``min(n, cols)`` words copied, the words past them zeroed; caches a tensor's destination.

    ``bitmask``: a tensor (as the module docstring says) or an int32 ``ndarray``
    ``[rows, cols]``.

    Raises: IndexError for a row outside the bitmask (as indexing it would); ValueError for an
    ``ndarray`` that is not int32 ``[rows, cols]`` (its words would be cast, not copied).
    """
    global last, _last_np
    if isinstance(bitmask, np.ndarray):
        _write_array(bitmask, row, words)
        return
    fill = fill_row
    if fill is not None:
        if fill(last, bitmask, row, words):
            return
        dst = describe(bitmask)
        if dst is None:
            _write_torch(bitmask, row, words)
            return
        if dst[1] is not None:
            last = dst
        if not fill(dst, bitmask, row, words):  # the C checks disagree with describe's reads
            last = _NONE  # (a tensor attribute shadowed on the instance): the torch way
            _write_torch(bitmask, row, words)
        return
    dst = _last_np
    if not (dst[0] is bitmask and dst[1] == bitmask._version and dst[2] == bitmask.data_ptr()):
        dst = describe(bitmask, numpy_view=True)
        if dst is None:
            _write_torch(bitmask, row, words)
            return
        if dst[1] is not None:
            _last_np = dst
    _copy_words(dst[4][row], words)


def _copy_words(target: np.ndarray, words: np.ndarray | None) -> None:
    """``words`` into the row ``target`` (int32 ``[W]``), cut or zero-padded to its width;
    None: every token refused (all zero).
    """
    if words is None:
        target[:] = 0
        return
    n = min(words.shape[0], target.shape[0])
    target[:n] = words[:n]
    if target.shape[0] > n:
        target[n:] = 0


def _write_array(bitmask: np.ndarray, row: int, words: np.ndarray | None) -> None:
    """An ``ndarray`` bitmask: numpy on ``bitmask[row]`` (no cached destination)."""
    if bitmask.dtype != np.int32 or bitmask.ndim != 2:
        raise ValueError(
            f"bitmask must be int32 [rows, words], got {bitmask.dtype} {list(bitmask.shape)}"
        )
    _copy_words(bitmask[row], words)


def _write_torch(bitmask: torch.Tensor, row: int, words: np.ndarray | None) -> None:
    """Any other tensor (CUDA, non-contiguous rows): torch ops on ``bitmask[row]``."""
    import torch

    target = bitmask[row]
    if words is None:
        target.zero_()
        return
    n = min(words.shape[0], target.shape[0])
    target[:n].copy_(torch.from_numpy(np.array(words[:n])))
    if target.shape[0] > n:
        target[n:].zero_()
