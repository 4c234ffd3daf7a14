"""The long alternations' first-byte grouping built in C (``csrc/regex_derive.h``
``alt_groups_of``, when a C derivative meets an alternation not grouped yet) against
``TermArena._alt_members``' Python build: the same groups in the same order stored in
``arena._alt_index``, and the same automaton (terms, ids, rows) as with the Python grouping."""

from __future__ import annotations

import numpy as np
import pytest

from structgen.fsm.regex import terms
from structgen.fsm.regex.dfa import regex_to_dfa
from structgen.fsm.regex.terms import ALT

pytestmark = pytest.mark.skipif(terms._EXT is None, reason="C extension not built")

PATTERNS = [
    r"(?:ab|ac|b[0-9]|cd|c|d+|e|f[a-f]|g|[a-c]x|[b-e]y|h|\xc3\xa9|zz)q",
    # a JSON string's inside: the character alternation with its UTF-8 lead bytes
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    r"(?:ab|cd|ef|gh|ij|kl|mn|op|qr|a1|c2|%[0-9A-F]{2})+@x",
]


def _python_groups(arena, t: int) -> list:
    by_mask: dict[int, list[int]] = {}
    for u in arena.args[t]:
        by_mask.setdefault(arena.first[u], []).append(u)
    return [(mask, tuple(us)) for mask, us in by_mask.items()]


def _explored(pattern: str, python_groups: bool):
    """The pattern's automaton explored with the C derivatives; ``python_groups``: every long
    alternation grouped by ``_alt_members``' Python build first (the C one finds them)."""
    dfa = regex_to_dfa(pattern, eager_rows=0)
    arena = dfa.arena
    if python_groups:
        for t in range(arena.num_terms):
            if arena.kind[t] == ALT and len(arena.args[t]) >= 8:
                arena._alt_members(t, 0)
        assert arena._alt_index
    else:
        assert not arena._alt_index
    dfa.explore()
    return dfa


@pytest.mark.parametrize("pattern", PATTERNS)
def test_c_groups_equal_the_python_build(pattern) -> None:
    _explored(pattern, False)  # a pattern's first lowering in the process fills its memos
    with_c, with_py = _explored(pattern, False), _explored(pattern, True)
    arena = with_c.arena
    assert arena._alt_index
    for t, groups in arena._alt_index.items():
        assert groups == _python_groups(arena, t), t
        assert with_py.arena._alt_index.get(t, groups) == groups, t
        for b in range(256):
            want = tuple(u for u in arena.args[t] if (arena.first[u] >> b) & 1)
            assert arena._alt_members(t, b) == want, (t, b)
    assert with_c.arena.kind == with_py.arena.kind and with_c.arena.args == with_py.arena.args
    assert with_c._terms == with_py._terms
    n = with_c.num_rows_built
    assert n == with_py.num_rows_built
    assert np.array_equal(with_c._rows[:n], with_py._rows[:n])
