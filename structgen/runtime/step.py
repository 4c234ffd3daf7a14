"""The per-step token path: mask logits, sample, and apply each sampled token.

:func:`sample_tokens` turns a forward's :class:`~structgen.runtime.model_runner.ModelOutput`
into tokens (plain sampling under the grammar mask, or speculative verification);
``Scheduler.update_from_output`` then applies them with :func:`process_tokens` (grammar,
EOS / stop and limit checks, jump-forward). Both read the engine's settings from one
frozen :class:`StepContext`, never the engine.

Nothing here raises for a single bad request: a request whose grammar rejects its
token (which masking should make impossible) is failed alone.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from structgen.fsm.jump_forward import plan_jump_forward
from structgen.fsm.matcher import Matcher
from structgen.kernels.token_bitmask_host import apply_token_bitmask_host
from structgen.runtime.logits_processing import apply_penalties_and_bias, top_logprobs
from structgen.runtime.request import Request
from structgen.runtime.sampler import few_rows_serial, sample, take_rows

if TYPE_CHECKING:
    import torch

    from structgen.runtime.model_runner import ModelOutput
    from structgen.runtime.step_masks import StepMasks

__all__ = [
    "StepContext",
    "SampledTokens",
    "TokenResult",
    "sample_tokens",
    "sample_step",
    "process_tokens",
    "jump_forward",
    "record_prompt_logprobs",
    "PROMPT_LOGPROBS_SERIAL_ROWS",
]

PROMPT_LOGPROBS_SERIAL_ROWS = 32
"""Scored rows of one request up to which ``record_prompt_logprobs`` runs on the calling thread
(``few_rows_serial``): the scoring passes' requests score a few rows each, and waking torch's
intra-op pool for each of them cost more than their log-softmax and top-k on one thread (each
row is reduced by one thread either way: the same values)."""


@dataclass(frozen=True)
class StepContext:
    """What the token path needs of the engine, fixed when the engine is built.

    Attributes:
        eos_token_ids: the model's EOS token ids.
        jump_forward: append grammar-forced text without sampling (``EngineConfig``).
        vocab: the fsm ``Vocabulary`` (token bytes).
        encode_text: text -> token ids without special tokens; one bound callable (the
            jump-forward planner caches its boundary probes by it).
        max_request_tokens: most tokens (prompt + output) one request can hold.
        num_sampled_ids: ids at or past it are padding rows of the model's embedding (no
            token of the tokenizer: Qwen2.5 has 151,936 rows for 151,665 tokens); their
            logits are set to -inf before every sampling step. None = every id is a token.
    """

    eos_token_ids: frozenset[int]
    jump_forward: bool
    vocab: Any
    encode_text: Callable[[str], list[int]]
    max_request_tokens: int
    num_sampled_ids: int | None = None


@dataclass
class SampledTokens:
    """The tokens one request got in a step, to be applied in order.

    Attributes:
        request: the request.
        token_ids: one sampled token, or a speculative step's accepted drafts followed by
            the target's own token.
        logprobs: per token its logprob dict (or None); None for a speculative step.
        is_speculative: True when ``token_ids`` come from verifying the request's drafts.
    """

    request: Request
    token_ids: list[int]
    logprobs: list[dict[int, float] | None] | None = None
    is_speculative: bool = False


@dataclass
class TokenResult:
    """What :func:`process_tokens` did to a request.

    Attributes:
        num_applied: how many of the tokens were applied (a finishing EOS / stop token
            counts).
        rolled_back_to: the request's token count after jump-forward dropped trailing
            tokens (K/V past it is stale), or None when nothing was dropped.
    """

    num_applied: int = 0
    rolled_back_to: int | None = None


def sample_tokens(
    output: ModelOutput,
    context: StepContext,
    verify: Callable[..., list[list[int]]] | None = None,
    masks: StepMasks | None = None,
) -> list[SampledTokens]:
    """Record prompt logprobs, sample plain requests and verify speculating ones.

    Args:
        output: a successful forward's logits and their layout (``output.logits`` is
            masked in place, padded-vocabulary columns included, and on CPU the plain
            requests' rows too where they are consecutive).
        context: the engine's step settings.
        verify: ``SpeculativeDecoder.verify`` (needed when a request has drafts); called
            as ``verify(logits, items, masks=masks)``.
        masks: the step's grammar rows computed during the forward (``StepMasks``, waited
            for); None: each row is filled here.

    Returns:
        One entry per sampling request: plain requests first, then speculating ones,
        each group in the order of the step. Raises: never for a single request's
        trouble (it is failed alone).
    """
    logits = output.logits
    host = isinstance(logits, np.ndarray)
    plain = [(req, lo) for req, lo, m in output.sampling if m == 0]
    specs = [(req, lo, m) for req, lo, m in output.sampling if m > 0]
    # a torch forward's logits are inference tensors: mask them in place there
    with contextlib.nullcontext() if host else _inference_mode():
        if context.num_sampled_ids is not None:
            logits[:, context.num_sampled_ids :] = float("-inf")  # padded vocabulary rows
        for req, first, lo, hi in output.prompt_logprobs:
            record_prompt_logprobs(req, logits[lo:hi], first)
        reqs = [req for req, _ in plain]
        rows = [lo for _, lo in plain]
        if (
            rows
            and (host or logits.device.type == "cpu")
            and rows == list(range(rows[0], rows[0] + len(rows)))
        ):
            # consecutive rows (a decode step's): their slice, no copy; sampling masks it in
            # place, and nothing reads those rows of ``output.logits`` after this
            sample_logits = logits[rows[0] : rows[0] + len(rows)]
        else:
            sample_logits = _take_rows(logits, rows)
        tokens, logprobs = sample_step(sample_logits, reqs, context.eos_token_ids, masks)
        accepted = []
        if specs:
            idx, items = [], []
            for req, lo, m in specs:
                items.append((req, len(idx)))
                idx.extend(range(lo, lo + m + 1))
            spec_logits = logits[idx]
            if host:  # speculative verification runs torch: its rows as a tensor (no copy)
                import torch

                spec_logits = torch.from_numpy(spec_logits)
            accepted = verify(spec_logits, items, masks=masks)
    out = [SampledTokens(req, [tok], [lp]) for req, tok, lp in zip(reqs, tokens, logprobs)]
    out += [SampledTokens(req, toks, None, True) for (req, _, _), toks in zip(specs, accepted)]
    return out


def _inference_mode() -> Any:
    """``torch.inference_mode()`` (a torch forward's step only: torch is loaded then)."""
    import torch

    return torch.inference_mode()


def _take_rows(logits: Any, rows: list[int]) -> Any:
    """``logits[rows]`` as a new array or tensor of the input's kind (never a view)."""
    if isinstance(logits, np.ndarray):
        return logits[rows] if rows else logits[:0].copy()
    return take_rows(logits, rows) if rows else logits[:0]


def sample_step(
    logits: np.ndarray | torch.Tensor,
    reqs: list[Request],
    eos_ids: frozenset[int],
    masks: StepMasks | None = None,
) -> tuple[list[int], list[dict[int, float] | None]]:
    """Process, mask and sample one token for each request.

    Order: logit bias and penalties, grammar bitmask, ``min_tokens`` EOS ban, then
    log-probabilities (rows that asked) and sampling.

    Args:
        logits: ``[R, V]`` float32, an ``ndarray`` (the default CPU engine's: every step is
            numpy then) or a tensor; row ``r`` belongs to ``reqs[r]``; modified in place
            (on the host, a greedy row picked among its allowed ids by
            :func:`_greedy_picks` is left unmasked).
        reqs: the sampling requests.
        eos_ids: the model's EOS token ids.
        masks: grammar rows computed ahead (``StepMasks``, waited for): a request's row
            is copied from it; rows it lacks are filled here.

    Returns:
        One token id per request, and per request its logprob dict (or None).
    """
    if not reqs:
        return [], []
    with few_rows_serial(logits):
        return _sample_step(logits, reqs, eos_ids, masks)


def _sample_step(
    logits: np.ndarray | torch.Tensor,
    reqs: list[Request],
    eos_ids: frozenset[int],
    masks: StepMasks | None,
) -> tuple[list[int], list[dict[int, float] | None]]:
    vocab_size = logits.shape[1]
    host = isinstance(logits, np.ndarray)
    if not host:  # a torch forward's logits (the host step runs no torch)
        import torch
    apply_penalties_and_bias(logits, reqs)
    constrained = [r for r, req in enumerate(reqs) if req.matcher is not None]
    picks: dict[int, int] = {}  # rows sampled under their mask without masking the row
    if constrained:
        words = -(-vocab_size // 32)
        # zeroed by numpy (calloc): torch.zeros fills it on its intra-op pool, whose wake-up
        # costs more than the fill
        bitmask = np.zeros((len(constrained), words), dtype=np.int32)
        if not host:
            bitmask = torch.from_numpy(bitmask)  # the C mask writer's kind for tensor logits
        inline = list(enumerate(constrained))
        if masks is not None and masks.num_words == words:
            ahead = [(row, masks.rows_of(reqs[r], 1)) for row, r in inline]
            dst = [row for row, rows in ahead if rows is not None]
            if dst:
                src = [rows.start for _, rows in ahead if rows is not None]
                ahead_rows = masks.bitmask[src]  # an ndarray or a CPU tensor
                bitmask[dst] = np.asarray(ahead_rows) if host else torch.as_tensor(ahead_rows)
            inline = [(row, r) for (row, r), (_, rows) in zip(inline, ahead) if rows is None]
        tensor_view = None
        for row, r in inline:
            try:
                matcher = reqs[r].matcher
                if host and not isinstance(matcher, Matcher):
                    # ``BaseMatcher.fill_bitmask`` takes a tensor: other implementations get
                    # the array's memory as one (structgen's own ``Matcher`` writes arrays)
                    if tensor_view is None:
                        import torch

                        tensor_view = torch.from_numpy(bitmask)
                    matcher.fill_bitmask(tensor_view, row)
                else:
                    matcher.fill_bitmask(bitmask, row)
            except Exception as exc:  # e.g. GrammarTooComplexError building a lazy state
                reqs[r].finish("error", f"grammar failed: {type(exc).__name__}: {exc}")
                bitmask[row] = -1  # any token: the row's sample is discarded
        if host:
            picks = _greedy_picks(logits, bitmask, constrained, reqs)
            rest = [row for row, r in enumerate(constrained) if r not in picks]
            if len(rest) == len(constrained):
                apply_token_bitmask_host(logits, bitmask, constrained)
            elif rest:
                apply_token_bitmask_host(logits, bitmask[rest], [constrained[i] for i in rest])
        else:
            from structgen.kernels.apply_token_bitmask import apply_token_bitmask

            idx = torch.tensor(constrained, dtype=torch.int64, device=logits.device)
            apply_token_bitmask(logits, bitmask.to(logits.device), idx)
    for r, req in enumerate(reqs):
        p = req.params
        if len(req.output_token_ids) < p.min_tokens:
            banned = set(p.stop_token_ids or ()) | (set() if p.ignore_eos else set(eos_ids))
            if banned:
                logits[r, list(banned)] = float("-inf")
    tokens = sample(logits, [r.params for r in reqs], [r.generator for r in reqs], picks)
    for r, tok in picks.items():
        tokens[r] = tok
    lp_rows = [r for r, req in enumerate(reqs) if req.params.logprobs is not None]
    logprobs: list[dict[int, float] | None] = [None] * len(reqs)
    if lp_rows:
        idx = np.array(lp_rows) if host else torch.tensor(lp_rows, device=logits.device)
        dicts = top_logprobs(logits[idx], tokens[idx], [reqs[r].params.logprobs for r in lp_rows])
        for r, d in zip(lp_rows, dicts):
            logprobs[r] = d
    return tokens.tolist(), logprobs


GREEDY_PICK_MAX_WORDS = 64
"""A greedy row whose bitmask has at most this many non-zero words is picked among its
allowed tokens (:func:`_greedy_picks`); a wider mask is applied to the row as before."""


def _greedy_picks(
    logits: np.ndarray, bitmask: np.ndarray, constrained: list[int], reqs: list[Request]
) -> dict[int, int]:
    """The tokens of the greedy rows that need no masked row: row ``constrained[i]`` of
    ``logits`` ``[R, V]`` under ``bitmask[i]`` (int32 ``[len(constrained), W]``).

    A row qualifies when its request is greedy, reports no logprobs and has no ``min_tokens``
    ban left, and its mask has at most ``GREEDY_PICK_MAX_WORDS`` non-zero words; its token is
    the first of its allowed ids with the largest logit, which is the masked row's first
    maximum, when that logit is finite (otherwise the row is masked and sampled as before).
    The rows picked are left unmasked in ``logits``.

    Returns:
        ``{row of logits: token id}``. Raises: never.
    """
    if sys.byteorder != "little":
        return {}
    vocab = logits.shape[1]
    picks = {}
    for i, r in enumerate(constrained):
        p = reqs[r].params
        if (
            not p.is_greedy
            or p.logprobs is not None
            or len(reqs[r].output_token_ids) < p.min_tokens
        ):
            continue
        words = np.flatnonzero(bitmask[i])  # [N] ids of non-zero words
        if not words.size or words.size > GREEDY_PICK_MAX_WORDS:
            continue
        bits = np.unpackbits(bitmask[i, words].view(np.uint8), bitorder="little")  # [32N]
        ids = (words[:, None] * 32 + _BIT).ravel()[bits.view(bool)]  # allowed, increasing
        ids = ids[ids < vocab]
        if ids.size:
            vals = logits[r, ids]
            best = int(vals.argmax())
            if np.isfinite(vals[best]):
                picks[r] = int(ids[best])
    return picks


_BIT = np.arange(32)


def record_prompt_logprobs(req: Request, logits: np.ndarray | torch.Tensor, first_pos: int) -> None:
    """Store log-probabilities of prompt tokens ``first_pos + 1 ...`` predicted by ``logits``.

    Args:
        req: the request (``params.prompt_logprobs`` set).
        logits: ``[P, V]`` float32 ``ndarray`` or tensor, row ``i`` computed at prompt
            position ``first_pos + i``; up to ``PROMPT_LOGPROBS_SERIAL_ROWS`` rows of a CPU
            tensor are processed on the calling thread.
        first_pos: prompt position of the first row.
    """
    # entries up to first_pos (the first token, cache-served rows, or rows recorded
    # before a preemption that are recomputed now) are None or kept; then this chunk's
    kept = (req.prompt_logprobs or [])[: first_pos + 1]
    req.prompt_logprobs = kept + [None] * (first_pos + 1 - len(kept))
    ids = req.prompt_token_ids[first_pos + 1 : first_pos + 1 + logits.shape[0]]
    if isinstance(logits, np.ndarray):
        targets = np.array(ids, dtype=np.int64)
    else:
        import torch

        targets = torch.tensor(ids, device=logits.device)
    with few_rows_serial(logits, PROMPT_LOGPROBS_SERIAL_ROWS):
        dicts = top_logprobs(logits, targets, [req.params.prompt_logprobs] * logits.shape[0])
    req.prompt_logprobs.extend(dicts)


def _append(req: Request, token: int, logprob: dict[int, float] | None = None) -> None:
    req.output_token_ids.append(token)
    req.detokenizer.add_token(token)
    if req.params.logprobs is not None:
        if req.logprobs is None:
            req.logprobs = []
        req.logprobs.append(logprob if logprob is not None else {token: 0.0})


def _grammar_complete(req: Request, context_limit: int) -> bool:
    """Whether ``req``'s grammar is complete (nothing can follow) below both limits: a
    matcher its budget ended at ``max_tokens`` or at the context's end is not, so that
    request finishes with the limit's ``"length"``, as one without a grammar does.
    """
    return (
        req.matcher.is_terminated()
        and len(req.output_token_ids) < req.params.max_tokens
        and req.num_tokens < context_limit
    )


def _check_limits(req: Request, context_limit: int) -> bool:
    """Finish on a stop string, ``max_tokens`` or the context limit; True if finished."""
    if req.detokenizer.stopped:
        req.finish("stop")
    elif len(req.output_token_ids) >= req.params.max_tokens or req.num_tokens >= context_limit:
        req.finish("length")
    return req.status.is_finished


def _apply_token(
    context: StepContext, req: Request, token: int, logprob: dict[int, float] | None
) -> bool:
    """Grammar, EOS / stop and limit checks for one token; True if the request goes on."""
    p = req.params
    if req.matcher is not None and not req.matcher.advance(token):
        req.finish("error", f"grammar rejected sampled token {token}")
        return False
    is_eos = token in context.eos_token_ids and not p.ignore_eos
    if is_eos or token in (p.stop_token_ids or ()):
        req.finish("stop")
        return False
    _append(req, token, logprob)
    if req.matcher is not None and _grammar_complete(req, context.max_request_tokens):
        req.finish("stop")
        return False
    return not _check_limits(req, context.max_request_tokens)


def process_tokens(
    context: StepContext,
    req: Request,
    tokens: list[int],
    logprobs: list[dict[int, float] | None] | None = None,
) -> TokenResult:
    """Apply verified tokens in order (one sampled token, or a speculative step's accepted
    drafts plus the target's own token), stopping at the first that finishes the
    request or after which the grammar forces text; then jump-forward. Stopping at
    forced text keeps speculative output token-for-token that of plain decoding, which
    jump-forwards (and retokenizes) at that point.

    Appends output tokens (and text), advances the matcher, may finish the request; it
    does not touch ``num_computed_tokens`` or pages (the scheduler's, see
    ``Scheduler.update_from_output``).

    Returns:
        How many tokens were applied and, after a jump-forward rollback, the token count
        rolled back to.

    Raises: never (failures finish the request with ``"error"``).
    """
    result = TokenResult()
    if req.status.is_finished:  # failed while its mask was built
        return result
    try:
        if req.first_token_time is None:
            req.first_token_time = time.perf_counter()
        jump = req.matcher is not None and context.jump_forward
        for i, token in enumerate(tokens):
            result.num_applied += 1
            if not _apply_token(context, req, token, logprobs[i] if logprobs else None):
                return result
            if jump and i + 1 < len(tokens) and req.matcher.forced_bytes():
                # plain decoding jumps forward here (canonical retokenization); the later
                # tokens were verified on a tokenization it would not produce: drop them
                break
        if jump:
            jump_forward(context, req, result)
    except Exception as exc:  # one request's failure must not take the engine down
        req.finish("error", f"{type(exc).__name__}: {exc}")
    return result


def jump_forward(context: StepContext, req: Request, result: TokenResult | None = None) -> int:
    """Append the grammar's forced text as tokens, without sampling (one extend step).

    The fsm plans it (``structgen.fsm.jump_forward.plan_jump_forward``): the forced
    bytes are retokenized canonically together with the last generated tokens, so the
    model never conditions on a split that its tokenizer would not produce. Applying the
    plan drops ``num_drop`` trailing output tokens (matcher rolled back; the token count
    after the drop goes into ``result.rolled_back_to``: their K/V is stale) and appends
    the new tokens; their bytes extend the text exactly by the
    forced bytes. Forced tokens report logprob 0.0. For a request that reports logprobs
    no sampled token is retokenized (their log-probabilities would be lost): the forced
    text is tokenized on its own.

    Returns:
        Net number of tokens added.
    """
    limit = context.max_request_tokens
    room = min(req.params.max_tokens - len(req.output_token_ids), limit - req.num_tokens)
    if room <= 0:
        return 0
    # a request reporting logprobs keeps its sampled tokens (and their log-probabilities,
    # the model's actual choices): only the forced text is tokenized, on its own
    lookback = {"lookback": 0} if req.params.logprobs is not None else {}
    plan = plan_jump_forward(
        req.matcher,
        req.output_token_ids,
        context.encode_text,
        context.vocab,
        max_append=room,
        **lookback,
    )
    if not plan:
        return 0
    token_bytes = context.vocab.token_bytes
    if plan.num_drop:
        dropped = req.output_token_ids[-plan.num_drop :]
        del req.output_token_ids[-plan.num_drop :]
        if req.logprobs is not None:
            del req.logprobs[-plan.num_drop :]
        req.matcher.rollback(plan.num_drop)
        if result is not None:
            result.rolled_back_to = req.num_tokens
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
    if _grammar_complete(req, limit):
        req.finish("stop")
    else:
        _check_limits(req, limit)
    return len(plan.append) - plan.num_drop
