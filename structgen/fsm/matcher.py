"""The regex implementation's per-request cursor (``Matcher``, a ``BaseMatcher``).

The reference decoding loop::

    matcher = grammar.matcher()
    bitmask = torch.zeros(batch, (logits_vocab + 31) // 32, dtype=torch.int32)
    while not matcher.is_terminated():
        matcher.fill_bitmask(bitmask, row)
        token = sample(apply_token_bitmask(logits, bitmask[row]))
        matcher.advance(token)          # True: the mask allowed it

With ``max_tokens`` the mask also steers towards completion: only tokens after which a
complete match is still reachable within the remaining budget are allowed (see
``index/budget.py``; EOS is not counted against the budget).

No method on the per-token path raises: a token that is not allowed is refused
with ``False`` and leaves the state unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .base import BaseMatcher
from .index import masks
from .index.budget import budget_for
from .index.token_index import TokenIndex, cold_mask, cold_step
from .index.vocabulary import MARKER_BYTE

if TYPE_CHECKING:
    import torch

__all__ = ["Matcher"]


class Matcher(BaseMatcher):
    """Cursor over a ``TokenIndex``: current DFA state, accepted-token history, EOS flag.

    Termination: the matcher is terminated once EOS has been accepted, or when its
    state is accepting and has no way on (no outgoing byte, or no token budget left).
    In the second case EOS is still the one allowed token (and accepted), every other
    token is refused; after EOS every token is refused and the mask is all zero.

    Args:
        index: the token index of the compiled grammar.
        max_tokens: the request's token budget (non-EOS tokens), or None. With a budget,
            ``fill_bitmask``, ``advance`` and ``validate`` allow a token only if a complete
            match is still reachable within the tokens left after it (exact fewest-token
            counts, see ``index/budget.py``). If no complete match fits in ``max_tokens`` at all,
            the budget is ignored (the output will be cut by the engine, as without it).

    The budget is free while it provably does not bind: with ``B`` the budget's
    ``free_bound()`` (every live state reachable from the start completes within ``B``
    tokens), a state with ``remaining - 1 >= B`` tokens left has every token of its
    unbudgeted mask lead to a state that completes in time, so the exact budgeted mask is
    the unbudgeted one and every step is within the budget. Up to ``max_tokens - 1 - B``
    accepted tokens the matcher therefore takes the unbudgeted paths (the cached mask's C
    fill, the step memo); after that the budget decides. ``max_tokens >= B + 1`` also
    proves the budget feasible from the start (``B`` bounds the initial state too).
    """

    def __init__(self, index: TokenIndex, max_tokens: int | None = None) -> None:
        self._index = index
        # the index's fill forms and step memo, read directly on the warm path (an index
        # without them: empty stand-ins, every lookup goes through the index's methods)
        forms, steps = getattr(index, "fill_forms", None), getattr(index, "steps", None)
        self._forms = forms if isinstance(forms, dict) else {}
        self._steps = steps if isinstance(steps, dict) else {}
        # the step after a memo miss (an index without it: ``_next``, through the memo)
        step = getattr(index, "token_step", None)
        self._token_step = step if self._steps is getattr(index, "steps", None) else None
        # the C cold mask and step of a regex or grammar automaton (``TokenIndex.cold_plan``;
        # None: the Python ways only)
        plan = getattr(index, "cold_plan", None) if self._token_step is not None else None
        self._cold = plan if isinstance(plan, tuple) and self._forms is forms else None
        self._dfa = index.dfa
        self._eos = index.vocab.eos_token_ids
        self.max_tokens = max_tokens
        self._budget = None
        # the budget does not bind while at most this many tokens are accepted (-1: from
        # the start it may): see the class docstring
        self._free_until = -1
        if max_tokens is not None:
            budget = budget_for(index)
            free = int(max_tokens) - 1 - budget.free_bound()
            if free >= 0 or budget.within(self._dfa.initial, int(max_tokens)):
                self._budget = budget
                self._free_until = free
        # history[i]: (state, eos_taken) after i accepted tokens
        self._history: list[tuple[int, bool]] = [(self._dfa.initial, False)]

    # ---- state -------------------------------------------------------------

    @property
    def state(self) -> int:
        """Current DFA state (for debugging and tests; the runtime must not rely on it)."""
        return self._history[-1][0]

    @property
    def num_accepted_tokens(self) -> int:
        """Tokens accepted so far (EOS included)."""
        return len(self._history) - 1

    @property
    def is_budgeted(self) -> bool:
        """True when the token budget steers the mask (``max_tokens`` given and feasible)."""
        return self._budget is not None

    def remaining_tokens(self) -> int | None:
        """Non-EOS tokens left in the budget (None without one). Raises: never."""
        if self.max_tokens is None:
            return None
        state, eos_taken = self._history[-1]
        return int(self.max_tokens) - (len(self._history) - 1 - int(eos_taken))

    def is_accepting(self) -> bool:
        """True when the output so far is a complete match. Raises: never."""
        return self._dfa.is_accepting(self.state)

    def is_terminated(self) -> bool:
        """EOS taken, or accepting with no way on (no byte, or no budget). Raises: never."""
        state, eos_taken = self._history[-1]
        if eos_taken:
            return True
        if not self._dfa.is_accepting(state):
            return False
        if self._budget is not None and self.remaining_tokens() <= 0:
            return True
        return not bool((self._dfa.row(state) >= 0).any())

    # ---- per-token path ----------------------------------------------------

    def fill_bitmask(self, bitmask: torch.Tensor | np.ndarray, row: int) -> None:
        """Write the allowed tokens into ``bitmask[row]``.

        Args:
            bitmask: int32 ``[batch, num_words]`` with ``num_words >= ceil(vocab_size / 32)``,
                a tensor or an ``ndarray`` (written by numpy, ``index/masks.py``); words past
                the tokenizer's vocabulary are zeroed. Mutated in place.
            row: the batch row to write.

        Warm cost: a dictionary lookup of the state's cached mask and one C call that
        writes it into the tensor's memory (the tensor's layout is read once per tensor;
        see ``index/masks.py``), also under a budget while it is free (class docstring).
        Masks the budget steers and other tensors go the general way.

        Raises: ValueError for an ``ndarray`` that is not int32 ``[batch, num_words]``;
        otherwise never (for a correctly shaped bitmask).
        """
        state, eos_taken = self._history[-1]
        fill = masks.fill_row
        free = self._budget is None or len(self._history) - 1 <= self._free_until
        if fill is not None and free:
            # one C call when the tensor is the last one written and unchanged since: it
            # takes the state's cached mask form from the index's dict and marks it used, or
            # (a cold plan) makes the state's first mask and form there
            if eos_taken:
                if fill(masks.last, bitmask, row, None):
                    return
            else:
                done = fill(masks.last, bitmask, row, self._forms, state, self._cold)
                if done:
                    return
                if done is None and fill(masks.last, bitmask, row, self._fill_form(state)[0]):
                    return  # the state's first form (a partial index stand-in: no cache)
        words = None
        if not eos_taken:
            if not free:
                words = self._budget.mask(state, self.remaining_tokens())
            if words is None and self._cold is not None and state not in self._forms:
                words = cold_mask(self._cold, self._forms, state)  # None: declined
            if words is None:
                words = self._index.bitmask(state)
        masks.write(bitmask, row, words)

    def is_mask_cached(self) -> bool:
        """True when the current state's mask is cached (or EOS was taken: all zero) and
        no token budget steers it (none, or free: see the class docstring):
        ``fill_bitmask`` is then one C copy. Raises: never.
        """
        state, eos_taken = self._history[-1]
        free = self._budget is None or len(self._history) - 1 <= self._free_until
        return eos_taken or (free and state in self._forms)

    def grammar_state_key(self) -> object:
        """The byte DFA, shared (with its token index and caches) by every matcher of one
        compiled grammar. Raises: never.
        """
        return self._dfa

    def _fill_form(self, state: int) -> list:
        """``[form, used]`` of ``state``'s mask for the C writer (``TokenIndex.fill_form``;
        an index without it: the plain mask, uncached).
        """
        make = getattr(self._index, "fill_form", None)
        return make(state) if make is not None else [self._index.bitmask(state), True]

    def _next(
        self, state: int, eos_taken: bool, token_id: int, used: int
    ) -> tuple[int, bool] | None:
        """Step after ``token_id`` when ``used`` non-EOS tokens were accepted before it."""
        if eos_taken:
            return None
        if token_id in self._eos:
            return (state, True) if self._dfa.is_accepting(state) else None
        nxt = int(self._index.token_next_state(state, int(token_id)))  # reads the index's step memo
        if nxt < 0:
            return None
        if (
            self._budget is not None
            and used > self._free_until
            and not self._budget.within(nxt, self.max_tokens - used - 1)
        ):
            return None
        return (nxt, False)

    def advance(self, token_id: int) -> bool:
        """Accept one token; False (state unchanged) if it is not allowed. Raises: never."""
        history = self._history
        state, eos_taken = history[-1]
        free = self._budget is None or len(history) - 1 <= self._free_until
        if free and not eos_taken:  # a step taken before: one dict lookup
            nxt = self._steps.get((state, token_id))  # holds no EOS or special id
            if nxt is None and self._token_step is not None and token_id not in self._eos:
                # first time: the index's step without its memo read (``_next``'s work:
                # no budget test while free), in C where the cold plan takes it
                if self._cold is not None:
                    nxt = cold_step(self._cold, state, token_id)
                if nxt is None:
                    nxt = self._token_step(state, int(token_id))
            if nxt is not None:
                if nxt < 0:
                    return False
                history.append((nxt, False))
                return True
        step = self._next(state, eos_taken, token_id, len(history) - 1)
        if step is None:
            return False
        history.append(step)
        return True

    def validate(self, token_ids: Sequence[int]) -> int:
        """How many leading ``token_ids`` would be accepted, without advancing. Raises: never."""
        cur = self._history[-1]
        used = self.num_accepted_tokens
        for i, tid in enumerate(token_ids):
            step = self._next(*cur, tid, used + i)
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
        a branching or accepting state, and before a marker byte (a special token or a
        wildcard ``!<X>`` edge: a token to sample, never text). The result may end inside
        a multi-byte character when the character's last byte branches. Raises: never.
        """
        state, eos_taken = self._history[-1]
        if eos_taken:
            return b""
        dfa = self._dfa
        out = bytearray()
        seen = set()
        while not dfa.is_accepting(state) and state not in seen:
            live = np.nonzero(dfa.row(state) >= 0)[0]
            if live.shape[0] != 1:
                break
            seen.add(state)
            byte = int(live[0])
            if byte == MARKER_BYTE:
                break
            out.append(byte)
            state = int(dfa.row(state)[byte])
        return bytes(out)

    # ---- copies --------------------------------------------------------------

    def fork(self) -> Matcher:
        """An independent copy sharing the (immutable) compiled grammar."""
        other = Matcher.__new__(Matcher)
        other.__dict__.update(self.__dict__)
        other._history = list(self._history)
        return other

    def reset(self) -> None:
        """Back to the initial state with an empty history."""
        self._history = [(self._dfa.initial, False)]
