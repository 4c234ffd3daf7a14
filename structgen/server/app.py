"""The FastAPI application: routes, authentication, error bodies, disconnect handling."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.responses import StreamingResponse

from structgen.errors import GrammarTooComplexError
from structgen.fsm.nesting import loads
from structgen.server.chat import chat_response, chat_stream, prepare_chat
from structgen.server.completions import completion_response, completion_stream, prepare_completion
from structgen.server.metrics import ServerMetrics
from structgen.server.protocol import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    parse_request,
)
from structgen.server.serving import ServerState

__all__ = ["create_app"]


class _EventStream(StreamingResponse):
    """SSE response that listens for the client's disconnect and always closes its body
    iterator (so the generator's ``finally`` aborts the engine requests at once).
    """

    media_type = "text/event-stream"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        stream = asyncio.ensure_future(self.stream_response(send))
        watcher = asyncio.ensure_future(listen())
        try:
            await asyncio.wait({stream, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (stream, watcher):
                t.cancel()
            await asyncio.gather(stream, watcher, return_exceptions=True)
            await self.body_iterator.aclose()


async def _until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """Await ``work``, cancelling it if the client disconnects first.

    Raises:
        APIError: 499 when the client went away (nobody reads it).
    """
    task = asyncio.ensure_future(work)

    async def listen() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(listen())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise APIError("client disconnected", status=499, type="client_closed")
    return task.result()


async def _json_body(request: Request) -> Any:
    body = await request.body()
    try:
        return loads(body)  # any nesting up to nesting.MAX_JSON_DEPTH, without recursion
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(
            f"could not parse the request body as JSON: {exc}", code="invalid_json"
        ) from None
    except GrammarTooComplexError as exc:
        raise APIError(f"request body: {exc}", code="invalid_json") from None


def create_app(
    engine: Any,
    *,
    served_model_name: str | None = None,
    api_key: str | None = None,
    max_n: int = 16,
) -> FastAPI:
    """Build the OpenAI-compatible app over a running ``AsyncEngine``.

    Args:
        engine: the ``structgen.AsyncEngine`` every request goes through.
        served_model_name: the name in ``/v1/models`` and the accepted ``model`` value
            (the model path is accepted too); default: the model path, or
            ``"SmolLM2-135M-Instruct"`` for the packaged model. ``/v1/models`` also gives
            the model's ``max_model_len`` (vLLM's field): the most tokens, prompt + output,
            one request can hold (``engine.max_request_tokens()``), past which a prompt is
            a 400 ``context_length_exceeded``.
        api_key: when set, ``/v1/*`` needs ``Authorization: Bearer <api_key>`` (401
            otherwise); ``/health`` and ``/metrics`` stay open.
        max_n: largest ``n`` accepted (400 above).

    Returns:
        The FastAPI app (run it with uvicorn).
    """
    model_path = engine.engine.config.model
    name = served_model_name or model_path or "SmolLM2-135M-Instruct"
    state = ServerState(
        engine=engine, model_name=name, metrics=ServerMetrics(engine.stats), max_n=max_n
    )
    accepted = {name} | ({model_path} if model_path else set())
    app = FastAPI(title="structgen", docs_url=None, redoc_url=None)
    app.state.structgen = state

    async def check_key(request: Request) -> None:
        if api_key is None:
            return
        auth = request.headers.get("authorization", "")
        given = auth[7:] if auth.lower().startswith("bearer ") else ""
        if not secrets.compare_digest(given.encode(), api_key.encode()):
            raise APIError(
                "invalid or missing API key",
                status=401,
                type="authentication_error",
                code="invalid_api_key",
            )

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        err = APIError(
            f"internal error: {type(exc).__name__}: {exc}", status=500, type="server_error"
        )
        return JSONResponse(err.body(), status_code=500)

    @app.get("/health")
    async def health() -> dict:
        engine.stats()
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics() -> Response:
        body, ctype = state.metrics.render()
        return Response(body, media_type=ctype)

    @app.get("/stats")
    async def stats() -> dict:
        return engine.stats()

    @app.get("/v1/models", dependencies=[Depends(check_key)])
    async def models() -> dict:
        # vLLM's field: the most tokens (prompt + output) one request can hold, the limit
        # check_prompt's context_length_exceeded enforces
        card = {"id": name, "object": "model", "created": 0, "owned_by": "structgen"}
        card["max_model_len"] = engine.engine.max_request_tokens()
        return {"object": "list", "data": [card]}

    def check_model(req: Any) -> None:
        if req.model not in accepted:
            raise APIError(
                f"the model {req.model!r} does not exist; this server serves {name!r}",
                status=404,
                param="model",
                code="model_not_found",
            )

    async def serve(
        request: Request, model: type, prepare: Callable, respond: Callable, stream: Callable
    ) -> Response:
        req = parse_request(model, await _json_body(request))
        check_model(req)
        job = await prepare(state, req)
        if req.stream:
            return _EventStream(stream(state, job))
        return JSONResponse(await _until_disconnect(request, respond(state, job)))

    @app.post("/v1/chat/completions", dependencies=[Depends(check_key)])
    async def chat(request: Request) -> Response:
        return await serve(request, ChatCompletionRequest, prepare_chat, chat_response, chat_stream)

    @app.post("/v1/completions", dependencies=[Depends(check_key)])
    async def completions(request: Request) -> Response:
        return await serve(
            request, CompletionRequest, prepare_completion, completion_response, completion_stream
        )

    return app
