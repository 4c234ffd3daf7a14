"""ModelRunner: runs the model on one planned ragged batch over the paged KV cache."""

from __future__ import annotations

import torch

from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool

__all__ = ["ModelRunner"]


class ModelRunner:
    """Owns the model and its KVPool; one call = one forward pass.

    Args:
        model: a structgen model (``forward(batch, kv) -> [R, vocab]`` float32 logits).
        pool: the KV page pool the model reads and writes.
        device: torch device of model and pool.
    """

    def __init__(self, model: torch.nn.Module, pool: KVPool, device: torch.device) -> None:
        self.model = model
        self.pool = pool
        self.device = device
        self.num_forward_passes = 0

    def forward(
        self,
        token_chunks: list[list[int]],
        prefix_lens: list[int],
        page_tables: list[list[int]],
        logits_rows: list[int] | None = None,
        logits_token_indices: list[int] | None = None,
    ) -> torch.Tensor:
        """Compute the new tokens of every sequence, returning logits of ``logits_rows``.

        Args:
            token_chunks: new tokens per sequence.
            prefix_lens: tokens already cached per sequence.
            page_tables: each sequence's pages (covering prefix + new tokens).
            logits_rows: sequences whose last new token needs logits.
            logits_token_indices: explicit flat token rows needing logits (overrides
                ``logits_rows``).

        Returns:
            ``[R, vocab_size]`` float32 logits, one row per requested position.
        """
        batch = ForwardBatch.build(
            token_chunks,
            prefix_lens,
            page_tables,
            self.pool.page_size,
            logits_rows=logits_rows,
            device=self.device,
            logits_token_indices=logits_token_indices,
        )
        with torch.inference_mode():
            logits = self.model(batch, self.pool)
        self.num_forward_passes += 1
        return logits.float()
