"""The proposer contract and its registry.

A proposer guesses the next tokens of running requests; the engine checks every guess
with the request's grammar and lets the target model verify the survivors in the same
ragged forward as every other request (see ``verify.py``). New proposers (EAGLE-style
heads, ...) plug in with :func:`register_proposer`; built-ins are imported lazily.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from structgen.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from structgen.runtime.config import SpeculativeConfig
    from structgen.runtime.engine import Engine
    from structgen.runtime.request import Request

__all__ = ["PROPOSERS", "BaseProposer", "Proposal", "make_proposer", "register_proposer"]


@dataclass
class Proposal:
    """Tokens proposed for one request.

    Attributes:
        token_ids: the proposed continuation (possibly empty).
        probs: ``[len(token_ids), V]`` float32 distribution each token was drawn from
            (``q`` of rejection sampling), or None: a deterministic proposal (point mass)
            or a greedy request.
    """

    token_ids: list[int]
    probs: torch.Tensor | None = None


class BaseProposer(abc.ABC):
    """Proposes draft tokens for a batch of decoding requests.

    Contract: :meth:`propose` sees requests whose every known token but the last is
    computed by the target, and returns one :class:`Proposal` each, at most
    ``num_tokens[i]`` long. When a proposal is drawn at random (``probs`` set) every
    token must have been drawn from its ``probs`` row, and the proposer must only draw
    tokens the grammar allows (mask its rows with the matcher): the engine's rejection
    sampling is exact only then. A deterministic proposal may contain anything: the
    engine cuts it at the first token the grammar rejects.

    Args:
        engine: the target engine (tokenizer, vocabulary, device, config).
        config: the speculative settings.
    """

    def __init__(self, engine: Engine, config: SpeculativeConfig) -> None:
        self.engine = engine
        self.config = config
        self.num_forward_passes = 0

    @abc.abstractmethod
    def propose(self, reqs: list[Request], num_tokens: list[int]) -> list[Proposal]:
        """One proposal per request. Raises: never for a single request's trouble (an
        empty proposal instead).
        """

    def release(self, req: Request) -> None:  # noqa: B027 - an optional hook, a no-op by default
        """Drop any per-request state (the request finished, failed or was aborted)."""

    def stats(self) -> dict:
        """Proposer-specific counters for ``Engine.stats()``."""
        return {}


PROPOSERS: dict[str, str | Callable] = {
    "ngram": "structgen.runtime.speculative.ngram:NgramProposer",
    "draft": "structgen.runtime.speculative.draft_model:DraftModelProposer",
}


def register_proposer(name: str, factory: str | Callable) -> None:
    """Register a proposer class (or ``"module:Class"`` path, imported on first use)."""
    PROPOSERS[name] = factory


def make_proposer(engine: Engine, config: SpeculativeConfig) -> BaseProposer:
    """Build the proposer named by ``config.method``.

    Raises:
        ConfigError: no proposer of that name.
    """
    factory = PROPOSERS.get(config.method)
    if factory is None:
        raise ConfigError(
            f"unknown speculative method {config.method!r}; registered: {sorted(PROPOSERS)}"
        )
    if isinstance(factory, str):
        module, _, name = factory.partition(":")
        factory = getattr(importlib.import_module(module), name)
    return factory(engine, config)
