"""ForwardBatch: the metadata of one ragged forward pass, planned once, shared by all layers.

Planned on the host in numpy (:meth:`ForwardBatch.build_host`); the default CPU engine's
``CpuDecoder`` reads those arrays as they are, a torch model gets them as tensors
(:meth:`ForwardBatch.to_torch`, :meth:`ForwardBatch.build`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from structgen.runtime.device_boundary import is_tensor

if TYPE_CHECKING:
    import torch

__all__ = ["ForwardBatch"]


@dataclass
class ForwardBatch:
    """Everything a model forward needs about the batch, independent of the layer.

    The batch is *ragged*: ``B`` sequences, sequence ``b`` brings ``extend_lens[b]``
    new tokens (a prefill chunk, one decode token, jump-forward text) on top of
    ``prefix_lens[b]`` tokens whose K/V are already in its pages. New tokens of all
    sequences are concatenated into one flat token axis of length ``T``.

    The arrays are torch tensors (:meth:`build`) or, for the host decoder, int64 numpy
    arrays (:meth:`build_host`).

    Attributes:
        input_ids: ``[T]`` int64, the new tokens.
        positions: ``[T]`` int64, each new token's position in its sequence.
        out_slots: ``[T]`` int64, KV slot (``page * page_size + offset``) each new token writes.
        seq_ids: ``[T]`` int64, batch row ``b`` of each new token.
        prefix_lens: ``[B]`` int64, tokens already cached per sequence.
        extend_lens: ``[B]`` int64, new tokens per sequence (>= 1).
        page_table: ``[B, max_pages]`` int64, page ids of each sequence (padded with 0,
            the scratch page), covering ``prefix_lens + extend_lens`` tokens.
        logits_indices: ``[R]`` int64, rows of the flat token axis whose logits are wanted
            (usually the last new token of each sequence that samples).
        page_size: tokens per page of the KV pool the page table indexes (set by ``build``).
        plans: per-backend attention metadata derived from the fields above, filled lazily
            by the attention backend on first use and shared by every layer (never set it
            by hand; a batch must not be mutated after its first forward).
    """

    input_ids: torch.Tensor | np.ndarray
    positions: torch.Tensor | np.ndarray
    out_slots: torch.Tensor | np.ndarray
    seq_ids: torch.Tensor | np.ndarray
    prefix_lens: torch.Tensor | np.ndarray
    extend_lens: torch.Tensor | np.ndarray
    page_table: torch.Tensor | np.ndarray
    logits_indices: torch.Tensor | np.ndarray
    page_size: int = 0
    plans: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def batch_size(self) -> int:
        """B, the number of sequences."""
        return int(self.extend_lens.shape[0])

    @property
    def num_tokens(self) -> int:
        """T, the number of new tokens."""
        return int(self.input_ids.shape[0])

    @staticmethod
    def build(
        token_chunks: list[list[int]],
        prefix_lens: list[int],
        page_tables: list[list[int]],
        page_size: int,
        logits_rows: list[int] | None = None,
        device: str | torch.device = "cpu",
        logits_token_indices: list[int] | None = None,
    ) -> "ForwardBatch":
        """Plan a step from per-sequence lists (done once per step, on the host), as tensors
        on ``device``: :meth:`build_host`'s arrays through :meth:`to_torch`.

        Args:
            token_chunks: new token ids of each sequence (each non-empty).
            prefix_lens: cached tokens of each sequence.
            page_tables: page ids of each sequence, enough for prefix + new tokens.
            page_size: tokens per page.
            logits_rows: batch rows whose last new token needs logits; None = all rows.
            device: device for the tensors.
            logits_token_indices: explicit rows of the flat token axis that need logits
                (overrides ``logits_rows``; e.g. every prompt position for prompt logprobs).

        Returns:
            The planned ForwardBatch.
        """
        return ForwardBatch.build_host(
            token_chunks,
            prefix_lens,
            page_tables,
            page_size,
            logits_rows=logits_rows,
            logits_token_indices=logits_token_indices,
        ).to_torch(device)

    @staticmethod
    def build_host(
        token_chunks: list[list[int]],
        prefix_lens: list[int],
        page_tables: list[list[int]],
        page_size: int,
        logits_rows: list[int] | None = None,
        logits_token_indices: list[int] | None = None,
    ) -> "ForwardBatch":
        """:meth:`build` with int64 numpy arrays (no torch): what ``CpuDecoder`` reads.

        Args: as for :meth:`build` (no device).

        Returns:
            The planned ForwardBatch over numpy arrays.
        """
        # host-side index arithmetic in numpy: torch's CPU repeat_interleave and fills wake its
        # intra-op thread pool, which costs more than these few thousand integers
        batch = len(token_chunks)
        ext = np.fromiter((len(c) for c in token_chunks), np.int64, batch)
        flat = [t for c in token_chunks for t in c]
        pre = np.array(prefix_lens, dtype=np.int64).reshape(batch)
        seq_ids = np.repeat(np.arange(batch, dtype=np.int64), ext)
        starts = np.cumsum(ext) - ext  # [B] first flat row of each sequence
        offs = np.arange(len(flat), dtype=np.int64) - starts[seq_ids]  # [T] index in the chunk
        positions = pre[seq_ids] + offs
        max_pages = max(1, max(len(p) for p in page_tables))
        pt = np.zeros((batch, max_pages), dtype=np.int64)
        for b, pages in enumerate(page_tables):
            if pages:
                pt[b, : len(pages)] = pages
        out_slots = pt[seq_ids, positions // page_size] * page_size + positions % page_size
        rows = list(range(batch)) if logits_rows is None else logits_rows
        last = starts + ext - 1
        if logits_token_indices is not None:
            logits_idx = np.array(logits_token_indices, dtype=np.int64).reshape(-1)
        elif rows:
            logits_idx = last[np.array(rows, dtype=np.int64)]
        else:
            logits_idx = np.zeros(0, dtype=np.int64)
        return ForwardBatch(
            input_ids=np.array(flat, dtype=np.int64).reshape(len(flat)),
            positions=positions,
            out_slots=out_slots,
            seq_ids=seq_ids,
            prefix_lens=pre,
            extend_lens=ext,
            page_table=pt,
            logits_indices=logits_idx,
            page_size=page_size,
        )

    def to_torch(self, device: str | torch.device = "cpu") -> "ForwardBatch":
        """This batch with its arrays as int64 tensors on ``device`` (shared memory on CPU).

        Returns ``self`` when the arrays are tensors already. Raises: never.
        """
        if is_tensor(self.input_ids):
            return self
        import torch

        dev = torch.device(device)
        names = (
            "input_ids",
            "positions",
            "out_slots",
            "seq_ids",
            "prefix_lens",
            "extend_lens",
            "page_table",
            "logits_indices",
        )
        arrays = {n: torch.from_numpy(getattr(self, n)).to(dev) for n in names}
        return ForwardBatch(**arrays, page_size=self.page_size)
