"""Rows built for the token-trie walk derive each byte class when first read (``PENDING``).

Reference: a twin automaton of the same pattern whose rows are built whole (``row``); every
entry a lazily built row ends with equals the twin's, and nothing but ``row_tables`` shows
``PENDING``.
"""

from __future__ import annotations

import re

import numpy as np

from structgen.fsm.regex.dfa import regex_to_dfa
from structgen.fsm.regex.lazy_dfa import PENDING

PATTERN = r'\{"k":"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*","n":-?[0-9]{1,3}\}'


def _string_state(dfa) -> int:
    return dfa.walk(dfa.initial, b'{"k":"')


def test_row_tables_leaves_classes_pending_and_derives_one_per_byte() -> None:
    dfa = regex_to_dfa(PATTERN, eager_rows=0)
    twin = regex_to_dfa(PATTERN, eager_rows=0)
    s, ts = _string_state(dfa), _string_state(twin)
    rows, slot = dfa.row_tables(s)
    row = rows[slot[s]]
    assert (row == PENDING).sum() > 100  # the string's live classes, none derived
    assert (row[:0x20] == -1).all()  # control bytes: dead without a derivative
    states_before = dfa.num_states
    rows, slot = dfa.row_tables(s, ord("a"))  # the one class of "a": printable ASCII
    row = rows[slot[s]]
    assert row[ord("a")] == row[ord("z")] == s  # the self-loop, written for the class
    assert row[0xC3] == PENDING and row[ord("\\")] == PENDING
    assert dfa.num_states == states_before  # "a" leads back to s: no new state
    assert dfa.step(s, 0xC3) >= 0  # step derives what it reads
    full = dfa.row(s)  # row derives the rest
    assert not (full == PENDING).any()
    want = twin.row(ts)
    for b in range(256):
        assert (full[b] >= 0) == (want[b] >= 0), b
        if full[b] >= 0:
            assert dfa.is_accepting(int(full[b])) == twin.is_accepting(int(want[b]))


def test_walks_and_exploration_never_see_pending() -> None:
    dfa = regex_to_dfa(PATTERN, eager_rows=0)
    s = _string_state(dfa)
    dfa.row_tables(s)
    nxt = dfa.gather(np.array([s, s, s], np.int64), np.array([0xC3, ord('"'), 0x01], np.uint8))
    assert nxt[0] >= 0 and nxt[1] >= 0 and nxt[2] == -1
    assert dfa.walk(s, '\u00e9x","n":12}'.encode()) >= 0
    assert dfa.accepts('{"k":"\u00e9\\n","n":-5}'.encode())
    assert dfa.explore()
    assert not (dfa.transitions == PENDING).any()
    twin = regex_to_dfa(PATTERN, eager_rows=0)
    assert twin.explore() and twin.num_states == dfa.num_states


def test_c_walk_bytes_derives_pending_classes() -> None:
    from structgen.fsm.index import trie

    if not trie.HAVE_C_WALK:
        return
    dfa = regex_to_dfa(PATTERN, eager_rows=0)
    twin = regex_to_dfa(PATTERN, eager_rows=0)
    s, ts = _string_state(dfa), _string_state(twin)
    data = '\u00e9\\"x","n":12}'.encode()
    dfa.row_tables(s)
    end = trie._EXT.walk_bytes(data, s, dfa.row_tables)
    assert end >= 0 and dfa.is_accepting(end)
    assert twin.is_accepting(twin.walk(ts, data))
    assert trie._EXT.walk_bytes(b'"x', s, dfa.row_tables) == -1


def test_accepts_reads_through_pending_classes() -> None:
    """``accepts`` (whole-string membership) passes a row's ``PENDING`` classes by
    derivatives, never reading them as dead bytes; the reference is Python's ``re``."""
    dfa = regex_to_dfa(PATTERN, eager_rows=0)
    s = _string_state(dfa)
    dfa.row_tables(s)  # the string state's row: every live class PENDING
    for text in ('{"k":"\u00e9\\n","n":-5}', '{"k":"a","n":1}', '{"k":"\x01","n":1}'):
        assert dfa.accepts(text.encode()) == (re.fullmatch(PATTERN, text) is not None), text


def test_long_alternation_members_by_byte_match_a_filter() -> None:
    """``TermArena._alt_members`` of an alternation with many members (grouped by first-byte
    mask) gives, for every byte, exactly the members that byte can start, in member order;
    and the derivatives built on it match Python's ``re`` on every one-byte step."""
    from structgen.fsm.regex.terms import ALT

    pattern = r"(?:ab|ac|b[0-9]|cd|c|d+|e|f[a-f]|g|[a-c]x|[b-e]y|h|\xc3\xa9|zz)q"
    dfa = regex_to_dfa(pattern, eager_rows=0)
    arena = dfa.arena
    alts = [t for t in range(arena.num_terms) if arena.kind[t] == ALT and len(arena.args[t]) >= 8]
    assert alts
    for t in alts:
        members = arena.args[t]
        for b in range(256):
            want = tuple(u for u in members if (arena.first[u] >> b) & 1)
            assert arena._alt_members(t, b) == want, (t, b)
    for text in ("abq", "b7q", "ddddq", "fcq", "axq", "eyq", "\u00e9q", "zzq", "zq", "b", "q"):
        assert dfa.accepts(text.encode()) == (re.fullmatch(pattern, text) is not None), text


def test_literal_rows_equal_the_general_build() -> None:
    """A row whose term is one byte or ``CONCAT(byte, tail)`` (``ByteDFA._literal_row``, no
    derivative call) equals the general build's (the same term's row in a twin automaton
    whose literal shortcut is off): the tail's state, accepting flag and live-byte count;
    a tail with an empty intersection (``xy & xz``) gives a dead byte and a count of 0."""
    from structgen.fsm.regex.lazy_dfa import ByteDFA
    from structgen.fsm.regex.terms import TermArena

    def build(literal: bool, dead_root: bool = False):
        arena = TermArena()
        empty_and = arena.intersect([arena.bytes_then(b"xy", 1), arena.bytes_then(b"xz", 1)])
        if dead_root:  # a root term "ab" then an empty intersection: reachable only here
            root = arena.bytes_then(b"ab", empty_and)
        else:
            ys = arena.repeat(arena.byteset(1 << ord("y")), 0, -1)  # y*
            live_and = arena.intersect([arena.bytes_then(b"xy", 1), arena.bytes_then(b"x", ys)])
            live_and = arena.alt([live_and, arena.bytes_then(b"q", 1)])
            root = arena.alt(
                [
                    arena.bytes_then(b"cd", live_and),
                    arena.bytes_then(b'{"name":', arena.repeat(arena.byteset(1 << 0xFF), 1, 3)),
                ]
            )
        dfa = ByteDFA(arena, root)
        if not literal:
            dfa._literal_row = lambda *args: False
        return dfa

    for dead_root in (False, True):
        fast, slow = build(True, dead_root), build(False, dead_root)
        assert fast.explore() and slow.explore()
        assert fast.num_states == slow.num_states
        assert np.array_equal(fast.transitions, slow.transitions)
        assert np.array_equal(fast.accepting, slow.accepting)
        assert np.array_equal(fast.num_out, slow.num_out)
    assert fast.row(fast.initial)[ord("a")] == -1 and fast.num_out[fast.initial] == 0
    fast, slow = build(True), build(False)
    for text, ok in ((b"cdxy", True), (b"cdx", False), (b"cdq", True), (b"cd", False)):
        assert fast.accepts(text) == slow.accepts(text) == ok, text
    assert fast.accepts(b'{"name":\xff\xff') and not fast.accepts(b'{"name":')
