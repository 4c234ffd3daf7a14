"""Prompt lookup / n-gram proposer: copy what followed the latest earlier occurrence of
the sequence's last n tokens (Saxena 2023, "prompt lookup decoding"; vLLM's ``ngram``).

Extraction copies spans of its input, so the continuation of a recent match is often
exactly what the target writes next. The proposal is deterministic (a point mass), so
the engine's rejection sampling accepts a token with probability ``p(token)``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from structgen.runtime.speculative.base import BaseProposer, Proposal

__all__ = ["NgramProposer", "ngram_lookup"]


def ngram_lookup(tokens: np.ndarray, n_min: int, n_max: int, k: int) -> list[int]:
    """Continuation of the longest suffix n-gram found earlier in ``tokens``.

    Tries ``n = n_max .. n_min``; for the first n with an earlier occurrence of the last n
    tokens, takes the latest such occurrence and returns up to ``k`` tokens that follow
    it. Raises: never.

    Args:
        tokens: ``[L]`` int64, prompt + output.
        n_min: shortest n-gram length to try.
        n_max: longest n-gram length to try.
        k: most tokens to return.
    """
    length = tokens.shape[0]
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        # windows of the history that end before the last token: [L - n, n]
        windows = sliding_window_view(tokens[: length - 1], n)
        hits = np.nonzero((windows == tokens[length - n :]).all(axis=1))[0]
        if hits.shape[0]:
            start = int(hits[-1]) + n
            return tokens[start : start + k].tolist()
    return []


class NgramProposer(BaseProposer):
    """Proposes by n-gram lookup in each request's own prompt and output (no model)."""

    def propose(self, reqs, num_tokens):
        """Up to ``num_tokens[i]`` tokens per request by :func:`ngram_lookup` over its own
        prompt and output (``config.ngram_min .. ngram_max``). Raises: never.
        """
        out = []
        for req, k in zip(reqs, num_tokens):
            seq = np.asarray(req.prompt_token_ids + req.output_token_ids, dtype=np.int64)
            out.append(Proposal(ngram_lookup(seq, self.config.ngram_min, self.config.ngram_max, k)))
        return out
