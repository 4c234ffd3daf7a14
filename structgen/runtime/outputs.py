"""What a finished (or streamed) request returns."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RequestMetrics", "RequestOutput", "FINISH_REASONS"]

FINISH_REASONS = ("stop", "length", "abort", "error")


@dataclass
class RequestMetrics:
    """Timing and token counts of one request.

    Attributes:
        ttft_s: time to first token, seconds, from arrival to the first generated token.
        tpot_s: mean time per output token after the first, seconds (0 with <= 1 token).
        num_prompt_tokens: prompt length in tokens.
        num_generated_tokens: generated tokens (sampled plus jump-forward).
        num_forward_passes: model forward passes this request took part in.
        cached_tokens: prompt tokens served from the prefix cache instead of computed.
        spec_proposed_tokens: draft tokens proposed by speculative decoding (after the
            grammar check) and verified by the target.
        spec_accepted_tokens: of those, the ones the target accepted.
    """

    ttft_s: float = 0.0
    tpot_s: float = 0.0
    num_prompt_tokens: int = 0
    num_generated_tokens: int = 0
    num_forward_passes: int = 0
    cached_tokens: int = 0
    spec_proposed_tokens: int = 0
    spec_accepted_tokens: int = 0


@dataclass
class RequestOutput:
    """The result of one request.

    Attributes:
        text: generated text (stop strings and EOS excluded), valid UTF-8.
        token_ids: generated token ids (EOS / stop tokens excluded).
        finish_reason: ``"stop"`` (EOS, stop string/token, or grammar complete),
            ``"length"`` (``max_tokens`` reached), ``"abort"``, ``"error"``; None while running.
        error: the error message when ``finish_reason == "error"``.
        metrics: timings and counts.
        request_id: the engine's id of the request.
        delta_text: text added since the previous streamed snapshot (``AsyncEngine``).
        logprobs: per generated token, ``{token_id: logprob}`` (chosen token first, then
            the top ``SamplingParams.logprobs``); None unless requested.
        prompt_logprobs: per prompt token, the same (None for the first token); None
            unless requested.
        choices: with ``SamplingParams.n > 1``, every branch's output (the top-level
            fields repeat ``choices[0]``); empty otherwise.
    """

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    error: str | None = None
    metrics: RequestMetrics = field(default_factory=RequestMetrics)
    request_id: str = ""
    delta_text: str = ""
    logprobs: list[dict[int, float]] | None = None
    prompt_logprobs: list[dict[int, float] | None] | None = None
    choices: list["RequestOutput"] = field(default_factory=list)
