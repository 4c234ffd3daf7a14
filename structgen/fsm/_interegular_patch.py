"""A faster, budgeted ``interegular.fsm.crawl`` (the one place we touch interegular internals).

interegular 0.3.3 looks up every new state with ``list.index`` (quadratic in the
number of states); this replacement keeps a dict from state to index, produces the
same FSM, and stops with ``GrammarTooComplexError`` past ``STATE_BUDGET`` states so
that a regex whose determinisation blows up fails fast instead of hanging.
"""

from __future__ import annotations

import interegular.fsm as _fsm

from ..errors import GrammarTooComplexError

__all__ = ["install", "STATE_BUDGET"]

STATE_BUDGET = 200_000


def _key(state):
    """Hashable key with the same equality as ``state`` (interegular uses sets for some)."""
    try:
        hash(state)
        return state
    except TypeError:
        pass
    if isinstance(state, (set, frozenset)):
        return frozenset(_key(s) for s in state)
    if isinstance(state, dict):
        return ("dict", frozenset((k, _key(v)) for k, v in state.items()))
    if isinstance(state, (tuple, list)):
        return (type(state).__name__,) + tuple(_key(s) for s in state)
    return state


def _crawl(alphabet, initial, final, follow):
    states = [initial]
    index = {_key(initial): 0}
    finals = set()
    transitions: dict[int, dict] = {}
    i = 0
    while i < len(states):
        state = states[i]
        if final(state):
            finals.add(i)
        transitions[i] = {}
        for transition in alphabet.by_transition:
            try:
                nxt = follow(state, transition)
            except _fsm.OblivionError:
                continue
            key = _key(nxt)
            j = index.get(key)
            if j is None:
                j = len(states)
                states.append(nxt)
                index[key] = j
                if j >= STATE_BUDGET:
                    raise GrammarTooComplexError(
                        f"character automaton exceeds {STATE_BUDGET} states; simplify the pattern"
                    )
            transitions[i][transition] = j
        i += 1
    return _fsm.FSM(alphabet=alphabet, states=range(len(states)), initial=0, finals=finals,
                    map=transitions, __no_validation__=True)


def install() -> None:
    """Replace ``interegular.fsm.crawl`` (idempotent)."""
    if _fsm.crawl is not _crawl:
        _fsm.crawl = _crawl
