"""The per-step sampling path: mask logits, sample, and apply each sampled token.

Nothing here raises for a single bad request: a request whose grammar rejects its
token (which masking should make impossible) is failed alone.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from structgen.fsm.jump_forward import plan_jump_forward
from structgen.kernels.apply_token_bitmask import apply_token_bitmask
from structgen.runtime.logits_processing import apply_penalties_and_bias, top_logprobs
from structgen.runtime.request import Request
from structgen.runtime.sampler import sample

if TYPE_CHECKING:
    from structgen.runtime.engine import Engine

__all__ = [
    "sample_step", "process_sampled", "process_tokens", "jump_forward", "record_prompt_logprobs",
]


def sample_step(
    logits: torch.Tensor, reqs: list[Request], eos_ids: frozenset[int]
) -> tuple[list[int], list[dict[int, float] | None]]:
    """Process, mask and sample one token for each request.

    Order: logit bias and penalties, grammar bitmask, ``min_tokens`` EOS ban, then
    log-probabilities (rows that asked) and sampling.

    Args:
        logits: ``[R, V]`` float32, row ``r`` belongs to ``reqs[r]``; modified in place.
        reqs: the sampling requests.
        eos_ids: the model's EOS token ids.

    Returns:
        One token id per request, and per request its logprob dict (or None).
    """
    if not reqs:
        return [], []
    vocab_size = logits.shape[1]
    apply_penalties_and_bias(logits, reqs)
    constrained = [r for r, req in enumerate(reqs) if req.matcher is not None]
    if constrained:
        words = -(-vocab_size // 32)
        bitmask = torch.zeros((len(constrained), words), dtype=torch.int32)
        for row, r in enumerate(constrained):
            try:
                reqs[r].matcher.fill_bitmask(bitmask, row)
            except Exception as exc:  # e.g. GrammarTooComplexError building a lazy state
                reqs[r].finish("error", f"grammar failed: {type(exc).__name__}: {exc}")
                bitmask[row] = -1  # any token: the row's sample is discarded
        idx = torch.tensor(constrained, dtype=torch.int64, device=logits.device)
        apply_token_bitmask(logits, bitmask.to(logits.device), idx)
    for r, req in enumerate(reqs):
        p = req.params
        if len(req.output_token_ids) < p.min_tokens:
            banned = set(p.stop_token_ids or ()) | (set() if p.ignore_eos else set(eos_ids))
            if banned:
                logits[r, list(banned)] = float("-inf")
    tokens = sample(logits, [r.params for r in reqs], [r.generator for r in reqs])
    lp_rows = [r for r, req in enumerate(reqs) if req.params.logprobs is not None]
    logprobs: list[dict[int, float] | None] = [None] * len(reqs)
    if lp_rows:
        idx = torch.tensor(lp_rows, device=logits.device)
        dicts = top_logprobs(logits[idx], tokens[idx], [reqs[r].params.logprobs for r in lp_rows])
        for r, d in zip(lp_rows, dicts):
            logprobs[r] = d
    return tokens.tolist(), logprobs


def record_prompt_logprobs(req: Request, logits: torch.Tensor, first_pos: int) -> None:
    """Store log-probabilities of prompt tokens ``first_pos + 1 ...`` predicted by ``logits``.

    Args:
        req: the request (``params.prompt_logprobs`` set).
        logits: ``[P, V]``, row ``i`` computed at prompt position ``first_pos + i``.
        first_pos: prompt position of the first row.
    """
    # entries up to first_pos (the first token, cache-served rows, or rows recorded
    # before a preemption that are recomputed now) are None or kept; then this chunk's
    kept = (req.prompt_logprobs or [])[: first_pos + 1]
    req.prompt_logprobs = kept + [None] * (first_pos + 1 - len(kept))
    targets = torch.tensor(
        req.prompt_token_ids[first_pos + 1 : first_pos + 1 + logits.shape[0]], device=logits.device
    )
    dicts = top_logprobs(logits, targets, [req.params.prompt_logprobs] * logits.shape[0])
    req.prompt_logprobs.extend(dicts)


def _append(req: Request, token: int, logprob: dict[int, float] | None = None) -> None:
    req.output_token_ids.append(token)
    req.detokenizer.add_token(token)
    if req.params.logprobs is not None:
        if req.logprobs is None:
            req.logprobs = []
        req.logprobs.append(logprob if logprob is not None else {token: 0.0})


def _check_limits(req: Request, context_limit: int) -> bool:
    """Finish on a stop string, ``max_tokens`` or the context limit; True if finished."""
    if req.detokenizer.stopped:
        req.finish("stop")
    elif len(req.output_token_ids) >= req.params.max_tokens or req.num_tokens >= context_limit:
        req.finish("length")
    return req.status.is_finished


def _apply_token(engine: "Engine", req: Request, token: int, logprob: dict[int, float] | None) -> bool:
    """Grammar, EOS / stop and limit checks for one token; True if the request goes on."""
    p = req.params
    if req.matcher is not None and not req.matcher.advance(token):
        req.finish("error", f"grammar rejected sampled token {token}")
        return False
    is_eos = token in engine.eos_token_ids and not p.ignore_eos
    if is_eos or token in (p.stop_token_ids or ()):
        req.finish("stop")
        return False
    _append(req, token, logprob)
    if (req.matcher is not None and req.matcher.is_terminated()
            and len(req.output_token_ids) < p.max_tokens):
        req.finish("stop")  # the grammar is complete: nothing can follow
        return False
    return not _check_limits(req, engine.scheduler.max_request_tokens())


def process_sampled(
    engine: "Engine", req: Request, token: int, logprob: dict[int, float] | None = None
) -> None:
    """Apply one sampled token: grammar, EOS / stop checks, then jump-forward.

    Raises: never (failures finish the request with ``"error"``).
    """
    process_tokens(engine, req, [token], [logprob])


def process_tokens(
    engine: "Engine",
    req: Request,
    tokens: list[int],
    logprobs: list[dict[int, float] | None] | None = None,
) -> int:
    """Apply verified tokens in order (one sampled token, or a speculative step's accepted
    drafts plus the target's own token), stopping at the first that finishes the
    request or after which the grammar forces text; then jump-forward. Stopping at
    forced text keeps speculative output token-for-token that of plain decoding, which
    jump-forwards (and retokenizes) at that point.

    Returns:
        How many of ``tokens`` were applied (a finishing EOS / stop token counts).

    Raises: never (failures finish the request with ``"error"``).
    """
    if req.status.is_finished:  # failed while its mask was built
        return 0
    applied = 0
    try:
        if req.first_token_time is None:
            req.first_token_time = time.perf_counter()
        jump = req.matcher is not None and engine.config.jump_forward
        for i, token in enumerate(tokens):
            applied += 1
            if not _apply_token(engine, req, token, logprobs[i] if logprobs else None):
                return applied
            if jump and i + 1 < len(tokens) and req.matcher.forced_bytes():
                # plain decoding jumps forward here (canonical retokenization); the later
                # tokens were verified on a tokenization it would not produce: drop them
                break
        if jump:
            jump_forward(engine, req)
    except Exception as exc:  # one request's failure must not take the engine down
        req.finish("error", f"{type(exc).__name__}: {exc}")
    return applied


def jump_forward(engine: "Engine", req: Request) -> int:
    """Append the grammar's forced text as tokens, without sampling (one extend step).

    The fsm plans it (``structgen.fsm.jump_forward.plan_jump_forward``): the forced
    bytes are retokenized canonically together with the last generated tokens, so the
    model never conditions on a split that its tokenizer would not produce. Applying the
    plan drops ``num_drop`` trailing output tokens (matcher rolled back, their KV marked
    not computed) and appends the new tokens; their bytes extend the text exactly by the
    forced bytes. Forced tokens report logprob 0.0.

    Returns:
        Net number of tokens added.
    """
    limit = engine.scheduler.max_request_tokens()
    room = min(req.params.max_tokens - len(req.output_token_ids), limit - req.num_tokens)
    if room <= 0:
        return 0
    plan = plan_jump_forward(req.matcher, req.output_token_ids, engine.encode_text, engine.vocab,
                             max_append=room)
    if not plan:
        return 0
    token_bytes = engine.vocab.token_bytes
    if plan.num_drop:
        dropped = req.output_token_ids[-plan.num_drop :]
        del req.output_token_ids[-plan.num_drop :]
        if req.logprobs is not None:
            del req.logprobs[-plan.num_drop :]
        req.matcher.rollback(plan.num_drop)
        req.num_computed_tokens = min(req.num_computed_tokens, req.num_tokens)
        skip = sum(len(token_bytes[t]) for t in dropped)  # bytes already in the text
    else:
        skip = 0
    new_bytes = b"".join(token_bytes[t] for t in plan.append)
    for tok in plan.append:
        req.matcher.advance(tok)  # validated by the planner on a fork
        req.output_token_ids.append(tok)
        if req.logprobs is not None:
            req.logprobs.append({tok: 0.0})
    req.detokenizer.add_bytes(new_bytes[skip:])
    if req.matcher.is_terminated() and len(req.output_token_ids) < req.params.max_tokens:
        req.finish("stop")
    else:
        _check_limits(req, limit)
    return len(plan.append) - plan.num_drop
