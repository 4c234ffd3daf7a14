"""``POST /v1/completions``: raw prompts (strings or token ids), echo, prompt log-probs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

from structgen.server import serving as sv
from structgen.server.protocol import APIError, CompletionRequest

__all__ = ["completion_response", "completion_stream", "prepare_completion"]


class CompletionJob:
    """A validated completions request, ready to run."""

    def __init__(
        self,
        req: CompletionRequest,
        prompts: list[list[int]],
        texts: list[str],
        branches: list[sv.Branch],
        grammar: Any,
        request_id: str,
    ) -> None:
        self.req = req
        self.prompts = prompts
        self.texts = texts  # prompt texts, for echo
        self.branches = branches
        self.grammar = grammar
        self.request_id = request_id


def _prompts(state: sv.ServerState, prompt: Any) -> tuple[list[list[int]], list[str]]:
    tok = state.engine.engine.tokenizer
    if isinstance(prompt, str):
        prompt = [prompt]
    if not prompt:
        raise APIError("the prompt is empty", param="prompt")
    if all(isinstance(t, int) for t in prompt):
        prompt = [prompt]
    ids, texts = [], []
    for p in prompt:
        if isinstance(p, str):
            ids.append(tok.encode(p, add_special_tokens=False))
            texts.append(p)
        else:
            ids.append(list(p))
            texts.append(tok.decode(list(p)) if p else "")
    return ids, texts


async def prepare_completion(state: sv.ServerState, req: CompletionRequest) -> CompletionJob:
    """Validate, tokenize, compile the constraint.

    Raises:
        APIError: any invalid field (400), before anything is submitted.
    """
    if req.n > state.max_n:
        raise APIError(f"n must be at most {state.max_n}, got {req.n}", param="n")
    if req.suffix:
        raise APIError("suffix is not supported", param="suffix")
    prompts, texts = _prompts(state, req.prompt)
    room = min(sv.check_prompt(state, ids, "prompt") for ids in prompts)
    sv.check_token_ids(state, req)
    term, param = sv.request_constraint(req)
    params = sv.sampling_params(req, req.max_tokens, room, req.logprobs)
    prompt_lp = req.logprobs if (req.echo and req.logprobs is not None) else None
    if prompt_lp is not None and req.logprob_start_len:
        # SGLang's logprob_start_len: prompt log-probs from there on, the cache may serve the rest
        params = dataclasses.replace(params, prompt_logprobs_start=req.logprob_start_len)
    grammar = await sv.compile_constraint(state, term, param)
    branches = sv.branches_for(prompts, params, req.n, prompt_lp)
    return CompletionJob(req, prompts, texts, branches, grammar, state.new_id("cmpl"))


def _prompt_logprobs(job: CompletionJob, b: sv.Branch, finals: dict) -> Any:
    first = finals.get(b.prompt_index * job.req.n)
    return first.prompt_logprobs if first is not None else None


def _choice(
    state: sv.ServerState, job: CompletionJob, b: sv.Branch, out: Any, finals: dict
) -> dict:
    req = job.req
    text = out.text
    lp = None
    if req.logprobs is not None:
        ids, entries = list(out.token_ids), list(out.logprobs or [])
        if req.echo:
            plp = _prompt_logprobs(job, b, finals) or [None] * len(b.ids)
            ids, entries = list(b.ids) + ids, list(plp) + entries
        lp = sv.completion_logprobs(state.vocab, ids, entries, req.logprobs)
    if req.echo:
        text = job.texts[b.prompt_index] + text
    return {"index": b.index, "text": text, "logprobs": lp, "finish_reason": sv.finish_reason(out)}


async def completion_response(state: sv.ServerState, job: CompletionJob) -> dict:
    """The non-streamed ``text_completion`` object."""
    finals = await sv.final_outputs(state, job.branches, job.grammar, job.request_id)
    sv.raise_if_failed(finals)
    choices = [_choice(state, job, b, finals[b.index], finals) for b in job.branches]
    return {
        "id": job.request_id,
        "object": "text_completion",
        "created": sv.now(),
        "model": state.model_name,
        "choices": choices,
        "usage": sv.usage(job.branches, finals),
    }


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def completion_stream(state: sv.ServerState, job: CompletionJob) -> AsyncIterator[str]:
    """Server-sent ``text_completion`` chunks, then ``[DONE]``.

    With ``echo`` the prompt text comes first (its log-probs are not streamed).
    """
    req = job.req
    created = sv.now()

    def chunk(idx: int, text: str, reason: str | None = None, lp: dict | None = None) -> str:
        return _sse(
            {
                "id": job.request_id,
                "object": "text_completion",
                "created": created,
                "model": state.model_name,
                "choices": [{"index": idx, "text": text, "logprobs": lp, "finish_reason": reason}],
            }
        )

    if req.echo:
        for b in job.branches:
            yield chunk(b.index, job.texts[b.prompt_index])
    sent = {b.index: 0 for b in job.branches}
    finals: dict[int, Any] = {}
    async for b, out in sv.run_branches(state, job.branches, job.grammar, job.request_id):
        lp = None
        if req.logprobs is not None and out.logprobs and len(out.logprobs) > sent[b.index]:
            lo = sent[b.index]
            lp = sv.completion_logprobs(
                state.vocab, out.token_ids[lo : len(out.logprobs)], out.logprobs[lo:], req.logprobs
            )
            sent[b.index] = len(out.logprobs)
        if out.delta_text or lp is not None:
            yield chunk(b.index, out.delta_text, lp=lp)
        if out.finish_reason is not None:
            if out.finish_reason == "error":
                yield _sse(
                    {
                        "error": {
                            "message": f"generation failed: {out.error}",
                            "type": "server_error",
                            "param": None,
                            "code": None,
                        }
                    }
                )
                return
            finals[b.index] = out
            yield chunk(b.index, "", sv.finish_reason(out))
    opts = req.stream_options
    if opts is not None and opts.include_usage:
        yield _sse(
            {
                "id": job.request_id,
                "object": "text_completion",
                "created": created,
                "model": state.model_name,
                "choices": [],
                "usage": sv.usage(job.branches, finals),
            }
        )
    yield "data: [DONE]\n\n"
