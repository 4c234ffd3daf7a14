"""One data-parallel replica: a whole ``Engine`` in its own process, its
:class:`~structgen.runtime.engine_loop.EngineLoop` serving an inbox queue.

Messages in: ``("add", request_id, prompt, params, constraint, stream)``, ``("abort",
request_id)``, ``("stats", token)``, ``("memory", token)``, ``("close",)``. Messages out, on
the shared outbox: ``(kind, replica index, request_id, payload)`` with kind ``ready``
(payload: what a front needs to tokenize without weights), ``failed`` (could not start),
``delta`` (a streamed snapshot), ``done`` (a RequestOutput), ``error`` (the request was
refused), ``stats``, ``memory`` (``Engine.memory_report()``), ``crashed`` (the engine died).
"""

from __future__ import annotations

import functools
import pickle

from structgen.errors import RequestError, StructgenError
from structgen.runtime.distributed.group import watch_parent
from structgen.runtime.engine_loop import EngineLoop
from structgen.runtime.outputs import RequestOutput

__all__ = ["replica_main"]

_POLL_S = 0.2


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RequestError with its message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001  (any pickling failure: fall back to the message)
        return RequestError(f"{type(exc).__name__}: {exc}")


def replica_main(
    index: int, owner_pid: int, model: str | None, kwargs: dict, inbox, outbox
) -> None:
    """Entry point of replica ``index``: build an Engine, then serve the inbox until
    ``("close",)``. Messages out: ``(kind, index, request_id, payload)`` with kind
    ``ready``, ``failed`` (could not start), ``done`` (a RequestOutput), ``error`` (the
    request was refused: an exception), ``stats``, ``crashed`` (the engine died).
    """
    from structgen.runtime.engine import Engine

    watch_parent(owner_pid)
    try:
        engine = Engine(model, **kwargs)
    except BaseException as exc:  # noqa: BLE001  (reported to the front, which raises it)
        outbox.put(("failed", index, None, _portable(exc)))
        return
    outbox.put(("ready", index, None, _portable_info(engine)))
    try:
        _serve(engine, index, inbox, outbox)
    except BaseException as exc:
        outbox.put(("crashed", index, None, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        engine.close()


def _portable_info(engine) -> dict:
    """What a front needs to tokenize, template and validate without loading weights."""
    return {
        "tokenizer": engine.tokenizer,
        "eos_token_ids": sorted(engine.eos_token_ids),
        "hf_config": engine.loaded.config,
        "max_request_tokens": engine.max_request_tokens(),
    }


def _send_output(outbox, index: int, out: RequestOutput) -> None:
    """Put a snapshot (``delta``) or a final output (``done``) on the outbox."""
    kind = "done" if out.finish_reason is not None else "delta"
    outbox.put((kind, index, out.request_id, out))


def _serve(engine, index: int, inbox, outbox) -> None:
    """Serve the inbox until ``("close",)``; snapshots follow ``AsyncEngine``'s (the
    loop's publisher): cumulative text/ids plus ``delta_text``, never half a character.
    """
    loop = EngineLoop(engine, inbox=inbox)
    send = functools.partial(_send_output, outbox, index)

    def handle(msg: tuple) -> bool:
        kind = msg[0]
        if kind == "close":
            return False
        if kind == "add":
            _, rid, prompt, params, constraint, stream = msg
            try:
                req = engine.make_request(prompt, params, constraint, request_id=rid)
            except StructgenError as exc:
                outbox.put(("error", index, rid, _portable(exc)))
                return True
            loop.publisher.watch(req, send, stream=stream)
            loop.add(req)
        elif kind == "abort":
            req = loop.publisher.find(msg[1])
            if req is not None:
                loop.abort(req)
        elif kind == "stats":
            outbox.put(("stats", index, msg[1], engine.stats()))
        elif kind == "memory":
            outbox.put(("memory", index, msg[1], engine.memory_report()))
        return True

    loop.serve(handle, _POLL_S)
