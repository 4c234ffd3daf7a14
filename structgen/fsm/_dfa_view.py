"""The few automaton lookups the matcher, budget and jump-forward modules need.

They read the DFA and the token index only through this module, so that a rewrite of
``dfa.py`` / ``token_index.py`` (for example a lazily built automaton whose transition
rows are fetched on demand) touches one adapter, not the per-request code. Supported:

* ``dfa.transitions`` as an int32 ``[num_states, 256]`` array (the eager ``ByteDFA``),
* or a method ``dfa.row(state)`` / ``dfa.transition_row(state)`` /
  ``dfa.transitions_of(state)`` returning int32 ``[256]`` (-1 = dead),
* or, as the last resort, ``dfa.walk(state, bytes([b]))`` for each byte.
"""

from __future__ import annotations

import numpy as np

__all__ = ["byte_row", "is_accepting", "token_step"]

_ROW_METHODS = ("row", "transition_row", "transitions_of")


def byte_row(dfa, state: int) -> np.ndarray:
    """int32 ``[256]``: next state per byte from ``state``, -1 = dead. Raises: never."""
    table = getattr(dfa, "transitions", None)
    if isinstance(table, np.ndarray):
        return table[state]
    for name in _ROW_METHODS:
        method = getattr(dfa, name, None)
        if callable(method):
            return np.asarray(method(state), np.int32)
    return np.fromiter((dfa.walk(state, bytes([b])) for b in range(256)), np.int32, 256)


def is_accepting(dfa, state: int) -> bool:
    """True when ``state`` accepts. Raises: never."""
    return bool(dfa.is_accepting(state))


def token_step(index, state: int, token_id: int) -> int:
    """State after one non-EOS token from ``state``, -1 if not allowed. Raises: never.

    Uses ``index.token_next_state`` (one walk over the token's bytes) when the index has
    it, else the index's full row for ``state`` (``next_states``, cached by the index).
    """
    step = getattr(index, "token_next_state", None)
    if step is not None:
        return int(step(state, int(token_id)))
    row = index.next_states(state)
    if not 0 <= token_id < row.shape[0] or token_id in index.vocab.eos_token_ids:
        return -1
    return int(row[token_id])
