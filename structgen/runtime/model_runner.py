"""ModelRunner: runs the model on one planned ragged batch over the paged KV cache."""

from __future__ import annotations

import functools

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
        attention_backend: ``"auto"`` (Triton kernels on CUDA, torch elsewhere),
            ``"triton"`` or ``"torch"``; see ``models.attention.attention_backend``.
        cuda_graph: replay decode steps from CUDA graphs (CUDA only; ignored elsewhere);
            see :mod:`structgen.runtime.cuda_graph`.
        cuda_graph_max_batch: largest decode batch replayed from a graph.
        max_model_len: context limit in tokens; the graphs' page tables hold
            ``ceil(max_model_len / page_size)`` pages (needed with ``cuda_graph``).

    Raises:
        ValueError: ``cuda_graph`` on CUDA without ``max_model_len``, or a bad backend name.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        pool: KVPool,
        device: torch.device,
        *,
        attention_backend: str = "auto",
        cuda_graph: bool = False,
        cuda_graph_max_batch: int = 64,
        max_model_len: int | None = None,
    ) -> None:
        from structgen.runtime.models.attention import attention_backend as backend_scope

        self.model = model
        self.pool = pool
        self.device = device
        self.num_forward_passes = 0
        self.attention_backend = attention_backend
        self._backend = functools.partial(backend_scope, attention_backend)
        with self._backend():  # raises ValueError on an unknown name
            pass
        self.graphs = None
        if cuda_graph and torch.device(device).type == "cuda":
            if max_model_len is None:
                raise ValueError("ModelRunner(cuda_graph=True) needs max_model_len (the graphs' page-table width)")
            from structgen.runtime.cuda_graph import CudaGraphRunner

            self.graphs = CudaGraphRunner(model, pool, cuda_graph_max_batch, -(-max_model_len // pool.page_size))
            with self._backend():
                self.graphs.capture()

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
        with torch.inference_mode(), self._backend():
            if self.graphs is not None and self.graphs.can_run(batch):
                logits = self.graphs.run(batch)
            else:
                logits = self.model(batch, self.pool)
        self.num_forward_passes += 1
        return logits.float()
