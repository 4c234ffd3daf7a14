"""Decode steps replayed from CUDA graphs, one graph per batch-size bucket.

A decode step launches a few hundred small kernels (30 layers x ~12 for SmolLM2) whose
launch cost dominates at small batch; a CUDA graph replays them with one launch. A graph
fixes its tensors' addresses and shapes, so the runner keeps *static* input buffers and
pads a step into them:

- the batch size is rounded up to a **bucket** (``1, 2, 4, 8, 16, 24, ... max_batch``:
  vLLM's / SGLang's choice); padded rows decode token 0 at position 0 of a sequence that
  owns only the scratch page 0 (``KVPool``): they write their K/V into scratch slot 0 and
  attend to it alone, so they never touch a real sequence's pages;
- page tables have a **fixed width** ``max_pages`` (the model's context in pages), the
  tail padded with page 0, which the kernels never read past ``seq_len``;
- the attention plan is fixed (pure decode, longest extension 1), so no layer syncs
  with the host while capturing.

Only pure decode steps (one new token per sequence, batch <= ``max_batch``, page table
no wider than ``max_pages``) are replayed; prefill, extend and speculative verification
run eagerly. Without CUDA (or before :meth:`CudaGraphRunner.capture`), :meth:`run` runs
the same padded batch eagerly, which is how the padding and buffer layout are tested on
CPU. Follows the decode-graph design of vLLM (``CUDAGraphRunner``) and SGLang
(``CudaGraphRunner``).
"""

from __future__ import annotations

import logging

import torch

from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.models.attention import plan_triton_attention

__all__ = ["CudaGraphRunner", "batch_buckets"]

log = logging.getLogger(__name__)


def batch_buckets(max_batch: int) -> list[int]:
    """Batch-size buckets up to ``max_batch``: ``1, 2, 4, 8`` then every multiple of 8.

    ``max_batch`` itself is always the last bucket.

    Raises:
        ValueError: ``max_batch < 1``.
    """
    if not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"cuda_graph_max_batch must be an int >= 1, got {max_batch!r}")
    sizes = [b for b in (1, 2, 4) if b < max_batch] + list(range(8, max_batch, 8))
    return sizes + [max_batch]


class CudaGraphRunner:
    """Static buffers and one CUDA graph per bucket for the decode steps of one model.

    Args:
        model: a structgen model (``forward(batch, kv) -> [R, vocab]`` logits).
        pool: the model's KV pool (its page 0 is the scratch page padded rows write to).
        max_batch: largest batch replayed from a graph (larger steps run eagerly).
        max_pages: page-table width of the graphs, ``ceil(max_model_len / page_size)``.

    Raises:
        ValueError: ``max_batch`` or ``max_pages`` < 1.
    """

    def __init__(
        self, model: torch.nn.Module, pool: KVPool, max_batch: int, max_pages: int
    ) -> None:
        if not isinstance(max_pages, int) or max_pages < 1:
            raise ValueError(f"max_pages must be an int >= 1, got {max_pages!r}")
        self.model = model
        self.pool = pool
        self.buckets = batch_buckets(max_batch)
        self.max_batch = self.buckets[-1]
        self.max_pages = max_pages
        self.device = torch.device(pool.device)
        n = self.max_batch
        i64 = {"dtype": torch.int64, "device": self.device}
        # inputs written before every replay ([:bucket] views are what the graphs read)
        self.input_ids = torch.zeros(n, **i64)  # [N]
        self.positions = torch.zeros(n, **i64)  # [N]
        self.out_slots = torch.zeros(n, **i64)  # [N] slot 0 of the scratch page for padding
        self.prefix_lens = torch.zeros(n, **i64)  # [N]
        self.page_table = torch.zeros(n, max_pages, **i64)  # [N, max_pages], padded with page 0
        # constant for a decode step: row b is token b, extends by 1, wants its logits
        self.seq_ids = torch.arange(n, **i64)
        self.extend_lens = torch.ones(n, **i64)
        self.logits_indices = torch.arange(n, **i64)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}  # bucket -> [bucket, vocab] graph output
        self.num_replays = 0

    # ------------------------------------------------------------------ layout
    def bucket_for(self, batch_size: int) -> int | None:
        """Smallest bucket >= ``batch_size``; None when it exceeds ``max_batch``."""
        for b in self.buckets:
            if b >= batch_size:
                return b
        return None

    def can_run(self, batch: ForwardBatch) -> bool:
        """Whether ``batch`` is a decode step the graphs cover (host-side shapes only, no sync).

        Every sequence brings >= 1 token, so ``num_tokens == batch_size`` means one each.
        """
        return (
            0 < batch.batch_size <= self.max_batch
            and batch.num_tokens == batch.batch_size
            and batch.page_table.shape[1] <= self.max_pages
            and batch.page_size == self.pool.page_size
        )

    def static_batch(self, bucket: int) -> ForwardBatch:
        """The ``ForwardBatch`` over the first ``bucket`` rows of the static buffers.

        Its attention plan is fixed to pure decode, so planning does not read the buffers.
        """
        batch = ForwardBatch(
            input_ids=self.input_ids[:bucket],
            positions=self.positions[:bucket],
            out_slots=self.out_slots[:bucket],
            seq_ids=self.seq_ids[:bucket],
            prefix_lens=self.prefix_lens[:bucket],
            extend_lens=self.extend_lens[:bucket],
            page_table=self.page_table[:bucket],
            logits_indices=self.logits_indices[:bucket],
            page_size=self.pool.page_size,
        )
        plan_triton_attention(batch, max_extend_len=1)
        return batch

    def load(self, batch: ForwardBatch) -> int:
        """Copy a decode step into the static buffers, padding it to its bucket.

        Args:
            batch: a step for which :meth:`can_run` holds (tensors on the runner's device).

        Returns:
            The bucket; rows ``batch_size .. bucket - 1`` are padding.
        """
        bs, width = batch.batch_size, batch.page_table.shape[1]
        bucket = self.bucket_for(bs)
        self.input_ids[:bs].copy_(batch.input_ids)
        self.positions[:bs].copy_(batch.positions)
        self.out_slots[:bs].copy_(batch.out_slots)
        self.prefix_lens[:bs].copy_(batch.prefix_lens)
        self.page_table[:bs, :width].copy_(batch.page_table)
        self.page_table[:bs, width:].zero_()
        for buf in (
            self.input_ids,
            self.positions,
            self.out_slots,
            self.prefix_lens,
            self.page_table,
        ):
            buf[bs:bucket].zero_()  # padding: token 0 at position 0 in scratch page 0
        return bucket

    # ------------------------------------------------------------------ run
    def run(self, batch: ForwardBatch) -> torch.Tensor:
        """Logits of ``batch`` (``[len(batch.logits_indices), vocab]``) from its bucket.

        Replays the bucket's graph when captured; otherwise runs the padded static batch
        eagerly (CPU, or buckets whose capture failed): same inputs, same outputs.

        Raises:
            ValueError: ``batch`` is not a step :meth:`can_run` covers.
        """
        if not self.can_run(batch):
            raise ValueError(
                f"CudaGraphRunner.run needs a decode step of <= {self.max_batch} sequences and "
                f"<= {self.max_pages} pages each, got {batch.batch_size} sequences, "
                f"{batch.num_tokens} tokens, page table width {batch.page_table.shape[1]}"
            )
        bucket = self.load(batch)
        graph = self.graphs.get(bucket)
        if graph is not None:
            graph.replay()
            self.num_replays += 1
            out = self.outputs[bucket]
        else:
            out = self.model(self.static_batch(bucket), self.pool)
        return out[batch.logits_indices]  # a copy: the next replay overwrites ``out``

    def capture(self) -> list[int]:
        """Capture one graph per bucket, largest first, sharing one memory pool (CUDA only).

        Each bucket runs twice eagerly on a side stream first (Triton compiles, caches
        warm), then is captured. A model whose forward syncs with the host (e.g. the MoE
        reference path) cannot be captured: that bucket stays eager, with a warning.

        Returns:
            The buckets captured.

        Raises:
            RuntimeError: not on a CUDA device.
        """
        if self.device.type != "cuda":
            raise RuntimeError("CUDA graphs need a CUDA device; on CPU run() executes eagerly")
        rotary = getattr(self.model, "rotary", None)
        if rotary is not None:  # grow the cos/sin tables now: a graph keeps their addresses
            rotary.ensure(self.max_pages * self.pool.page_size)
        mem_pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(self.device)
        with torch.inference_mode():
            for bucket in reversed(self.buckets):
                self.load_padding_only(bucket)
                batch = self.static_batch(bucket)
                stream.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(stream):
                    for _ in range(2):
                        self.model(batch, self.pool)
                torch.cuda.current_stream(self.device).wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                try:
                    with torch.cuda.graph(graph, pool=mem_pool, stream=stream):
                        out = self.model(batch, self.pool)
                except RuntimeError as exc:  # a host sync inside the forward
                    log.warning(
                        "CUDA graph capture of decode batch %d failed (%s); it runs eagerly",
                        bucket,
                        exc,
                    )
                    torch.cuda.synchronize(self.device)
                    continue
                self.graphs[bucket] = graph
                self.outputs[bucket] = out
        torch.cuda.synchronize(self.device)
        return sorted(self.graphs)

    def load_padding_only(self, bucket: int) -> None:
        """Fill rows ``0 .. bucket - 1`` with padding (capture input; writes scratch page 0)."""
        for buf in (
            self.input_ids,
            self.positions,
            self.out_slots,
            self.prefix_lens,
            self.page_table,
        ):
            buf[:bucket].zero_()
