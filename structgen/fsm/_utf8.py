"""Expand a code-point transition function into UTF-8 byte transitions.

A character-level DFA state maps every code point to a target state (or dead). We
turn that into byte transitions exactly as the UTF-8 encoding splits code points:
the lead byte selects an interval of code points; if the state's map is constant on
that interval (and every sequence in it is valid UTF-8), the lead byte goes to a
shared "k continuation bytes left, then T" state; otherwise we descend one
continuation byte at a time (the approach of Rust's ``utf8-ranges``). Overlong
forms, surrogates (U+D800..U+DFFF) and code points above U+10FFFF are never
accepted.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Utf8Expander", "MAX_CODE_POINT"]

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_MIN_FOR_LENGTH = {1: 0, 2: 0x80, 3: 0x800, 4: 0x10000}


def _lead_table() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For every lead byte: (lo, hi, continuation bytes k, sequence length n); n=0 invalid."""
    lo = np.zeros(256, np.int64)
    hi = np.zeros(256, np.int64)
    k = np.zeros(256, np.int64)
    n = np.zeros(256, np.int64)
    for b in range(256):
        if b < 0x80:
            lo[b], hi[b], k[b], n[b] = b, b, 0, 1
        elif 0xC0 <= b < 0xE0:
            lo[b] = (b & 0x1F) << 6
            hi[b], k[b], n[b] = lo[b] + 0x3F, 1, 2
        elif 0xE0 <= b < 0xF0:
            lo[b] = (b & 0x0F) << 12
            hi[b], k[b], n[b] = lo[b] + 0xFFF, 2, 3
        elif 0xF0 <= b < 0xF8:
            lo[b] = (b & 0x07) << 18
            hi[b], k[b], n[b] = lo[b] + 0x3FFFF, 3, 4
    return lo, hi, k, n


_LEAD_LO, _LEAD_HI, _LEAD_K, _LEAD_N = _lead_table()


def _fully_valid(lo: int, hi: int, n: int) -> bool:
    return lo >= _MIN_FOR_LENGTH[n] and hi <= MAX_CODE_POINT and (hi < _SURROGATES[0] or lo > _SURROGATES[1])


def _fully_invalid(lo: int, hi: int, n: int) -> bool:
    if hi < _MIN_FOR_LENGTH[n] or lo > MAX_CODE_POINT:
        return True
    return lo >= _SURROGATES[0] and hi <= _SURROGATES[1]


_LEAD_FULLY_VALID = np.array(
    [_LEAD_N[b] > 0 and _fully_valid(int(_LEAD_LO[b]), int(_LEAD_HI[b]), int(_LEAD_N[b]))
     for b in range(256)]
)


class Utf8Expander:
    """Builds byte transitions for character states that share one piecewise alphabet.

    Args:
        starts: int64 ``[num_pieces]``, sorted first code point of each alphabet piece
            (``starts[0] == 0``); piece ``i`` covers ``[starts[i], starts[i+1])``.
        new_state: callback returning a fresh byte-state id.
        row: callback ``(state) -> int32 [256]`` row of byte transitions, written in place.
        budget_check: called after states are created; raises when over budget.
    """

    def __init__(self, starts: np.ndarray, new_state, row, budget_check) -> None:
        self.starts = starts
        self.new_state = new_state
        self.row = row
        self.budget_check = budget_check
        self._tails: dict[tuple[int, int], int] = {}
        self._shared: dict[tuple[int, int, int], int] = {}
        # piece index of each lead byte's interval ends, shared by all states
        self._lead_lo_piece = np.searchsorted(starts, _LEAD_LO, side="right") - 1
        self._lead_hi_piece = np.searchsorted(starts, _LEAD_HI, side="right") - 1

    def _tail(self, k: int, target: int) -> int:
        """State that accepts any k continuation bytes then moves to ``target``."""
        if k == 0:
            return target
        key = (k, target)
        state = self._tails.get(key)
        if state is None:
            nxt = self._tail(k - 1, target)
            state = self.new_state()
            self.row(state)[0x80:0xC0] = nxt
            self._tails[key] = state
        return state

    def expand(self, src: int, piece_target: np.ndarray) -> None:
        """Add the byte transitions of character state ``src``.

        Args:
            src: the byte-state id of the character state.
            piece_target: int64 ``[num_pieces]``, target state per piece (-1 = dead).
        """
        run = np.concatenate(([0], np.cumsum(piece_target[1:] != piece_target[:-1])))
        uniform = (run[self._lead_lo_piece] == run[self._lead_hi_piece]) & _LEAD_FULLY_VALID
        target = piece_target[self._lead_lo_piece]  # [256]
        row = self.row(src)
        ascii_bytes = uniform & (_LEAD_K == 0)
        row[ascii_bytes] = target[ascii_bytes]
        multi = np.nonzero(uniform & (_LEAD_K > 0) & (target >= 0))[0]
        for b in multi:
            row[b] = self._tail(int(_LEAD_K[b]), int(target[b]))
        for b in np.nonzero(~uniform & (_LEAD_N > 0))[0]:
            lo, hi = int(_LEAD_LO[b]), int(_LEAD_HI[b])
            dst = self._descend(piece_target, run, lo, hi, int(_LEAD_K[b]), int(_LEAD_N[b]))
            if dst >= 0:
                self.row(src)[b] = dst
        self.budget_check()

    def _descend(self, piece_target, run, lo: int, hi: int, k: int, n: int) -> int:
        """Byte state for a code-point interval with k continuation bytes left (-1 = dead)."""
        if _fully_invalid(lo, hi, n):
            return -1
        p_lo = int(np.searchsorted(self.starts, lo, side="right") - 1)
        p_hi = int(np.searchsorted(self.starts, hi, side="right") - 1)
        if run[p_lo] == run[p_hi] and _fully_valid(lo, hi, n):
            t = int(piece_target[p_lo])
            return -1 if t < 0 else self._tail(k, t)
        assert k > 0, "a single code point is always uniform"
        v_lo, v_hi = max(lo, _MIN_FOR_LENGTH[n]), min(hi, MAX_CODE_POINT)
        if lo <= _SURROGATES[0] <= hi and hi <= _SURROGATES[1]:
            v_hi = min(v_hi, _SURROGATES[0] - 1)
        q_lo = int(np.searchsorted(self.starts, v_lo, side="right") - 1)
        q_hi = int(np.searchsorted(self.starts, v_hi, side="right") - 1)
        if run[q_lo] == run[q_hi]:
            # constant on the valid part: the structure depends only on (lo, k, target)
            t = int(piece_target[q_lo])
            if t < 0:
                return -1
            key = (lo, k, t)
            if key not in self._shared:
                const = np.full(len(self.starts), t, np.int64)
                zero = np.zeros(len(self.starts), np.int64)
                self._shared[key] = self._build(const, zero, lo, k, n)
            return self._shared[key]
        return self._build(piece_target, run, lo, k, n)

    def _build(self, piece_target, run, lo: int, k: int, n: int) -> int:
        step = 1 << (6 * (k - 1))
        children = []
        for c in range(64):
            c_lo = lo + c * step
            children.append(self._descend(piece_target, run, c_lo, c_lo + step - 1, k - 1, n))
        if all(ch < 0 for ch in children):
            return -1
        state = self.new_state()
        self.row(state)[0x80:0xC0] = children
        return state
