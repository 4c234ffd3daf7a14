"""The tensor-parallel step loop: rank 0's runner broadcasts each batch, workers replay it.

Rank 0 (the engine's process) keeps the scheduler, radix cache, matchers and sampler; it
calls :meth:`TensorParallelRunner.forward` exactly where a single-process engine calls
``ModelRunner.forward``. That broadcasts the step on the control group:

* header ``[op, B, T, P, R]`` int64 (``op`` = forward or shutdown; batch size, new
  tokens, page-table width, logits rows);
* payload int64 ``tokens[T] | extend_lens[B] | prefix_lens[B] | page_table[B*P] |
  logits_token_indices[R]``.

Every rank then builds the same :class:`ForwardBatch` and runs its shard of the model on
its own slice of every KV page (same page ids everywhere: page tables come from rank 0).
Only rank 0 receives the gathered logits; sampling happens there, once.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import traceback
import weakref

import torch

from structgen.env import Settings
from structgen.errors import DistributedError
from structgen.runtime.distributed.group import (
    TPGroup,
    WorkerProcesses,
    check_devices,
    open_store,
    watch_parent,
)
from structgen.runtime.distributed.parallel_layers import (
    check_shardable,
    local_kv_heads,
    shard_model,
)
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KV_GROWTH_TOKENS, KVPool
from structgen.runtime.model_runner import BaseModelRunner
from structgen.runtime.models.attention import attention_backend as backend_scope

__all__ = [
    "TensorParallelRunner",
    "pack_step",
    "start_tensor_parallel",
    "tp_worker_main",
    "unpack_step",
]

OP_FORWARD, OP_SHUTDOWN = 1, 2
_HEADER = 5


def pack_step(
    token_chunks: list[list[int]],
    prefix_lens: list[int],
    page_tables: list[list[int]],
    logits_token_indices: list[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's header ``[5]`` and payload ``[T + 2B + B*P + R]`` int64 tensors."""
    b = len(token_chunks)
    width = max(1, max((len(p) for p in page_tables), default=1))
    flat = [t for c in token_chunks for t in c]
    table = [pg for p in page_tables for pg in (list(p) + [0] * (width - len(p)))]
    header = torch.tensor(
        [OP_FORWARD, b, len(flat), width, len(logits_token_indices)], dtype=torch.int64
    )
    payload = torch.tensor(
        flat
        + [len(c) for c in token_chunks]
        + list(prefix_lens)
        + table
        + list(logits_token_indices),
        dtype=torch.int64,
    )
    return header, payload


def unpack_step(header: torch.Tensor, payload: torch.Tensor):
    """Inverse of :func:`pack_step`:
    ``(token_chunks, prefix_lens, page_tables, logits_token_indices)``.
    """
    _, b, t, width, r = header.tolist()
    vals = payload.tolist()
    flat, ext = vals[:t], vals[t : t + b]
    prefix = vals[t + b : t + 2 * b]
    table = vals[t + 2 * b : t + 2 * b + b * width]
    rows = vals[t + 2 * b + b * width :]
    chunks, start = [], 0
    for n in ext:
        chunks.append(flat[start : start + n])
        start += n
    tables = [table[i * width : (i + 1) * width] for i in range(b)]
    assert len(rows) == r
    return chunks, prefix, tables, rows


def _logits_indices(token_chunks, logits_rows, logits_token_indices) -> list[int]:
    """Explicit flat rows needing logits (what ``ForwardBatch.build`` derives from
    ``logits_rows``).
    """
    if logits_token_indices is not None:
        return [int(i) for i in logits_token_indices]
    ends, total = [], 0
    for c in token_chunks:
        total += len(c)
        ends.append(total - 1)
    rows = range(len(token_chunks)) if logits_rows is None else logits_rows
    return [ends[i] for i in rows]


class TensorParallelRunner(BaseModelRunner):
    """Rank 0's model runner: same ``forward`` contract as ``ModelRunner``.

    Args:
        model: rank 0's shard (``forward`` returns full logits here).
        pool: rank 0's KV pool (its KV heads only).
        device: torch device.
        group: the TP group.
        workers: the worker processes (ranks 1..).
        attention_backend: as ``ModelRunner``'s (``EngineConfig.attention_backend``).

    After any failure the runner is dead: every later ``forward`` raises the same
    :class:`DistributedError` at once.
    """

    def __init__(
        self,
        model,
        pool: KVPool,
        device: torch.device,
        group: TPGroup,
        workers: WorkerProcesses,
        attention_backend: str = "auto",
    ) -> None:
        self.model = model
        self.attention_backend = attention_backend
        self.pool = pool
        self.device = device
        self.group = group
        self.workers = workers
        self.num_forward_passes = 0
        self.failed: DistributedError | None = None
        self._finalizer = weakref.finalize(self, _shutdown, group, workers)

    @property
    def tensor_parallel_size(self) -> int:
        """Ranks in the group."""
        return self.group.world_size

    def forward(
        self, token_chunks, prefix_lens, page_tables, logits_rows=None, logits_token_indices=None
    ) -> torch.Tensor:
        """Broadcast the step to the workers, run rank 0's shard, return ``[R, vocab]`` logits.

        Raises:
            DistributedError: a worker died or a collective timed out (the engine is dead).
        """
        if self.failed is not None:
            raise self.failed
        rows = _logits_indices(token_chunks, logits_rows, logits_token_indices)
        try:
            self.workers.raise_if_dead("before a forward pass")
            header, payload = pack_step(token_chunks, prefix_lens, page_tables, rows)
            self.group.broadcast_ctl(header)
            self.group.broadcast_ctl(payload)
            batch = ForwardBatch.build(
                token_chunks,
                prefix_lens,
                page_tables,
                self.pool.page_size,
                device=self.device,
                logits_token_indices=rows,
            )
            with torch.inference_mode(), backend_scope(self.attention_backend):
                logits = self.model(batch, self.pool)
        except DistributedError as exc:
            self.failed = exc
            self.workers.kill(force=True)  # the group is broken: no polite shutdown
            raise
        self.num_forward_passes += 1
        return logits.float()

    def close(self) -> None:
        """Stop the workers (shutdown message, then join; kill after 10 s). Idempotent."""
        self._finalizer()


def _shutdown(group: TPGroup, workers: WorkerProcesses) -> None:
    """Tell live workers to exit, wait for them, kill stragglers. Raises: never."""
    try:
        if not workers.dead():
            group.broadcast_ctl(torch.tensor([OP_SHUTDOWN, 0, 0, 0, 0], dtype=torch.int64))
    except Exception:  # noqa: BLE001, S110  (a dead peer: nothing to tell, join() reaps it)
        pass
    workers.join(10.0)


def start_tensor_parallel(config, loaded, device: torch.device, num_pages: int, env: Settings):
    """Rank 0's side of launch: check, spawn workers, shard, build the KV pool and runner.

    Args:
        config: the resolved EngineConfig (``tensor_parallel_size > 1``).
        loaded: rank 0's LoadedModel (full weights; sharded in place).
        device: rank 0's device (CUDA: rank r uses ``cuda:index+r``).
        num_pages: KV pages per rank (every rank holds the same pages, its heads only).
        env: the engine's environment settings; every worker applies them to its kernels.

    Returns:
        ``(pool, runner)`` for the engine.

    Raises:
        ConfigError: the model does not split over the ranks (before any process starts).
        DistributedError: a worker failed to start.
    """
    tp = config.tensor_parallel_size
    model = loaded.model
    check_shardable(model, tp)
    check_devices(device, tp)
    store = open_store(tp, config.dist_timeout_s)
    args = (dataclasses.replace(config, speculative=None), num_pages, env)
    workers = WorkerProcesses(
        tp_worker_main, tp, args, store, start_timeout_s=max(120.0, config.dist_timeout_s)
    )
    try:
        group = TPGroup(store, 0, tp, config.dist_timeout_s, device)
    except Exception as exc:
        workers.kill()
        raise workers.describe_failure(exc) from exc
    group.on_failure = workers.describe_failure
    try:
        shard_model(model, group)
        pool = _make_pool(model, num_pages, config, tp, 0, device)
    except BaseException:
        workers.kill(force=True)
        raise
    return pool, TensorParallelRunner(model, pool, device, group, workers, config.attention_backend)


def _make_pool(model, num_pages: int, config, tp: int, rank: int, device) -> KVPool:
    """This rank's pool (its KV heads, in the KV cache dtype of ``config``): grown on
    demand on CPU (rank 0's by its scheduler's
    allocations, the workers' to the page ids of each step), preallocated on CUDA.
    """
    _, kv_n = local_kv_heads(model.num_kv_heads, tp, rank)
    page_size = config.page_size
    growth = None if torch.device(device).type == "cuda" else -(-KV_GROWTH_TOKENS // page_size)
    return KVPool(
        model.config.num_hidden_layers,
        num_pages,
        page_size,
        kv_n,
        model.head_dim,
        config.torch_kv_cache_dtype,
        device,
        max(2, growth) if growth is not None else None,
    )


def _rank_device(device: str, rank: int) -> torch.device:
    dev = torch.device(device)
    if dev.type != "cuda":
        return dev
    return torch.device("cuda", (dev.index or 0) + rank)


def tp_worker_main(
    rank: int, world_size: int, port: int, owner_pid: int, config, num_pages: int, env: Settings
) -> None:
    """Entry point of worker rank ``rank``: load, shard, then replay rank 0's steps until told
    to stop. On any error it writes the traceback to the store (``error/{rank}``) and
    exits with code 1, which rank 0 reports.
    """
    import torch.distributed as dist

    watch_parent(owner_pid)
    store = dist.TCPStore(
        "127.0.0.1",
        port,
        world_size,
        False,
        timeout=datetime.timedelta(seconds=config.dist_timeout_s),
    )
    try:
        from structgen.runtime.cpu.settings import apply_kernel_settings
        from structgen.runtime.loader import load_model

        apply_kernel_settings(env)
        if config.num_threads is not None:
            torch.set_num_threads(config.num_threads)
        device = _rank_device(config.device, rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        loaded = load_model(config.model, config.torch_dtype, device)
        store.set(f"ready/{rank}", "1")
        group = TPGroup(store, rank, world_size, config.dist_timeout_s, device)
        model = shard_model(loaded.model, group)
        pool = _make_pool(model, num_pages, config, world_size, rank, device)
        _worker_loop(model, pool, group, device, config.attention_backend)
    except BaseException:  # noqa: BLE001  (reported to rank 0 through the store, then exit)
        try:
            store.set(f"error/{rank}", traceback.format_exc())
        finally:
            os._exit(1)
    os._exit(0)


def _worker_loop(
    model, pool: KVPool, group: TPGroup, device: torch.device, attention_backend: str
) -> None:
    header = torch.zeros(_HEADER, dtype=torch.int64)
    while True:
        group.broadcast_ctl(header, idle=True)
        op, b, t, width, r = header.tolist()
        if op == OP_SHUTDOWN:
            return
        if op != OP_FORWARD:
            raise DistributedError(f"tensor-parallel rank {group.rank}: unknown op {op}")
        payload = torch.empty(t + 2 * b + b * width + r, dtype=torch.int64)
        group.broadcast_ctl(payload)
        chunks, prefix, tables, rows = unpack_step(header, payload)
        pool.reserve(1 + max((max(t) for t in tables if len(t)), default=0))  # rank 0's pages
        batch = ForwardBatch.build(
            chunks, prefix, tables, pool.page_size, device=device, logits_token_indices=rows
        )
        with torch.inference_mode(), backend_scope(attention_backend):
            model(batch, pool)
