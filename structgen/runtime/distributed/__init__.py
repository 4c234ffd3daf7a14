"""Beyond one device: tensor parallelism and data-parallel replicas on ``torch.distributed``.

* ``Engine(model, tensor_parallel_size=N)``: Megatron-style tensor parallelism. The
  engine's process is rank 0 (scheduler, radix cache, grammar matchers, sampler); ranks
  ``1..N-1`` are worker processes that replay each step rank 0 broadcasts. gloo on CPU,
  NCCL on CUDA (rank r on ``cuda:r``).
* ``Engine(model, data_parallel_size=M)``: M engine replicas (processes, each possibly
  tensor-parallel) behind a router that sends a request to the replica caching its
  longest prefix, else to the least-loaded one (:class:`DataParallelEngine`).

Modules, one concern each: ``group`` (process groups, launch, failure detection),
``parallel_layers`` (sharded layers and ``shard_model``), ``worker`` (the TP step loop),
``router`` (the cache-aware routing policy), ``data_parallel`` (replicas behind it),
``replica`` (one replica's serving loop),
``async_front`` (the streaming front the HTTP server uses with ``--dp``).

Scripts that start a parallel engine must guard their entry point with
``if __name__ == "__main__":`` (processes are spawned, which re-imports ``__main__``).
"""

from __future__ import annotations

import importlib

__all__ = [
    "ApproxRadixTree",
    "AsyncDataParallelEngine",
    "CacheAwareRouter",
    "DataParallelEngine",
    "TensorParallelRunner",
    "shard_model",
    "start_tensor_parallel",
]

_LAZY = {
    "start_tensor_parallel": "worker",
    "TensorParallelRunner": "worker",
    "shard_model": "parallel_layers",
    "DataParallelEngine": "data_parallel",
    "CacheAwareRouter": "router",
    "ApproxRadixTree": "router",
    "AsyncDataParallelEngine": "async_front",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
