"""One data-parallel replica: a whole ``Engine`` in its own process, serving an inbox queue.

Messages in: ``("add", request_id, prompt, params, constraint, stream)``, ``("abort",
request_id)``, ``("stats", token)``, ``("close",)``. Messages out, on the shared outbox:
``(kind, replica index, request_id, payload)`` with kind ``ready`` (payload: what a front
needs to tokenize without weights), ``failed`` (could not start), ``delta`` (a streamed
snapshot), ``done`` (a RequestOutput), ``error`` (the request was refused), ``stats``,
``crashed`` (the engine died).
"""

from __future__ import annotations

import pickle
import queue
from typing import Any

from structgen.errors import RequestError, StructgenError
from structgen.runtime.distributed.group import watch_parent

__all__ = ["replica_main"]

_POLL_S = 0.2


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RequestError with its message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001  (any pickling failure: fall back to the message)
        return RequestError(f"{type(exc).__name__}: {exc}")


def replica_main(index: int, owner_pid: int, model: str | None, kwargs: dict, inbox, outbox) -> None:
    """Entry point of replica ``index``: build an Engine, then serve the inbox until
    ``("close",)``. Messages out: ``(kind, index, request_id, payload)`` with kind
    ``ready``, ``failed`` (could not start), ``done`` (a RequestOutput), ``error`` (the
    request was refused: an exception), ``stats``, ``crashed`` (the engine died)."""
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
    return {"tokenizer": engine.tokenizer, "eos_token_ids": sorted(engine.eos_token_ids),
            "hf_config": engine.loaded.config,
            "max_request_tokens": engine.scheduler.max_request_tokens()}


def _publish(outbox, index: int, rid: str, req, streamed: dict[str, int]) -> bool:
    """Send a streamed request's new text (or a finished request's output); True when done.

    Snapshots follow ``AsyncEngine``: cumulative text/ids plus ``delta_text`` since the
    last one, never half a character."""
    out = req.to_output()
    if req.status.is_finished:
        if rid in streamed:
            out.delta_text = out.text[streamed.pop(rid):]
        outbox.put(("done", index, rid, out))
        return True
    if rid in streamed:
        out.delta_text = req.detokenizer.pop_delta()
        if out.delta_text:
            streamed[rid] += len(out.delta_text)
            outbox.put(("delta", index, rid, out))
    return False


def _serve(engine, index: int, inbox, outbox) -> None:
    running: dict[str, Any] = {}
    streamed: dict[str, int] = {}  # streamed request -> characters sent
    while True:
        try:
            msg = inbox.get(timeout=_POLL_S) if not running else inbox.get_nowait()
        except queue.Empty:
            msg = None
        while msg is not None:
            kind = msg[0]
            if kind == "close":
                return
            if kind == "add":
                _, rid, prompt, params, constraint, stream = msg
                try:
                    req = engine.make_request(prompt, params, constraint, request_id=rid)
                    engine.add_request(req)
                    running[rid] = req
                    if stream:
                        streamed[rid] = 0
                except StructgenError as exc:
                    outbox.put(("error", index, rid, _portable(exc)))
            elif kind == "abort" and msg[1] in running:
                engine.abort_request(running[msg[1]])
            elif kind == "stats":
                outbox.put(("stats", index, msg[1], engine.stats()))
            try:
                msg = inbox.get_nowait()
            except queue.Empty:
                msg = None
        if running and engine.scheduler.has_unfinished:
            engine.step()
        for rid, req in list(running.items()):
            if _publish(outbox, index, rid, req, streamed):
                del running[rid]
