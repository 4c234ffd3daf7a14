"""Regex -> minimal, trimmed DFA over bytes (``ByteDFA``).

Pipeline: Python ``re`` syntax check and vetting (``_sre``) -> interegular character
FSM -> UTF-8 byte expansion (``_utf8``) -> trim (drop states that are unreachable or
cannot reach acceptance) -> Moore minimisation (vectorised with numpy).

Regex dialect: Python ``re`` with fullmatch semantics (the whole output must match).
``\\d``, ``\\w``, ``\\s`` and their negations follow interegular, i.e. ASCII semantics
(as with ``re.ASCII``); ``.`` matches any code point except ``\\n``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import interegular
import numpy as np
from interegular.fsm import anything_else

from ..errors import GrammarTooComplexError, RegexError, UnsupportedRegexError
from ._interegular_patch import install as _install_interegular_patch
from ._sre import vet_pattern
from ._utf8 import Utf8Expander

__all__ = ["ByteDFA", "regex_to_dfa", "DEFAULT_MAX_STATES", "DEFAULT_MAX_POSITIONS"]

DEFAULT_MAX_STATES = 200_000
_install_interegular_patch()
DEFAULT_MAX_POSITIONS = 12_000


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A deterministic automaton over bytes, minimal and trimmed.

    Every state can reach an accepting state (dead ends are removed), so any byte
    string that stays on live transitions is a prefix of some accepted string.

    Attributes:
        transitions: int32 ``[num_states, 256]``, next state per byte, -1 = dead.
        initial: the start state.
        accepting: bool ``[num_states]``.
    """

    transitions: np.ndarray
    initial: int
    accepting: np.ndarray
    num_out: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_out", (self.transitions >= 0).sum(axis=1).astype(np.int32))

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])

    def walk(self, state: int, data: bytes) -> int:
        """State after reading ``data`` from ``state``; -1 if it dies. Raises: never."""
        table = self.transitions
        for b in data:
            if state < 0:
                return -1
            state = int(table[state, b])
        return state

    def accepts(self, data: bytes) -> bool:
        """Whole-string membership."""
        state = self.walk(self.initial, data)
        return state >= 0 and bool(self.accepting[state])

    def is_accepting(self, state: int) -> bool:
        return bool(self.accepting[state])


def regex_to_dfa(
    pattern: str,
    *,
    max_states: int = DEFAULT_MAX_STATES,
    max_positions: int = DEFAULT_MAX_POSITIONS,
) -> ByteDFA:
    """Compile a Python regex (fullmatch semantics) to a minimal trimmed ``ByteDFA``.

    Raises:
        RegexError: the pattern does not parse, or matches no string at all.
        UnsupportedRegexError: lookaround, backreferences, anchors, atomic groups.
        GrammarTooComplexError: more than ``max_states`` states (or ``max_positions``
            expanded regex positions, checked before any automaton is built).
    """
    vet_pattern(pattern, max_positions)
    try:
        fsm = interegular.parse_pattern(pattern).to_fsm()
    except interegular.Unsupported as exc:
        raise UnsupportedRegexError(f"unsupported regex feature in {pattern!r}: {exc}") from exc
    except interegular.InvalidSyntax as exc:
        raise RegexError(f"cannot parse regex {pattern!r}: {exc}") from exc
    if len(fsm.states) > max_states:
        raise GrammarTooComplexError(f"regex needs {len(fsm.states)} states (budget {max_states})")
    table, initial, accepting = _expand_to_bytes(fsm, max_states)
    table, initial, accepting = _trim(table, initial, accepting)
    if table is None:
        raise RegexError(f"regex {pattern!r} matches no string")
    table, initial, accepting = _minimize(table, initial, accepting)
    return ByteDFA(table, initial, accepting)


def _alphabet_pieces(fsm) -> tuple[np.ndarray, np.ndarray]:
    """Piecewise alphabet: (starts int64 [P], symbol int64 [P]) covering 0..0x10FFFF."""
    mapping = fsm.alphabet._symbol_mapping
    other = mapping.get(anything_else, -1)
    explicit = sorted((ord(c), s) for c, s in mapping.items() if c is not anything_else)
    starts: list[int] = []
    symbols: list[int] = []

    def push(start: int, sym: int) -> None:
        if symbols and symbols[-1] == sym:
            return
        starts.append(start)
        symbols.append(sym)

    prev_end = 0
    for cp, sym in explicit:
        if cp > prev_end:
            push(prev_end, other)
        push(cp, sym)
        prev_end = cp + 1
    if prev_end <= 0x10FFFF:
        push(prev_end, other)
    return np.asarray(starts, np.int64), np.asarray(symbols, np.int64)


def _expand_to_bytes(fsm, max_states: int):
    states = sorted(fsm.states)
    index = {s: i for i, s in enumerate(states)}
    rows: list[np.ndarray] = [np.full(256, -1, np.int32) for _ in states]

    def new_state() -> int:
        rows.append(np.full(256, -1, np.int32))
        return len(rows) - 1

    def row(state: int) -> np.ndarray:
        return rows[state]

    def budget_check() -> None:
        if len(rows) > max_states:
            raise GrammarTooComplexError(
                f"byte automaton exceeds {max_states} states; simplify the pattern"
            )

    starts, symbols = _alphabet_pieces(fsm)
    num_symbols = int(symbols.max()) + 2 if len(symbols) else 1
    expander = Utf8Expander(starts, new_state, row, budget_check)
    for s in states:
        sym_target = np.full(num_symbols, -1, np.int64)
        for sym, dst in fsm.map.get(s, {}).items():
            sym_target[sym] = index[dst]
        piece_target = np.where(symbols >= 0, sym_target[symbols], -1)
        expander.expand(index[s], piece_target)
    accepting = np.zeros(len(rows), bool)
    for s in fsm.finals:
        accepting[index[s]] = True
    return np.stack(rows), index[fsm.initial], accepting


def _reachable(table: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """bool [num_states]: states reachable from ``seeds`` along ``table`` edges."""
    seen = np.zeros(table.shape[0], bool)
    frontier = np.unique(seeds)
    seen[frontier] = True
    while frontier.size:
        nxt = table[frontier].ravel()
        nxt = np.unique(nxt[nxt >= 0])
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
    return seen


def _co_reachable(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """bool [num_states]: states from which an accepting state is reachable."""
    src, byte = np.nonzero(table >= 0)
    dst = table[src, byte]
    order = np.argsort(dst, kind="stable")
    src, dst = src[order], dst[order]
    bounds = np.searchsorted(dst, np.arange(table.shape[0] + 1))
    live = accepting.copy()
    frontier = np.nonzero(accepting)[0]
    while frontier.size:
        preds = np.concatenate([src[bounds[s] : bounds[s + 1]] for s in frontier])
        preds = np.unique(preds)
        frontier = preds[~live[preds]]
        live[frontier] = True
    return live


def _trim(table: np.ndarray, initial: int, accepting: np.ndarray):
    keep = _reachable(table, np.array([initial])) & _co_reachable(table, accepting)
    if not keep[initial]:
        return None, -1, None
    new_id = np.full(table.shape[0] + 1, -1, np.int32)  # last slot maps -1 -> -1
    new_id[np.nonzero(keep)[0]] = np.arange(int(keep.sum()), dtype=np.int32)
    trimmed = new_id[table[keep]]  # index -1 hits the last slot
    return trimmed, int(new_id[initial]), accepting[keep]


def _minimize(table: np.ndarray, initial: int, accepting: np.ndarray):
    """Moore partition refinement; rows hashed with random 64-bit weights."""
    n = table.shape[0]
    cols = np.unique(table, axis=1)  # identical byte columns refine identically
    rng = np.random.default_rng(0x5EED)
    weights = rng.integers(1, 2**62, size=cols.shape[1] + 1, dtype=np.int64) | 1
    cls = accepting.astype(np.int64)
    num_classes = len(np.unique(cls))
    while True:
        succ = np.where(cols >= 0, cls[np.maximum(cols, 0)] + 1, 0)  # [n, distinct columns]
        with np.errstate(over="ignore"):
            sig = succ @ weights[:-1] + (cls + 1) * weights[-1]
            sig = sig ^ (cls * np.int64(0x9E3779B97F4A7C15 - 2**64))
        _, new_cls = np.unique(sig, return_inverse=True)
        new_cls = new_cls.reshape(-1).astype(np.int64)
        count = int(new_cls.max()) + 1 if n else 0
        cls = new_cls
        if count == num_classes:
            break
        num_classes = count
    # representative row per class; renumber so that the initial state is 0 in BFS order
    reps = np.full(num_classes, -1, np.int64)
    reps[cls[::-1]] = np.arange(n)[::-1]
    small = np.where(table[reps] >= 0, cls[np.maximum(table[reps], 0)], -1)
    order = _bfs_order(small, int(cls[initial]))
    perm = np.full(num_classes + 1, -1, np.int64)
    perm[order] = np.arange(len(order))
    final = perm[small][order].astype(np.int32)
    return final, 0, accepting[reps][order]


def _bfs_order(table: np.ndarray, start: int) -> np.ndarray:
    order = [start]
    seen = {start}
    i = 0
    while i < len(order):
        for dst in np.unique(table[order[i]]):
            d = int(dst)
            if d >= 0 and d not in seen:
                seen.add(d)
                order.append(d)
        i += 1
    return np.asarray(order, np.int64)
