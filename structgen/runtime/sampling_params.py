"""Per-request sampling settings, with vLLM's field names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from structgen.errors import ConfigError

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
        seed: seed of this request's own ``torch.Generator`` (reproducible per request).
        stop: strings that end generation; the stop string is not included in the text.
        stop_token_ids: token ids that end generation (kept out of the text).
        ignore_eos: keep generating after EOS (EOS is then an ordinary token).
        min_tokens: EOS and stop tokens are masked until this many tokens exist.

    Raises:
        ConfigError: a field is out of range (the message names the field).
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

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        elif self.stop is not None:
            object.__setattr__(self, "stop", tuple(self.stop))
        if self.stop_token_ids is not None:
            object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ConfigError(f"SamplingParams.max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if self.temperature < 0:
            raise ConfigError(f"SamplingParams.temperature must be >= 0, got {self.temperature!r}")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p!r}")
        if self.top_k < -1:
            raise ConfigError(f"SamplingParams.top_k must be -1 (off) or >= 0, got {self.top_k!r}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ConfigError(f"SamplingParams.min_p must be in [0, 1], got {self.min_p!r}")
        if self.min_tokens < 0 or self.min_tokens > self.max_tokens:
            raise ConfigError(
                f"SamplingParams.min_tokens must be in [0, max_tokens], got {self.min_tokens!r}"
            )
        if self.stop is not None and any(not isinstance(s, str) or not s for s in self.stop):
            raise ConfigError("SamplingParams.stop must hold non-empty strings")

    @property
    def is_greedy(self) -> bool:
        """True when sampling is argmax (``temperature == 0``)."""
        return self.temperature == 0.0
