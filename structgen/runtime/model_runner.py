"""ModelRunner: runs the model on one planned ragged batch over the paged KV cache.

:meth:`BaseModelRunner.execute` is the engine's step: it lays out which token rows need
logits for the scheduled chunks (the last known token of a request that samples, its
draft positions, the prompt positions whose log-probabilities were asked for), runs one
forward and returns a :class:`ModelOutput`. It changes no request.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from structgen.errors import DistributedError
from structgen.runtime.device_boundary import device_type
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool

if TYPE_CHECKING:
    import torch

    from structgen.runtime.request import Request
    from structgen.runtime.scheduler import SchedulerOutput

__all__ = ["BaseModelRunner", "ModelOutput", "ModelRunner"]


@dataclass
class ModelOutput:
    """The logits of one step, laid out per request, or the failure of its forward.

    Attributes:
        logits: ``[R, V]`` float32 logits of the rows below (None when the forward failed):
            an ``ndarray`` where the model ran on the host decoder (the default CPU engine's
            ``CpuDecoder``: no torch on the step), else a tensor.
        sampling: ``(request, first row, num drafts)`` per request that samples this step:
            rows ``first .. first + num drafts`` predict the token after its last known
            token and after each of its ``draft_token_ids`` (a speculating chunk is
            ``[last sampled token, d1 .. dm]``).
        prompt_logprobs: ``(request, first prompt position, row lo, row hi)``: rows
            ``lo .. hi - 1`` are computed at prompt positions ``first, first + 1, ...``.
        error: ``"forward pass failed: ..."`` when the forward raised, else None.
    """

    logits: np.ndarray | torch.Tensor | None = None
    sampling: list[tuple[Request, int, int]] = field(default_factory=list)
    prompt_logprobs: list[tuple[Request, int, int, int]] = field(default_factory=list)
    error: str | None = None


class BaseModelRunner(abc.ABC):
    """What the engine needs of a model runner (one process, or rank 0 of a TP group)."""

    @abc.abstractmethod
    def forward(
        self,
        token_chunks: list[list[int]],
        prefix_lens: list[int],
        page_tables: list[list[int]],
        logits_rows: list[int] | None = None,
        logits_token_indices: list[int] | None = None,
    ) -> torch.Tensor:
        """One forward pass over a ragged batch; ``[R, vocab_size]`` float32 logits."""

    def forward_logits(
        self,
        token_chunks: list[list[int]],
        prefix_lens: list[int],
        page_tables: list[list[int]],
        logits_token_indices: list[int] | None = None,
    ) -> np.ndarray | torch.Tensor:
        """:meth:`forward`, its logits in the runner's own kind (what :meth:`execute` keeps):
        an ``ndarray`` from a host decoder, else a tensor. This one: :meth:`forward`.
        """
        return self.forward(
            token_chunks, prefix_lens, page_tables, logits_token_indices=logits_token_indices
        )

    def execute(self, scheduler_output: SchedulerOutput) -> ModelOutput:
        """Run the scheduled chunks in one forward and return their logits rows.

        Args:
            scheduler_output: ``(request, num_tokens)`` chunks, tokens counted from
                ``request.num_computed_tokens`` (pages already allocated).

        Returns:
            The logits and their layout; a failed forward comes back as
            ``ModelOutput(error=...)`` (it fails the step's requests, not the engine).

        Raises:
            DistributedError: a tensor-parallel rank died (the engine itself is down).
        """
        chunks, prefix_lens, tables = [], [], []
        rows: list[int] = []  # flat token rows that need logits
        out = ModelOutput()
        offset = 0
        for req, num in scheduler_output:
            start = req.num_computed_tokens
            chunks.append(req.token_slice(start, start + num))
            prefix_lens.append(start)
            tables.append(req.page_table)
            n_prompt = len(req.prompt_token_ids)
            if req.params.prompt_logprobs is not None and start < n_prompt - 1:
                end = min(start + num, n_prompt - 1)  # positions predicting prompt tokens
                # only rows from prompt_logprobs_start - 1 on (each needs a vocab-wide head)
                lo = max(start, req.params.prompt_logprobs_start - 1)
                if lo < end:
                    out.prompt_logprobs.append((req, lo, len(rows), len(rows) + end - lo))
                    rows.extend(range(offset + lo - start, offset + end - start))
            if start + num >= req.num_tokens:
                out.sampling.append((req, len(rows), len(req.draft_token_ids)))
                rows.extend(range(offset + req.num_tokens - 1 - start, offset + num))
            offset += num
        try:
            out.logits = self.forward_logits(chunks, prefix_lens, tables, logits_token_indices=rows)
        except DistributedError:  # a dead tensor-parallel rank: the engine itself is down
            raise
        except Exception as exc:  # a failed forward fails this batch, not the engine
            out.error = f"forward pass failed: {type(exc).__name__}: {exc}"
        return out


class ModelRunner(BaseModelRunner):
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
        if attention_backend == "auto" and "structgen.runtime.models.attention" not in sys.modules:
            # nothing can have set another backend (the module is not loaded): no scope, no
            # torch import (the module imports torch)
            def backend_scope(_name: str) -> contextlib.AbstractContextManager:
                return contextlib.nullcontext()
        else:
            from structgen.runtime.models.attention import attention_backend as backend_scope

        self.model = model
        self.pool = pool
        self.device = device
        self._on_host = device_type(device) == "cpu"
        self.num_forward_passes = 0
        self.attention_backend = attention_backend
        self._backend = functools.partial(backend_scope, attention_backend)
        with self._backend():  # raises ValueError on an unknown name
            pass
        self.graphs = None
        if cuda_graph and device_type(device) == "cuda":
            if max_model_len is None:
                raise ValueError(
                    "ModelRunner(cuda_graph=True) needs max_model_len (the graphs' page-table "
                    "width)"
                )
            from structgen.runtime.cuda_graph import CudaGraphRunner

            self.graphs = CudaGraphRunner(
                model, pool, cuda_graph_max_batch, -(-max_model_len // pool.page_size)
            )
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
            ``[R, vocab_size]`` float32 logits, one row per requested position (a tensor; a
            host decoder's array wrapped without a copy).
        """
        logits = self._forward(
            token_chunks, prefix_lens, page_tables, logits_rows, logits_token_indices
        )
        if not isinstance(logits, np.ndarray):
            return logits
        import torch

        return torch.from_numpy(logits)

    def forward_logits(
        self,
        token_chunks: list[list[int]],
        prefix_lens: list[int],
        page_tables: list[list[int]],
        logits_token_indices: list[int] | None = None,
    ) -> np.ndarray | torch.Tensor:
        """:meth:`forward`'s logits as the model made them: a float32 ``ndarray`` when the
        step ran on the model's host decoder (``host_decoder(pool)``, the default CPU
        engine's ``CpuDecoder``: the batch planned in numpy, no torch op, no
        ``torch.inference_mode``; not while the model has a forward hook or pre-hook, which
        then sees the model's call as before), else a tensor. Args and errors: as
        :meth:`forward`.
        """
        return self._forward(token_chunks, prefix_lens, page_tables, None, logits_token_indices)

    def _forward(
        self,
        token_chunks: list[list[int]],
        prefix_lens: list[int],
        page_tables: list[list[int]],
        logits_rows: list[int] | None,
        logits_token_indices: list[int] | None,
    ) -> np.ndarray | torch.Tensor:
        model = self.model
        find = getattr(model, "host_decoder", None) if self._on_host else None
        if find is not None and (model._forward_hooks or model._forward_pre_hooks):
            find = None  # a forward hook on the model sees its call, as it always did
        decoder = None
        if find is not None:
            with self._backend():  # the decoder applies under the "auto" backend only
                decoder = find(self.pool)
        if decoder is not None:
            host_batch = ForwardBatch.build_host(
                token_chunks,
                prefix_lens,
                page_tables,
                self.pool.page_size,
                logits_rows=logits_rows,
                logits_token_indices=logits_token_indices,
            )
            if host_batch.num_tokens:
                logits = decoder.forward(host_batch, self.pool)
                self.num_forward_passes += 1
                return logits
        import torch  # a torch model's step

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
            elif find is not None:  # asked above: the model need not ask again
                logits = self.model(batch, self.pool, host_checked=True)
            else:
                logits = self.model(batch, self.pool)
        self.num_forward_passes += 1
        return logits.float()
