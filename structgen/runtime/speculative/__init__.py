"""Speculative decoding that stays exact under grammar constraints.

Proposers (``ngram``, ``draft``) behind :class:`BaseProposer` and a small registry;
verification, acceptance and counters in :class:`SpeculativeDecoder` (``verify.py``).
"""

from structgen.runtime.speculative.base import (
    PROPOSERS,
    BaseProposer,
    Proposal,
    make_proposer,
    register_proposer,
)
from structgen.runtime.speculative.verify import SpeculativeDecoder, accept_greedy, accept_sampled

__all__ = [
    "PROPOSERS",
    "BaseProposer",
    "Proposal",
    "SpeculativeDecoder",
    "accept_greedy",
    "accept_sampled",
    "make_proposer",
    "register_proposer",
]
