"""Where a byte string can sit inside a vocabulary's tokens (``TokenEnds``).

Two questions about the allowable tokens (``Vocabulary.token_trie``'s: never-allowed ids
and EOS left out, as no mask holds them through its bytes), each answered without walking
the vocabulary:

* ``starts_longer(p)``: does some token start with ``p`` and go on past it? One bisection
  of the tokens in byte order (``TokenTrie.byte_order``).
* ``holds_before_end(s)``: does some token hold ``s`` with at least one byte after it? A
  table of the bytes and byte pairs held so (one and two bytes, and a quick no for a
  longer ``s`` with a pair held nowhere), else a substring search over the tokens of more
  than ``len(s)`` bytes only, each less its last byte, shortest first.

The grammar automaton asks them of a lexeme's lexer state: a token that ends a lexeme
before its own last byte is the only kind whose fate depends on the parse around the
lexeme (``GrammarAutomaton.node_free_key``).
"""

from __future__ import annotations

import bisect

import numpy as np

__all__ = ["TokenEnds"]


class TokenEnds:
    """Prefix and inner-substring questions over a vocabulary's allowable tokens.

    Args:
        token_bytes: bytes of each token id (``Vocabulary.token_bytes``).
        order: int ``[K]``: the allowable ids in byte order (``TokenTrie.byte_order``).

    Cost: built once per vocabulary (a few numpy passes over the tokens' bytes: their
    heads shortest first in one bytes object, a 64 KiB pair table); answers in O(log K)
    (``starts_longer``) and, for 3+ bytes, ``bytes.find`` over the heads of the longer
    tokens (``holds_before_end``). Raises: never.
    """

    def __init__(self, token_bytes: list[bytes], order: np.ndarray) -> None:
        self._sorted = [token_bytes[i] for i in order.tolist()]  # byte order
        lengths = np.fromiter(map(len, token_bytes), np.int64, len(token_bytes))
        flat = np.frombuffer(b"".join(token_bytes), np.uint8)
        starts = np.cumsum(lengths) - lengths
        ids = order[lengths[order] >= 2]
        ids = ids[np.argsort(lengths[ids], kind="stable")]  # shortest first
        heads = lengths[ids] - 1  # each token without its last byte
        ends = np.cumsum(heads)  # where each head ends in the blob
        at = np.repeat(starts[ids] - (ends - heads), heads)
        blob = flat[at + np.arange(at.shape[0])]
        self._blob = blob.tobytes()
        self._ends = ends.tolist()
        # where the heads of >= k bytes begin in the blob, per k (past the longest: the end)
        first = np.searchsorted(heads, np.arange(int(heads.max(initial=0)) + 2), side="left")
        self._from = np.concatenate([[0], ends])[first].tolist()
        # the bytes and the byte pairs some head holds (one bit each)
        inside = np.ones(blob.shape[0], bool)
        inside[ends - 1] = False  # a pair starting at a head's last byte spans two heads
        pairs = np.zeros(1 << 16, bool)
        pairs[(blob[:-1].astype(np.int64) << 8 | blob[1:])[inside[:-1]]] = True
        singles = np.zeros(256, bool)
        singles[blob] = True
        self._pairs, self._singles = pairs.tobytes(), singles.tobytes()

    def starts_longer(self, prefix: bytes) -> bool:
        """True when some allowable token starts with ``prefix`` and is longer. Raises:
        never.
        """
        keys = self._sorted
        j = bisect.bisect_right(keys, prefix)  # the first token after prefix in byte order
        return j < len(keys) and keys[j].startswith(prefix)

    def holds_before_end(self, data: bytes) -> bool:
        """True when some allowable token holds ``data`` followed by at least one more byte
        (``b""``: any token of 2+ bytes). Raises: never.
        """
        k, start = len(data), self._from
        if k >= len(start):
            return False
        if k <= 1:
            return bool(self._singles[data[0]]) if k else len(self._ends) > 0
        pairs = self._pairs
        if not all(pairs[data[i] << 8 | data[i + 1]] for i in range(k - 1)):
            return False  # a pair of it is in no head
        if k == 2:
            return True
        ends, blob = self._ends, self._blob
        pos = blob.find(data, start[k])  # the shortest heads first: a common text early
        while pos >= 0:
            head = bisect.bisect_right(ends, pos)  # the head holding pos
            if pos + k <= ends[head]:  # inside one head (not across two)
                return True
            pos = blob.find(data, pos + 1)
        return False
