"""Data parallelism: N engine replicas (processes, each possibly tensor-parallel) behind a
cache-aware router in the caller's process.

Each replica runs a whole ``Engine`` (its own scheduler, radix cache and KV pool) in a
loop that takes requests from its inbox queue and puts finished ``RequestOutput``s on a
shared outbox; the front routes every request with :class:`CacheAwareRouter`, so that
requests sharing a prefix meet the KV pages cached for it. Replica ``i`` of a CUDA engine
uses GPUs ``base + i*tp .. base + (i+1)*tp - 1``. The front holds the tokenizer and the
vocabulary replica 0 reports (no weights): it is a :class:`BaseEngine` like ``Engine``
(requests prepared and validated here, their constraint shipped to the replica as a spec).
"""

from __future__ import annotations

import functools
import itertools
import os
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any

import torch

from structgen.errors import ConfigError, DistributedError, RequestError, StructgenError
from structgen.fsm.spec import spec_of
from structgen.runtime.base_engine import BaseEngine
from structgen.runtime.config import EngineConfig
from structgen.runtime.distributed.group import check_devices, mp_context
from structgen.runtime.distributed.replica import replica_main
from structgen.runtime.distributed.router import CacheAwareRouter, routing_key
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.request import Request
from structgen.runtime.request_factory import naming_prompt
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["DataParallelEngine"]

_POLL_S = 0.2


def _replica_device(device: str, index: int, tp: int) -> str:
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return device
    base = torch.device("cuda" if device == "auto" else device).index or 0
    return f"cuda:{base + index * tp}"


class DataParallelEngine(BaseEngine):
    """``data_parallel_size`` replicas behind a cache-aware router; what
    ``Engine(model, data_parallel_size=N, ...)`` returns (the :class:`BaseEngine` interface).

    Args:
        model: as for ``Engine``.
        **kwargs: ``EngineConfig`` fields, given to every replica (``tensor_parallel_size``
            makes each replica tensor-parallel).

    Raises:
        ConfigError: an invalid setting (checked before any process starts).
        DistributedError: a replica failed to start, or died later (raised by the call
            that waits on it, within ``dist_timeout_s`` at most).
    """

    def __init__(self, model: str | None = None, **kwargs: Any) -> None:
        self.config = EngineConfig.from_kwargs(model, **kwargs)
        if (
            self.config.speculative is not None
            and self.config.speculative.method == "draft"
            and not isinstance(self.config.speculative.draft_model, str)
        ):
            raise ConfigError("data_parallel_size > 1 needs speculative draft_model as a path")
        n, tp = self.config.data_parallel_size, self.config.tensor_parallel_size
        dev = self.config.resolved().device
        if dev.startswith("cuda"):
            check_devices(torch.device(dev), n * tp)  # replica i: GPUs base + i*tp ..
        ctx = mp_context()
        self._outbox = ctx.Queue()
        self._inboxes, self._procs = [], []
        for i in range(n):
            rk = dict(
                kwargs, data_parallel_size=1, device=_replica_device(self.config.device, i, tp)
            )
            inbox = ctx.Queue()
            p = ctx.Process(
                target=replica_main,
                args=(i, os.getpid(), model, rk, inbox, self._outbox),
                name=f"structgen-dp{i}",
                daemon=False,
            )
            p.start()
            self._inboxes.append(inbox)
            self._procs.append(p)
        self.router = CacheAwareRouter(n)
        self._lock = threading.Condition()
        self._results: dict[str, tuple[str, Any]] = {}
        self._replica_of: dict[str, int] = {}  # pending request -> replica
        self.route_log: deque[tuple[str, int]] = deque(maxlen=10_000)  # recent (id, replica)
        self._failure: DistributedError | None = None
        self._listeners: dict[str, Any] = {}  # streamed request id -> callback(kind, payload)
        self.info: dict | None = None  # replica 0's tokenizer, configs, limits
        self._ids = itertools.count()
        self._finalizer = weakref.finalize(self, _shutdown, self._inboxes, self._procs)
        self._wait_ready(max(120.0, self.config.dist_timeout_s) * max(1, tp))
        self._collector = threading.Thread(
            target=self._collect, name="structgen-dp-router", daemon=True
        )
        self._collector.start()
        self._init_front(self.info)

    def _init_front(self, info: dict) -> None:
        """Tokenizer, vocabulary and limits of the front, from what replica 0 reports."""
        from structgen.fsm import Vocabulary

        self.tokenizer = info["tokenizer"]
        self.eos_token_ids = frozenset(info["eos_token_ids"])
        self.vocab = Vocabulary.from_tokenizer(self.tokenizer, eos_token_ids=info["eos_token_ids"])
        self.vocab_size = info["hf_config"].vocab_size
        self.device = "cpu"  # front-side requests never sample
        self._max_request_tokens = info["max_request_tokens"]

    @property
    def data_parallel_size(self) -> int:
        """Replicas."""
        return len(self._procs)

    # ------------------------------------------------------------------ startup
    def _wait_ready(self, timeout_s: float) -> None:
        pending, deadline = set(range(len(self._procs))), time.monotonic() + timeout_s
        while pending:
            try:
                kind, index, _, payload = self._outbox.get(timeout=_POLL_S)
            except queue.Empty:
                dead = [i for i in pending if not self._procs[i].is_alive()]
                if dead or time.monotonic() > deadline:
                    self.close()
                    what = (
                        f"exited with code {self._procs[dead[0]].exitcode}"
                        if dead
                        else f"did not start within {timeout_s:.0f} s"
                    )
                    raise DistributedError(
                        f"data-parallel replica {(dead or sorted(pending))[0]} {what}"
                    ) from None
                continue
            if kind == "failed":
                self.close()
                if isinstance(payload, StructgenError):
                    raise payload
                raise DistributedError(f"data-parallel replica {index} failed to start: {payload}")
            if self.info is None:
                self.info = payload
            pending.discard(index)

    # --------------------------------------------------------------- collector
    def _collect(self) -> None:
        while self._finalizer.alive:
            try:
                kind, index, rid, payload = self._outbox.get(timeout=_POLL_S)
            except queue.Empty:
                self._check_replicas()
                continue
            except (EOFError, OSError):
                return
            with self._lock:
                if kind == "crashed":
                    self._fail(
                        DistributedError(f"data-parallel replica {index} crashed: {payload}")
                    )
                    continue
                if kind in ("done", "error"):
                    self.router.finished(index)
                    self._replica_of.pop(rid, None)
                listener = self._listeners.get(rid)
                if listener is not None:
                    if kind != "delta":
                        del self._listeners[rid]
                    listener(kind, payload)
                elif kind != "delta":
                    self._results[rid] = (kind, payload)
                self._lock.notify_all()

    def _check_replicas(self) -> None:
        dead = [(i, p.exitcode) for i, p in enumerate(self._procs) if not p.is_alive()]
        if dead and self._finalizer.alive:
            with self._lock:
                i, code = dead[0]
                self._fail(DistributedError(f"data-parallel replica {i} exited with code {code}"))
                self._lock.notify_all()

    def _fail(self, err: DistributedError) -> None:
        """Record the first failure and end every streamed request with it (lock held)."""
        if self._failure is None:
            self._failure = err
        listeners, self._listeners = self._listeners, {}
        for listener in listeners.values():
            listener("dead", self._failure)
        self._lock.notify_all()

    def _wait(self, rids: list[str]) -> dict[str, tuple[str, Any]]:
        with self._lock:
            while True:
                if self._failure is not None:
                    raise self._failure
                if all(r in self._results for r in rids):
                    return {r: self._results.pop(r) for r in rids}
                self._lock.wait(_POLL_S)

    # ------------------------------------------------------------------- public
    def submit(
        self,
        prompt: Any,
        params: SamplingParams | None = None,
        constraint: Any = None,
        request_id: str | None = None,
        listener=None,
    ) -> str:
        """Route one request to a replica; returns its request id (see :meth:`result`).

        Args:
            prompt: as for ``Engine.generate``.
            params: as for ``Engine.generate``.
            constraint: as for ``Engine.generate``. The constraint goes to
                the replica as its spec (``structgen.fsm.spec.spec_of``: a compiled grammar
                as the spec it was compiled from), which the replica compiles.
            request_id: an id unique among pending requests; None = a fresh one.
            listener: None (collect with :meth:`result`), or ``listener(kind, payload)``
                called on the router thread with ``("delta", RequestOutput)`` snapshots,
                then one of ``("done", RequestOutput)``, ``("error", exception)`` or
                ``("dead", DistributedError)``.

        Raises:
            RequestError: ``params.n > 1`` (use one request per branch here), or a
                constraint of an unsupported type.
            DistributedError: the engine is down.
        """
        params = params or SamplingParams()
        _check_params(params)
        if self._failure is not None:
            raise self._failure
        spec = spec_of(constraint)
        rid = f"dp-{next(self._ids)}" if request_id is None else str(request_id)
        with self._lock:
            if rid in self._replica_of:
                raise RequestError(f"request id {rid!r} is already running")
            replica = self.router.route(routing_key(prompt))
            self._replica_of[rid] = replica
            self.route_log.append((rid, replica))
            if listener is not None:
                self._listeners[rid] = listener
        self._inboxes[replica].put(("add", rid, prompt, params, spec, listener is not None))
        return rid

    def abort(self, rid: str) -> None:
        """Abort a pending request (its output comes back with ``finish_reason="abort"``)."""
        replica = self._replica_of.get(rid)
        if replica is not None:
            self._inboxes[replica].put(("abort", rid))

    def result(self, rid: str) -> RequestOutput:
        """Wait for the output of a submitted request.

        Raises:
            RequestError, SchemaError, RegexError: the replica refused the request.
            DistributedError: a replica died.
        """
        kind, payload = self._wait([rid])[rid]
        if kind == "error":
            raise payload
        return payload

    def generate(
        self,
        prompts: Sequence[Any] | str,
        params: SamplingParams | list | None = None,
        constraint: Any = None,
        *,
        use_tqdm: bool = False,
    ) -> list[RequestOutput]:
        """Like :meth:`Engine.generate`: every prompt routed, run on its replica; outputs in
        order (``use_tqdm``: a progress bar over finished requests).

        Every prompt is encoded here first (the front's tokenizer) and checked as
        ``Engine.generate`` checks it, before any request is sent: a prompt that is not
        one, a prompt with no room in the context, params that are not a SamplingParams
        or ask for ``n > 1``, or a constraint of an unsupported type raise for the whole
        call, naming the prompt (``prompts[I] (of N): ...``) where there are several.
        A constraint's compile errors come from its replica (raised as :meth:`result`).

        Raises:
            RequestError: as above, or a replica refused a request.
            PromptTooLongError: a prompt leaves no room for one output token in the
                context (or the KV cache), as ``Engine.generate`` refuses it.
            ConfigError: a text or chat prompt and the model has no tokenizer.
            SchemaError, RegexError: a constraint does not compile (on its replica).
            DistributedError: a replica died.
        """
        prompts = self._prompt_list(prompts)
        n = len(prompts)
        params_list = self._per_prompt(params or SamplingParams(), n, "params", lambda v: False)
        cons_list = self._per_prompt(constraint, n, "constraint", lambda v: False)
        for i, (p, sp, c) in enumerate(zip(prompts, params_list, cons_list)):
            with naming_prompt(i, n):
                self._check_request(p, sp or SamplingParams(), c)
        rids = [self.submit(p, sp, c) for p, sp, c in zip(prompts, params_list, cons_list)]
        if use_tqdm:
            from tqdm.auto import tqdm

            results = {}
            for rid in tqdm(rids, desc="generate"):
                results.update(self._wait([rid]))
        else:
            results = self._wait(rids)
        outs = []
        for rid in rids:
            kind, payload = results[rid]
            if kind == "error":
                raise payload
            outs.append(payload)
        return outs

    def _check_request(self, prompt: Any, params: Any, constraint: Any) -> None:
        """What :meth:`submit` and the replica would refuse of a request, checked before
        anything is sent: params, the constraint's type, the prompt (encoded with the
        front's tokenizer) and its room in the context.

        Raises:
            RequestError, PromptTooLongError, ConfigError: as :meth:`generate`.
        """
        _check_params(params)
        spec_of(constraint)
        self.check_prompt_fits(self.encode_prompt(prompt))

    def run_requests(self, reqs: Sequence[Request], listener=None) -> list[RequestOutput]:
        """See :meth:`BaseEngine.run_requests`: each request (made by :meth:`make_request`)
        is routed to a replica as its prompt ids, params and constraint spec; snapshots
        come back through the router thread and reach ``listener`` on this thread.
        """
        events: queue.SimpleQueue = queue.SimpleQueue()
        rids: list[str] = []
        try:
            for i, req in enumerate(reqs):
                cb = functools.partial(_put_event, events, i) if listener is not None else None
                rids.append(
                    self.submit(
                        req.prompt_token_ids, req.params, req.constraint, req.request_id, cb
                    )
                )
            if listener is None:
                return [self.result(rid) for rid in rids]
            outs: list[RequestOutput | None] = [None] * len(reqs)
            while any(o is None for o in outs):
                i, kind, payload = events.get()
                if kind in ("error", "dead"):
                    raise payload
                if kind == "done":
                    outs[i] = payload
                listener(i, payload)
            return outs
        except BaseException:
            for rid in rids:  # never leave our requests running on a replica
                self.abort(rid)
            raise

    def max_request_tokens(self) -> int:
        """Most tokens (prompt + output) one request can hold (replica 0's limit)."""
        return self._max_request_tokens

    def replica_of(self, rid: str) -> int | None:
        """The replica a request was routed to (pending, or among the last 10,000 routed)."""
        if rid in self._replica_of:
            return self._replica_of[rid]
        return next((r for i, r in reversed(self.route_log) if i == rid), None)

    def stats(self) -> dict:
        """``replicas``: each replica's ``Engine.stats()``; every ``Engine.stats()`` key over
        all replicas (counters summed, rates averaged, ``prefix_hit_rate`` recomputed); router
        counters ``routed`` / ``cache_routed`` /
        ``outstanding`` (per replica).
        """
        replicas = self._ask_replicas("stats")
        total = {}
        for k, v in replicas[
            0
        ].items():  # counters add up; rates are averaged, the hit rate recomputed
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                vals = [r[k] for r in replicas]
                total[k] = sum(vals) if isinstance(v, int) else sum(vals) / len(vals)
        total["prefix_hit_rate"] = total["prefix_hit_tokens"] / max(1, total["prompt_tokens"])
        return {
            **total,
            "replicas": replicas,
            "routed": list(self.router.num_routed),
            "cache_routed": list(self.router.num_cache_routed),
            "outstanding": list(self.router.outstanding),
        }

    def memory_report(self) -> dict:
        """Every byte count of ``Engine.memory_report()`` summed over replicas, and
        ``replicas``: each replica's ``Engine.memory_report()``.

        Raises:
            DistributedError: a replica died.
        """
        replicas = self._ask_replicas("memory")
        total = {k: sum(r[k] for r in replicas) for k in replicas[0]}
        return {**total, "replicas": replicas}

    def _ask_replicas(self, kind: str) -> list[dict]:
        """Every replica's answer to a ``(kind, token)`` message, in replica order."""
        token = f"{kind}-{next(self._ids)}"
        keys = [f"{token}-{i}" for i in range(len(self._procs))]
        for i, inbox in enumerate(self._inboxes):
            inbox.put((kind, keys[i]))
        got = self._wait(keys)
        return [got[k][1] for k in keys]

    def close(self) -> None:
        """Stop every replica (idempotent; also at exit)."""
        self._finalizer()


def _check_params(params: Any) -> None:
    """Raise RequestError unless ``params`` is a SamplingParams with ``n == 1``."""
    if not isinstance(params, SamplingParams):
        raise RequestError(f"params must be SamplingParams, got {type(params).__name__}")
    if params.n != 1:
        raise RequestError("n > 1 is not served by a DataParallelEngine; send n requests")


def _put_event(events: queue.SimpleQueue, index: int, kind: str, payload: Any) -> None:
    events.put((index, kind, payload))


def _shutdown(inboxes, procs) -> None:
    """Ask replicas to close, wait up to 15 s, then kill. Raises: never."""
    for inbox, p in zip(inboxes, procs):
        if p.is_alive():
            inbox.put(("close",))
    deadline = time.monotonic() + 15.0
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(2.0)
