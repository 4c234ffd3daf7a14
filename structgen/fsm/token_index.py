"""Which tokens each DFA state allows (``TokenIndex``), computed lazily and cached.

For a state ``s`` every token of the vocabulary is run through the DFA at once:
the token bytes form a matrix ``[vocab_size, max_len]`` sorted by length (longest
first); the loop runs over the ~max_len columns, never over tokens. Column ``j``
touches only the tokens that are still alive and longer than ``j`` (dead tokens are
dropped as soon as they die, so a selective state costs little after column 0),
and the DFA rows of the states on that frontier are built lazily, in one batch per
column (``ByteDFA.gather``). Masks are packed as int32 words, token ``i`` at bit
``i % 32`` of word ``i // 32`` (least-significant bit first).
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
        order, matrix, _ = vocab.padded
        self._order = order
        self._matrix = matrix
        # rows longer than column j, and ids never allowed: shared per vocabulary
        self._rows_longer, self._never, self._eos = vocab.index_tables
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
        dfa, matrix = self.dfa, self._matrix
        final = np.full(matrix.shape[0], -1, np.int32)  # [vocab_size], in length order
        pos = np.arange(matrix.shape[0])  # alive tokens (rows of matrix), ascending
        cur = np.full(matrix.shape[0], state, np.int32)  # their current states
        for j, longer in enumerate(self._rows_longer.tolist()):
            n = int(np.searchsorted(pos, longer))  # alive tokens longer than j
            if n < pos.size:  # the rest end here
                final[pos[n:]] = cur[n:]
                pos, cur = pos[:n], cur[:n]
            if n == 0:
                break
            cur = dfa.gather(cur, matrix[pos, j])
            alive = cur >= 0
            if not alive.all():
                pos, cur = pos[alive], cur[alive]
        else:
            final[pos] = cur
        nxt = np.full(self.vocab.vocab_size, -1, np.int32)
        nxt[self._order] = final
        nxt[self._never] = -1
        if self.dfa.is_accepting(state):
            nxt[self._eos] = state
        nxt.setflags(write=False)
        mask = pack_bitmask(nxt >= 0, self.num_words)
        mask.setflags(write=False)
        return nxt, mask

    def token_next_state(self, state: int, token_id: int) -> int:
        """State after one non-EOS token, -1 if not allowed (no full-row computation)."""
        if not 0 <= token_id < self.vocab.vocab_size or self._never[token_id]:
            return -1
        return self.dfa.walk(state, self.vocab.token_bytes[token_id])

    @property
    def num_cached_states(self) -> int:
        return len(self._cache)
