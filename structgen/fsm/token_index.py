"""Which tokens each DFA state allows (``TokenIndex``), computed lazily and cached.

For a state ``s`` every token of the vocabulary is run through the DFA at once by a
walk of the vocabulary's token trie (``Vocabulary.token_trie``, ``_token_trie.py``):
each distinct token prefix the state can follow is stepped through the DFA once, and a
dead transition prunes every token that starts with that prefix, so a first mask costs
time in proportion to the live prefixes, not to vocabulary size x longest token. The
DFA rows met on the way are built lazily (``ByteDFA.row_tables`` / ``gather``). Masks
are packed as int32 words, token ``i`` at bit ``i % 32`` of word ``i // 32``
(least-significant bit first).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .dfa import ByteDFA
from .vocabulary import Vocabulary

__all__ = ["TokenIndex", "pack_bitmask", "MAX_CACHE_BYTES"]

MAX_CACHE_BYTES = 256 << 20


def pack_bitmask(allowed: np.ndarray, num_words: int | None = None) -> np.ndarray:
    """Pack bool ``[n]`` into int32 ``[num_words]`` (default ``ceil(n / 32)``), LSB first."""
    n = allowed.shape[0]
    words = (n + 31) // 32 if num_words is None else num_words
    padded = np.zeros(words * 32, bool)
    padded[:n] = allowed
    return np.packbits(padded, bitorder="little").view("<i4").astype(np.int32, copy=False)


class TokenIndex:
    """Token-level view of a ``ByteDFA`` for one ``Vocabulary``.

    Args:
        dfa: the byte automaton.
        vocab: the vocabulary.
        max_cached_states: bound on the number of cached state rows (LRU); default:
            as many as fit ``MAX_CACHE_BYTES`` (256 MiB: ~1,300 states at 49k tokens,
            ~430 at 150k), at least 64 and at most 8192.
    """

    def __init__(self, dfa: ByteDFA, vocab: Vocabulary, max_cached_states: int | None = None) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.num_words = (vocab.vocab_size + 31) // 32
        if max_cached_states is None:  # a cached row costs ~4.1 bytes per token
            max_cached_states = max(64, min(8192, MAX_CACHE_BYTES // (4 * vocab.vocab_size + 4)))
        self.max_cached_states = max_cached_states
        self._trie = vocab.token_trie
        # ids never allowed, and EOS: shared per vocabulary
        self._never, self._eos = vocab.index_tables
        self._cache: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def next_states(self, state: int) -> np.ndarray:
        """int32 ``[vocab_size]``: state after each token from ``state``, -1 = not allowed.

        EOS ids map to ``state`` itself when ``state`` is accepting (EOS ends the
        output without moving the DFA), else -1. Raises: never.
        """
        return self._row(state)[0]

    def bitmask(self, state: int) -> np.ndarray:
        """int32 ``[ceil(vocab_size / 32)]``: packed allowed tokens of ``state``."""
        return self._row(state)[1]

    def _row(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(state)
        if hit is not None:
            self._cache.move_to_end(state)
            return hit
        row = self._compute(state)
        self._cache[state] = row
        if len(self._cache) > self.max_cached_states:
            self._cache.popitem(last=False)
        return row

    def _compute(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        nxt = np.full(self.vocab.vocab_size, -1, np.int32)
        self._trie.walk(self.dfa, state, nxt)  # never-allowed ids are not in the trie
        if self.dfa.is_accepting(state):
            nxt[self._eos] = state
        nxt.setflags(write=False)
        mask = pack_bitmask(nxt >= 0, self.num_words)
        mask.setflags(write=False)
        return nxt, mask

    def token_next_state(self, state: int, token_id: int) -> int:
        """State after one non-EOS token, -1 if not allowed (from the cached row when
        ``state`` has one, else one walk over the token's bytes: no full-row computation)."""
        if not 0 <= token_id < self.vocab.vocab_size or self._never[token_id]:
            return -1
        hit = self._cache.get(state)
        if hit is not None:
            return int(hit[0][token_id])
        return self.dfa.walk(state, self.vocab.token_bytes[token_id])

    @property
    def num_cached_states(self) -> int:
        return len(self._cache)
