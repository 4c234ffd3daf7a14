"""How many OpenMP threads the model's C kernels use on the calling thread.

Every wrapper over a C kernel (``dense``, ``ops``, ``decode_step``, ``quant``) passes
:func:`kernel_threads` to its C call, which opens its ``omp parallel num_threads(n)`` region
with that many threads. By default that is ``torch.get_num_threads()`` (the process's
setting, or the quantized kernel's own ``quant.set_threads``) once torch is loaded; in a
process that has not imported torch (the torch-free default CPU engine), the OpenMP runtime's
``omp_get_max_threads()`` (``OMP_NUM_THREADS``, else the CPUs the process may use), read from
the fused decode step's extension, and torch is never imported for it. :func:`kernel_thread_limit`
overrides it for the calling Python thread only (``threading.local``), so that two host
pipelines over one model (``structgen.runtime.host_pipelines``) each run their forwards on one
thread while any other thread of the process still uses all of torch's threads. Each native
thread that enters an ``omp parallel`` region is the master of its own team, so two such
one-thread calls from two threads run side by side.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from structgen.errors import ConfigError

__all__ = ["kernel_threads", "kernel_thread_limit"]

_local = threading.local()  # .limit: this thread's override, absent = none


_OMP_THREADS: list[int] = []  # omp_get_max_threads(), read once (torch not loaded)


def _process_threads() -> int:
    """``torch.get_num_threads()`` where torch is loaded, else the OpenMP runtime's
    ``omp_get_max_threads()`` (1 without the extension).
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.get_num_threads()
    if not _OMP_THREADS:
        try:
            from structgen.runtime.cpu import _decodestep
        except ImportError:  # pragma: no cover - depends on the build
            _OMP_THREADS.append(1)
        else:
            get = getattr(_decodestep, "max_threads", None)  # None: built before it existed
            _OMP_THREADS.append(max(1, int(get())) if get is not None else 1)
    return _OMP_THREADS[0]


def kernel_threads(default: int | None = None) -> int:
    """The C kernels' thread count for a call made on this thread (>= 1): this thread's
    :func:`kernel_thread_limit` if one is active, else ``default`` if given, else
    ``torch.get_num_threads()`` when torch is loaded, else ``omp_get_max_threads()`` (module
    docstring; never imports torch). Raises: never.
    """
    limit = getattr(_local, "limit", None)
    if limit is not None:
        return limit
    return default if default is not None else _process_threads()


@contextmanager
def kernel_thread_limit(n: int) -> Iterator[None]:
    """Within the block, C kernel calls made on this thread use ``n`` OpenMP threads (other
    threads are unaffected; nested blocks restore the outer value on exit, also on error).

    Args:
        n: threads per kernel call, >= 1.

    Raises:
        ConfigError: ``n`` is not an int >= 1.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"kernel_thread_limit: n must be an int >= 1, got {n!r}")
    before = getattr(_local, "limit", None)
    _local.limit = n
    try:
        yield
    finally:
        _local.limit = before
