"""Per-request cursor into a compiled grammar (``Matcher``).

The reference decoding loop::

    matcher = grammar.matcher()
    bitmask = torch.zeros(batch, (logits_vocab + 31) // 32, dtype=torch.int32)
    while not matcher.is_terminated():
        matcher.fill_bitmask(bitmask, row)
        token = sample(apply_token_bitmask(logits, bitmask[row]))
        matcher.advance(token)          # True: the mask allowed it

No method on the per-token path raises: a token that is not allowed is refused
with ``False`` and leaves the state unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .token_index import TokenIndex

__all__ = ["Matcher"]


class Matcher:
    """Cursor over a ``TokenIndex``: current DFA state, accepted-token history, EOS flag.

    Termination: the matcher is terminated once EOS has been accepted, or when its
    state is accepting and has no outgoing byte (nothing can follow). In the second
    case EOS is still the one allowed token (and accepted), every other token is
    refused; after EOS every token is refused and the mask is all zero.

    Args:
        index: the token index of the compiled grammar.
        max_tokens: the request's token budget. Stored for later budget-aware masking
            (forcing a shortest completion near the end); not used yet.
    """

    def __init__(self, index: TokenIndex, max_tokens: int | None = None) -> None:
        self._index = index
        self._dfa = index.dfa
        self._eos = index.vocab.eos_token_ids
        self.max_tokens = max_tokens
        # history[i]: (state, eos_taken) after i accepted tokens
        self._history: list[tuple[int, bool]] = [(self._dfa.initial, False)]

    # ---- state -------------------------------------------------------------

    @property
    def state(self) -> int:
        """Current DFA state (for debugging and tests; the runtime must not rely on it)."""
        return self._history[-1][0]

    @property
    def num_accepted_tokens(self) -> int:
        return len(self._history) - 1

    def is_accepting(self) -> bool:
        """True when the output so far is a complete match. Raises: never."""
        return bool(self._dfa.accepting[self.state])

    def is_terminated(self) -> bool:
        """EOS taken, or accepting with no way on. Raises: never."""
        state, eos_taken = self._history[-1]
        return eos_taken or (bool(self._dfa.accepting[state]) and int(self._dfa.num_out[state]) == 0)

    # ---- per-token path ----------------------------------------------------

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the allowed tokens into ``bitmask[row]``.

        Args:
            bitmask: int32 ``[batch, num_words]`` with ``num_words >= ceil(vocab_size / 32)``;
                words past the tokenizer's vocabulary are zeroed. Mutated in place.
            row: the batch row to write.

        Raises: never (for a correctly shaped tensor).
        """
        target = bitmask[row]
        if self._history[-1][1]:
            target.zero_()
            return
        words = self._index.bitmask(self.state)
        n = min(words.shape[0], target.shape[0])
        target[:n].copy_(torch.from_numpy(np.array(words[:n])))
        if target.shape[0] > n:
            target[n:].zero_()

    def _next(self, state: int, eos_taken: bool, token_id: int) -> tuple[int, bool] | None:
        if eos_taken:
            return None
        if token_id in self._eos:
            return (state, True) if self._dfa.accepting[state] else None
        nxt = self._index.token_next_state(state, int(token_id))
        return None if nxt < 0 else (nxt, False)

    def advance(self, token_id: int) -> bool:
        """Accept one token; False (state unchanged) if it is not allowed. Raises: never."""
        step = self._next(*self._history[-1], token_id)
        if step is None:
            return False
        self._history.append(step)
        return True

    def validate(self, token_ids: Sequence[int]) -> int:
        """How many leading ``token_ids`` would be accepted, without advancing. Raises: never."""
        cur = self._history[-1]
        for i, tid in enumerate(token_ids):
            step = self._next(*cur, tid)
            if step is None:
                return i
            cur = step
        return len(token_ids)

    def rollback(self, n: int) -> None:
        """Undo the last ``n`` accepted tokens (clamped to what was accepted). Raises: never."""
        n = max(0, min(int(n), self.num_accepted_tokens))
        if n:
            del self._history[-n:]

    def forced_bytes(self) -> bytes:
        """Bytes that are the only way on from here (jump-forward); ``b""`` if none.

        Follows states with exactly one outgoing byte that are not accepting; stops at
        a branching or accepting state. The result may end inside a multi-byte
        character when the character's last byte branches. Raises: never.
        """
        state, eos_taken = self._history[-1]
        if eos_taken:
            return b""
        dfa = self._dfa
        out = bytearray()
        seen = set()
        while dfa.num_out[state] == 1 and not dfa.accepting[state] and state not in seen:
            seen.add(state)
            byte = int(np.argmax(dfa.transitions[state] >= 0))
            out.append(byte)
            state = int(dfa.transitions[state, byte])
        return bytes(out)

    # ---- copies --------------------------------------------------------------

    def fork(self) -> Matcher:
        """An independent copy sharing the (immutable) compiled grammar."""
        other = Matcher(self._index, self.max_tokens)
        other._history = list(self._history)
        return other

    def reset(self) -> None:
        """Back to the initial state with an empty history."""
        self._history = [(self._dfa.initial, False)]
