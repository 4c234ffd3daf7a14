"""``POST /v1/chat/completions``: the model's chat template, constraints, tools, streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from structgen.server import serving as sv
from structgen.server.protocol import APIError, ChatCompletionRequest
from structgen.server.reasoning import ReasoningSplit
from structgen.server.tools import ToolPlan, collect, plan_tools_async, render_tool_call

__all__ = ["chat_response", "chat_stream", "prepare_chat"]


def _text(content: Any, i: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in content:
        if part.type != "text" or part.text is None:
            raise APIError(
                f"content part type {part.type!r} is not supported (text only)",
                param=f"messages[{i}].content",
            )
        parts.append(part.text)
    return "".join(parts)


def _structured_call(call: Any) -> dict:
    """An earlier call as chat templates read it (arguments as an object when JSON)."""
    try:
        args = json.loads(call.function.arguments) if call.function.arguments else {}
    except json.JSONDecodeError:
        args = call.function.arguments
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.function.name, "arguments": args},
    }


def template_messages(req: ChatCompletionRequest, plan: ToolPlan | None) -> list[dict]:
    """The messages handed to the chat template (see ``tools.py``): ``{"role",
    "content"}``, plus structured ``tool_calls`` and the tool messages' ``tool_call_id``
    and ``name`` for a template in a native tool-call format.
    """
    native = plan is not None and plan.format.native
    msgs = []
    for i, m in enumerate(req.messages):
        content = _text(m.content, i)
        if native:
            msg: dict = {"role": "system" if m.role == "developer" else m.role}
            msg["content"] = content
            if m.tool_calls:
                msg["tool_calls"] = [_structured_call(c) for c in m.tool_calls]
            if m.tool_call_id is not None:
                msg["tool_call_id"] = m.tool_call_id
            if m.name is not None:
                msg["name"] = m.name
            msgs.append(msg)
            continue
        if m.role == "assistant" and m.tool_calls:
            calls = [render_tool_call(c.function.name, c.function.arguments) for c in m.tool_calls]
            content = "\n".join(([content] if content else []) + calls)
        role = "system" if m.role == "developer" else m.role
        msgs.append({"role": role, "content": content})
    if plan is not None and plan.system_text:
        if msgs[0]["role"] == "system":
            msgs[0] = {"role": "system", "content": msgs[0]["content"] + "\n\n" + plan.system_text}
        else:
            msgs.insert(0, {"role": "system", "content": plan.system_text})
    return msgs


class ChatJob:
    """A validated chat request, ready to run."""

    def __init__(
        self,
        req: ChatCompletionRequest,
        branches: list[sv.Branch],
        grammar: Any,
        plan: ToolPlan | None,
        request_id: str,
    ) -> None:
        self.req = req
        self.branches = branches
        self.grammar = grammar
        self.plan = plan
        self.request_id = request_id
        self.top = (req.top_logprobs or 0) if req.logprobs else None


async def prepare_chat(state: sv.ServerState, req: ChatCompletionRequest) -> ChatJob:
    """Validate, render the template, compile the constraint.

    Raises:
        APIError: any invalid field (400), before anything is submitted.
    """
    if req.n > state.max_n:
        raise APIError(f"n must be at most {state.max_n}, got {req.n}", param="n")
    if req.top_logprobs and not req.logprobs:  # vLLM's rule (0 alone is allowed)
        raise APIError(
            "top_logprobs needs logprobs: true (it is the number of alternatives "
            "listed beside each token's log-probability)",
            param="top_logprobs",
        )
    if req.tool_choice is not None and req.tool_choice != "none" and not req.tools:
        raise APIError("tool_choice needs tools", param="tool_choice")
    tokenizer = getattr(state.engine.engine, "tokenizer", None)
    template = getattr(tokenizer, "chat_template", None)
    plan = None
    if req.tools:
        plan = await plan_tools_async(
            state.compile_pool, req.tools, req.tool_choice, req.parallel_tool_calls, template
        )
    term, param = sv.request_constraint(req, has_tools=plan is not None)
    if plan is not None:
        if term is not None:
            raise APIError(
                f"{param} cannot be combined with tools unless tool_choice is 'none'", param=param
            )
        term, param = plan.constraint, "tools"
        if req.constraint_trigger is not None:  # think first, then the call(s)
            from structgen.tools.constraint import after_trigger

            term = after_trigger(term, req.constraint_trigger)
    try:
        msgs = template_messages(req, plan)
        if plan is not None and plan.template_tools is not None:
            text = tokenizer.apply_chat_template(
                msgs, tools=plan.template_tools, tokenize=False, add_generation_prompt=True
            )
            ids = tokenizer.encode(text, add_special_tokens=False)
        else:
            ids = state.engine.engine.apply_chat_template(msgs)
    except APIError:
        raise
    except Exception as exc:  # noqa: BLE001 - the template rejected the conversation
        raise APIError(f"the chat template failed: {exc}", param="messages") from None
    room = sv.check_prompt(state, ids, "messages")
    sv.check_token_ids(state, req)
    max_tokens = req.max_completion_tokens or req.max_tokens
    top = (req.top_logprobs or 0) if req.logprobs else None
    params = sv.sampling_params(req, max_tokens, room, top)
    grammar = plan.grammar(state.vocab, req.constraint_trigger) if plan is not None else None
    if grammar is None:
        grammar = await sv.compile_constraint(state, term, param)
        if plan is not None:
            plan.keep_grammar(state.vocab, req.constraint_trigger, grammar)
    branches = sv.branches_for([ids], params, req.n)
    return ChatJob(req, branches, grammar, plan, state.new_id("chatcmpl"))


class _ReasoningThenTools:
    """``ReasoningSplit`` whose answer part goes through the plan's ``ToolCallParser``."""

    def __init__(self, trigger: str, plan: ToolPlan) -> None:
        self.split = ReasoningSplit(trigger)
        self.tools = plan.parser()

    def _route(self, deltas: list[dict]) -> list[dict]:
        out: list[dict] = []
        for d in deltas:
            out += self.tools.feed(d["content"]) if "content" in d else [d]
        return out

    def feed(self, delta: str) -> list[dict]:
        return self._route(self.split.feed(delta))

    def finish(self) -> list[dict]:
        return self._route(self.split.finish()) + self.tools.finish()

    @property
    def is_complete_call(self) -> bool:
        return self.tools.is_complete_call


def _parser(job: ChatJob) -> Any:
    """The per-choice delta parser: tool calls and/or a reasoning split, or None."""
    trigger = job.req.constraint_trigger
    if job.plan is not None:
        if trigger is not None:
            return _ReasoningThenTools(trigger, job.plan)
        return job.plan.parser()
    return ReasoningSplit(trigger) if trigger is not None else None


def _message(job: ChatJob, out: Any) -> tuple[dict, str]:
    parser = _parser(job)
    if parser is None:
        return {"role": "assistant", "content": out.text}, sv.finish_reason(out)
    deltas = parser.feed(out.text) + parser.finish()
    content, calls = collect(deltas)
    msg: dict = {"role": "assistant", "content": content}
    reasoning = [d["reasoning_content"] for d in deltas if "reasoning_content" in d]
    if job.req.constraint_trigger is not None:
        msg["reasoning_content"] = "".join(reasoning) if reasoning else None
    if calls:
        msg["tool_calls"] = calls
    return msg, sv.finish_reason(out, getattr(parser, "is_complete_call", False))


async def chat_response(state: sv.ServerState, job: ChatJob) -> dict:
    """The non-streamed ``chat.completion`` object."""
    finals = await sv.final_outputs(state, job.branches, job.grammar, job.request_id)
    sv.raise_if_failed(finals)
    choices = []
    for idx in sorted(finals):
        out = finals[idx]
        msg, reason = _message(job, out)
        lp = None
        if job.top is not None:
            lp = {"content": sv.chat_logprobs(state.vocab, out.logprobs or [], job.top)}
        choices.append({"index": idx, "message": msg, "logprobs": lp, "finish_reason": reason})
    return {
        "id": job.request_id,
        "object": "chat.completion",
        "created": sv.now(),
        "model": state.model_name,
        "choices": choices,
        "usage": sv.usage(job.branches, finals),
    }


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def chat_stream(state: sv.ServerState, job: ChatJob) -> AsyncIterator[str]:
    """Server-sent ``chat.completion.chunk`` events, then ``[DONE]``."""
    created = sv.now()

    def chunk(idx: int, delta: dict, reason: str | None = None, lp: list | None = None) -> str:
        choice = {"index": idx, "delta": delta, "logprobs": None, "finish_reason": reason}
        if lp is not None:
            choice["logprobs"] = {"content": lp}
        return _sse(
            {
                "id": job.request_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": state.model_name,
                "choices": [choice],
            }
        )

    streams = {b.index: _parser(job) for b in job.branches}
    lp_sent = {b.index: 0 for b in job.branches}
    finals: dict[int, Any] = {}
    for b in job.branches:
        yield chunk(b.index, {"role": "assistant", "content": ""})
    async for b, out in sv.run_branches(state, job.branches, job.grammar, job.request_id):
        ts = streams[b.index]
        if ts is not None:
            deltas = ts.feed(out.delta_text)
        else:
            deltas = [{"content": out.delta_text}] if out.delta_text else []
        if out.finish_reason is not None and ts is not None:
            deltas += ts.finish()
        lp = None
        if job.top is not None and out.logprobs and len(out.logprobs) > lp_sent[b.index]:
            lp = sv.chat_logprobs(state.vocab, out.logprobs[lp_sent[b.index] :], job.top)
            lp_sent[b.index] = len(out.logprobs)
            if not deltas:
                deltas = [{}]
        for d in deltas:
            yield chunk(b.index, d, lp=lp)
            lp = None
        if out.finish_reason is not None:
            if out.finish_reason == "error":
                yield _sse(
                    APIError(
                        f"generation failed: {out.error}", status=500, type="server_error"
                    ).body()
                )
                return
            finals[b.index] = out
            is_call = getattr(ts, "is_complete_call", False)
            yield chunk(b.index, {}, sv.finish_reason(out, is_call))
    opts = job.req.stream_options
    if opts is not None and opts.include_usage:
        yield _sse(
            {
                "id": job.request_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": state.model_name,
                "choices": [],
                "usage": sv.usage(job.branches, finals),
            }
        )
    yield "data: [DONE]\n\n"
