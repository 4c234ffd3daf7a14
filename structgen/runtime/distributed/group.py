"""Process groups and launch: the ranks of one tensor-parallel engine and their collectives.

Rank 0 is the engine's own process (scheduler, radix cache, matchers, sampler); ranks
``1 .. tp-1`` are worker processes started with ``torch.multiprocessing`` (spawn). They
meet through a ``TCPStore`` that rank 0 opens on a free local port, then build two
process groups on it that belong to this engine alone (no ``init_process_group``, so no
process-global default group: several engines may live in one process):

* ``ctl``: gloo on CPU tensors, rank 0 broadcasts each step's batch on it. A worker waits
  for the next step with no deadline (an idle engine is not a failure); everything else
  waits at most ``dist_timeout_s``.
* ``data``: the model's collectives (all-reduce of row-parallel outputs, gather of
  vocabulary-parallel logits): gloo on CPU, NCCL on CUDA.

A rank that crashes closes its sockets, and the next collective on every other rank fails
at once ("connection closed by peer"); a rank that hangs is caught by the timeout. Either
way the caller gets :class:`~structgen.errors.DistributedError`.
"""

from __future__ import annotations

import datetime
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from structgen.errors import ConfigError, DistributedError

__all__ = [
    "IDLE_WAIT",
    "TPGroup",
    "WorkerProcesses",
    "check_devices",
    "mp_context",
    "open_store",
    "owner_alive",
    "watch_parent",
]

IDLE_WAIT = datetime.timedelta(days=365)  # a worker waiting for the next step has no deadline
_READY_POLL_S = 0.05


def open_store(world_size: int, timeout_s: float) -> dist.TCPStore:
    """A TCPStore served by this process on a free 127.0.0.1 port (``store.port``)."""
    return dist.TCPStore(
        "127.0.0.1",
        0,
        world_size,
        True,
        timeout=datetime.timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )


def check_devices(device: torch.device, count: int) -> None:
    """Raise ConfigError when ``count`` GPUs from ``device`` on do not exist (CPU: never)."""
    if device.type != "cuda":
        return
    first, have = device.index or 0, torch.cuda.device_count()
    if first + count > have:
        raise ConfigError(
            f"{count} ranks from cuda:{first} need {first + count} GPUs; this machine has {have}"
        )


class TPGroup:
    """This rank's view of one tensor-parallel group: rank, size and the collectives.

    Args:
        store: the rendezvous store (rank 0's TCPStore, or a client of it).
        rank: this rank, ``0 <= rank < world_size``.
        world_size: tensor-parallel size.
        timeout_s: deadline of every collective but the workers' idle wait.
        device: the device of model tensors (``cuda`` selects NCCL for ``data``).

    Collectives follow ``torch.distributed`` semantics and are issued in the same order on
    every rank (the model's layer loop guarantees it).

    Raises:
        DistributedError: a collective failed (peer gone) or timed out.
    """

    def __init__(
        self, store: dist.Store, rank: int, world_size: int, timeout_s: float, device: torch.device
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.timeout = datetime.timedelta(seconds=timeout_s)
        self.device = device
        self.ctl = dist.ProcessGroupGloo(
            dist.PrefixStore("ctl", store), rank, world_size, self.timeout
        )
        if device.type == "cuda":
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = self.timeout
            self.data = dist.ProcessGroupNCCL(
                dist.PrefixStore("data", store), rank, world_size, opts
            )
        else:
            self.data = self.ctl  # one gloo group on CPU: ops are ordered the same on every rank
        self.on_failure: Callable[[BaseException], BaseException] | None = None

    def _run(self, work_fn: Callable[[], Any], what: str) -> None:
        try:
            work_fn().wait()
        except Exception as exc:  # gloo/NCCL raise RuntimeError; make it ours, with context
            err = (
                self.on_failure(exc)
                if self.on_failure is not None
                else DistributedError(f"tensor-parallel rank {self.rank}: {what} failed: {exc}")
            )
            raise err from exc

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        """Sum ``t`` over all ranks, in place; returns ``t``."""
        self._run(lambda: self.data.allreduce([t]), "all-reduce")
        return t

    def gather_last_dim(self, t: torch.Tensor) -> torch.Tensor:
        """Concatenate every rank's ``t`` ``[..., n]`` along the last dim, on rank 0.

        Returns:
            ``[..., world_size * n]`` on rank 0; ``t`` unchanged on the other ranks.
        """
        t = t.contiguous()
        opts = dist.GatherOptions()
        opts.rootRank = 0
        opts.timeout = self.timeout
        if self.rank == 0:
            parts = [torch.empty_like(t) for _ in range(self.world_size)]
            self._run(lambda: self.data.gather([parts], [t], opts), "gather of logits")
            return torch.cat(parts, dim=-1)
        self._run(lambda: self.data.gather([], [t], opts), "gather of logits")
        return t

    def broadcast_ctl(self, t: torch.Tensor, idle: bool = False) -> torch.Tensor:
        """Broadcast the CPU tensor ``t`` from rank 0 on the control group (in place).

        Args:
            t: the tensor (rank 0: the data; others: a buffer of the same shape and dtype).
            idle: wait without deadline (a worker waiting for the next step).
        """
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        opts.rootTensor = 0
        opts.timeout = IDLE_WAIT if idle else self.timeout
        self._run(lambda: self.ctl.broadcast([t], opts), "broadcast of the step's batch")
        return t


# what an engine process imports (transformers' lazy modules included): done once, in the server
_PRELOAD = [
    "torch",
    "transformers",
    "transformers.models.auto.configuration_auto",
    "transformers.models.auto.modeling_auto",
    "transformers.tokenization_utils_tokenizers",
    "transformers.modeling_rope_utils",
    "structgen.fsm",
    "structgen.runtime.engine",
    "structgen.runtime.distributed.worker",
    "structgen.runtime.loader.hf_loader",
    "structgen.runtime.loader.gguf_loader",
    "structgen.runtime.models.llama",
    "structgen.runtime.quantization.apply",
]


def mp_context():
    """The ``torch.multiprocessing`` start method for our processes: ``forkserver`` on Linux,
    with torch and structgen preloaded in the server, so that every process after the first
    starts in milliseconds instead of re-importing torch (several seconds); ``spawn``
    elsewhere. Neither forks the caller (safe after CUDA is initialised).
    """
    import sys

    import torch.multiprocessing as mp

    if sys.platform.startswith("linux"):
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


class WorkerProcesses:
    """The worker ranks ``1 .. world_size-1`` of one engine, spawned and watched.

    Args:
        target: the worker entry point, ``target(rank, world_size, port, owner_pid, *args)``
            (module-level: it is pickled into the child).
        world_size: tensor-parallel size (rank 0 is this process).
        args: further arguments of ``target`` (picklable).
        start_timeout_s: how long the workers may take to import, load and shard.

    Raises:
        DistributedError: a worker died or did not report ready in time.
    """

    def __init__(
        self, target, world_size: int, args: tuple, store: dist.TCPStore, start_timeout_s: float
    ) -> None:
        ctx = mp_context()
        self.store = store
        self.processes = []
        for rank in range(1, world_size):
            p = ctx.Process(
                target=target,
                args=(rank, world_size, store.port, os.getpid(), *args),
                name=f"structgen-tp{rank}",
                daemon=False,
            )
            p.start()
            self.processes.append(p)
        self._wait_ready(start_timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending = {rank for rank in range(1, len(self.processes) + 1)}
        while pending:
            self.raise_if_dead("while starting")
            pending = {r for r in pending if not self.store.check([f"ready/{r}"])}
            if pending and time.monotonic() > deadline:
                self.kill()
                raise DistributedError(
                    f"tensor-parallel rank(s) {sorted(pending)} did not start "
                    f"within {timeout_s:.0f} s"
                )
            if pending:
                time.sleep(_READY_POLL_S)

    def dead(self) -> list[tuple[int, int | None]]:
        """(rank, exit code) of every worker that is no longer running."""
        return [(i + 1, p.exitcode) for i, p in enumerate(self.processes) if not p.is_alive()]

    def error_of(self, rank: int) -> str | None:
        """The error a worker reported through the store before exiting, if any."""
        try:
            if self.store.check([f"error/{rank}"]):
                return self.store.get(f"error/{rank}").decode(errors="replace")
        except Exception:  # noqa: BLE001  (the store itself may be gone at shutdown)
            return None
        return None

    def describe_failure(self, exc: BaseException | None = None) -> DistributedError:
        """A DistributedError naming the dead ranks, their exit codes and reported errors."""
        dead = self.dead()
        if not dead and exc is not None:
            time.sleep(0.2)  # a crashing peer closes its sockets just before it is reaped
            dead = self.dead()
        parts = []
        for rank, code in dead:
            msg = f"rank {rank} exited with code {code}"
            err = self.error_of(rank)
            parts.append(msg + (f" ({err.strip().splitlines()[-1]})" if err else ""))
        what = "; ".join(parts) if parts else f"a collective failed: {exc}"
        return DistributedError(
            f"tensor-parallel engine failed: {what}; the engine is unusable (create a new one)"
        )

    def raise_if_dead(self, when: str = "") -> None:
        """Raise DistributedError if any worker has exited."""
        if self.dead():
            err = self.describe_failure()
            raise DistributedError(f"{err} {when}".strip())

    def join(self, timeout_s: float) -> None:
        """Wait for every worker to exit, then kill the ones still running."""
        deadline = time.monotonic() + timeout_s
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))
        self.kill()

    def kill(self, force: bool = False) -> None:
        """Terminate (SIGTERM, then SIGKILL after 2 s; ``force``: SIGKILL at once) the workers
        still running. Raises: never.
        """
        for p in self.processes:
            if p.is_alive():
                p.kill() if force else p.terminate()
        for p in self.processes:
            p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)


def owner_alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no procfs: existence is all we can tell
        return True


def watch_parent(owner_pid: int, poll_s: float = 1.0) -> None:
    """In a worker or replica: exit (code 70) within ``poll_s`` once the process that owns
    it is gone, so nothing is orphaned when an owner is killed. The owner's pid is passed
    explicitly: with ``forkserver`` the OS parent is the fork server, not the owner.
    """

    def loop() -> None:
        while True:
            time.sleep(poll_s)
            if not owner_alive(owner_pid):
                os._exit(70)

    threading.Thread(target=loop, name="structgen-watch-owner", daemon=True).start()
