"""Per-request sampling settings, with vLLM's field names and defaults."""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, fields

from structgen.errors import ConfigError, unknown_keyword_error

__all__ = ["SamplingParams"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one request. Field names and defaults follow vLLM's ``SamplingParams``.

    Attributes:
        max_tokens: most tokens to generate (jump-forward tokens count too).
        temperature: softmax temperature; ``0`` means greedy (argmax).
        top_p: nucleus sampling mass in (0, 1]; 1 disables it.
        top_k: keep the k most likely tokens; ``-1`` (or 0) disables it.
        min_p: drop tokens whose probability is below ``min_p`` times the top token's.
        seed: seed of this request's own generator, in ``[0, 2**64)`` (reproducible per request).
        stop: strings that end generation; the stop string is not included in the text.
        stop_token_ids: token ids that end generation (kept out of the text).
        ignore_eos: keep generating after EOS (EOS is then an ordinary token).
        min_tokens: EOS and stop tokens are masked until this many tokens exist.
        n: independent completions of the prompt; the branches share the prompt's KV
            pages through the prefix cache (seeded requests use ``seed + i`` per branch).
        logprobs: return, per generated token, the log-probability of the chosen token
            and of the ``logprobs`` most likely ones (0 = the chosen one only).
        prompt_logprobs: the same for every prompt token after the first (from
            ``prompt_logprobs_start`` on).
        prompt_logprobs_start: first prompt position whose log-probability is wanted
            (SGLang's ``logprob_start_len``); entries before it may be None. The prefix
            cache may serve up to ``prompt_logprobs_start - 1`` leading prompt tokens
            (the row before a token predicts it), so 0 (the default) computes the whole
            prompt and e.g. a ``select`` over options after a shared prompt reuses the
            prompt's cached KV and computes only the options' rows.
        presence_penalty: subtracted once from the logit of every token already
            generated (OpenAI semantics), in [-2, 2].
        frequency_penalty: subtracted per occurrence of a generated token, in [-2, 2].
        repetition_penalty: CTRL-style (Keskar et al. 2019): logits of tokens in the
            prompt or output are divided by it when positive, multiplied when negative;
            1 disables it.
        logit_bias: token id -> value added to its logit before sampling.
        speculative: let the engine's speculative decoder propose tokens for this request
            (when the engine has one). Requests that need per-position logits processing
            (penalties, ``logit_bias``, ``logprobs``) never speculate.

    Log-probabilities are those of the distribution after penalties, logit bias and the
    grammar mask, before temperature and top-k/top-p/min-p (a masked token has
    ``-inf``). Jump-forward tokens, forced by the grammar, report 0.0; for a request
    that reports logprobs, jump-forward leaves every sampled token (and its
    log-probability) in place and tokenizes the forced text on its own, so its tokens can
    differ from the same request's without logprobs, whose sampled tail is retokenized
    together with the forced text.

    Raises:
        ConfigError: a field has the wrong type or is out of range, or a keyword is not a
            field (the message names it, and the field it most resembles).
    """

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] | list[str] | str | None = None
    stop_token_ids: tuple[int, ...] | list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    n: int = 1
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    prompt_logprobs_start: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] | None = None
    speculative: bool = True

    def __post_init__(self) -> None:
        self._check_types()
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        elif self.stop is not None:
            object.__setattr__(self, "stop", tuple(self.stop))
        if self.stop_token_ids is not None:
            object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ConfigError(
                f"SamplingParams.max_tokens must be an int >= 1, got {self.max_tokens!r}"
            )
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ConfigError(
                f"SamplingParams.temperature must be a finite number >= 0, got {self.temperature!r}"
            )
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p!r}")
        if self.top_k < -1:
            raise ConfigError(f"SamplingParams.top_k must be -1 (off) or >= 0, got {self.top_k!r}")
        if self.seed is not None and not 0 <= self.seed < 2**64:
            raise ConfigError(f"SamplingParams.seed must be in [0, 2**64), got {self.seed!r}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ConfigError(f"SamplingParams.min_p must be in [0, 1], got {self.min_p!r}")
        if self.min_tokens < 0 or self.min_tokens > self.max_tokens:
            raise ConfigError(
                f"SamplingParams.min_tokens must be in [0, max_tokens], got {self.min_tokens!r}"
            )
        if self.stop is not None and any(not isinstance(s, str) or not s for s in self.stop):
            raise ConfigError("SamplingParams.stop must hold non-empty strings")
        if not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"SamplingParams.n must be an int >= 1, got {self.n!r}")
        for name in ("logprobs", "prompt_logprobs"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 0 or v > 20):
                raise ConfigError(
                    f"SamplingParams.{name} must be None or an int in [0, 20], got {v!r}"
                )
        if not isinstance(self.prompt_logprobs_start, int) or self.prompt_logprobs_start < 0:
            raise ConfigError(
                "SamplingParams.prompt_logprobs_start must be an int >= 0, got "
                f"{self.prompt_logprobs_start!r}"
            )
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2.0 <= getattr(self, name) <= 2.0:
                raise ConfigError(
                    f"SamplingParams.{name} must be in [-2, 2], got {getattr(self, name)!r}"
                )
        if not math.isfinite(self.repetition_penalty) or self.repetition_penalty <= 0:
            raise ConfigError(
                "SamplingParams.repetition_penalty must be a finite number > 0, got "
                f"{self.repetition_penalty!r}"
            )
        if self.logit_bias is not None:
            try:
                bias = {int(k): float(v) for k, v in dict(self.logit_bias).items()}
            except (TypeError, ValueError):
                raise ConfigError(
                    "SamplingParams.logit_bias must map token ids to numbers"
                ) from None
            object.__setattr__(self, "logit_bias", bias)

    def _check_types(self) -> None:
        """Raise ``ConfigError`` naming the first field whose value has the wrong type (a
        number given as a string, a single token id for ``stop_token_ids``, ...).
        """
        for name in _REAL_FIELDS:
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise ConfigError(f"SamplingParams.{name} must be a number, got {v!r}")
            object.__setattr__(self, name, float(v))
        for name in _INT_FIELDS:
            v = getattr(self, name)
            if v is None and name in _OPTIONAL_FIELDS:
                continue
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                what = "None or an int" if name in _OPTIONAL_FIELDS else "an int"
                raise ConfigError(f"SamplingParams.{name} must be {what}, got {v!r}")
            object.__setattr__(self, name, int(v))
        for name in _COUNT_FIELDS:  # their ranges are checked in __post_init__
            v = getattr(self, name)
            if isinstance(v, bool):
                raise ConfigError(f"SamplingParams.{name} must be an int, got {v!r}")
            if isinstance(v, numbers.Integral):
                object.__setattr__(self, name, int(v))
        stop = self.stop
        if stop is not None and not isinstance(stop, (str, list, tuple)):
            raise ConfigError(
                f"SamplingParams.stop must be a string or a list of strings, got {stop!r}"
            )
        ids = self.stop_token_ids
        if ids is not None and (
            not isinstance(ids, (list, tuple))
            or not all(isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in ids)
        ):
            raise ConfigError(f"SamplingParams.stop_token_ids must be a list of ints, got {ids!r}")
        for name in ("ignore_eos", "speculative"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"SamplingParams.{name} must be a bool, got {getattr(self, name)!r}"
                )
        if self.logit_bias is not None and not isinstance(self.logit_bias, dict):
            raise ConfigError(
                f"SamplingParams.logit_bias must be a dict of token id -> number, got "
                f"{self.logit_bias!r}"
            )

    def __hash__(self) -> int:  # logit_bias is a dict: hash its items
        bias = tuple(sorted(self.logit_bias.items())) if self.logit_bias else None
        fields = tuple(v for k, v in self.__dict__.items() if k != "logit_bias")
        return hash((fields, bias))

    @property
    def needs_logits_processing(self) -> bool:
        """True when penalties or a logit bias change the logits."""
        return bool(
            self.presence_penalty
            or self.frequency_penalty
            or self.repetition_penalty != 1.0
            or self.logit_bias
        )

    @property
    def can_speculate(self) -> bool:
        """True when speculative decoding may serve this request: asked for, and no
        penalty, logit bias or logprobs (those need per-position processing).
        """
        return self.speculative and not self.needs_logits_processing and self.logprobs is None

    @property
    def is_greedy(self) -> bool:
        """True when sampling is argmax (``temperature == 0``)."""
        return self.temperature == 0.0


_REAL_FIELDS = (
    "temperature",
    "top_p",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)
_INT_FIELDS = ("top_k", "seed", "min_tokens", "prompt_logprobs_start")
_OPTIONAL_FIELDS = frozenset({"seed"})
_COUNT_FIELDS = ("max_tokens", "n", "logprobs", "prompt_logprobs")
_FIELD_NAMES = tuple(f.name for f in fields(SamplingParams))


def _checked_init(init):
    """``SamplingParams.__init__`` that refuses unknown keywords and extra positional
    arguments with a ``ConfigError`` naming them (and the field a misspelt keyword most
    resembles) instead of Python's ``TypeError``.
    """

    @functools.wraps(init)
    def __init__(self, *args, **kwargs) -> None:
        if len(args) > len(_FIELD_NAMES):
            raise ConfigError(
                f"SamplingParams takes at most {len(_FIELD_NAMES)} positional arguments "
                f"({', '.join(_FIELD_NAMES)}), got {len(args)}"
            )
        unknown = [k for k in kwargs if k not in _FIELD_NAMES]
        if unknown:
            raise unknown_keyword_error("SamplingParams", unknown[0], _FIELD_NAMES)
        init(self, *args, **kwargs)

    return __init__


SamplingParams.__init__ = _checked_init(SamplingParams.__init__)
