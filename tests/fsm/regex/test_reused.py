"""Reusable definitions lowered once per process (``regex.reused``, ``parse.lower``'s
``reusable``): the "any JSON value" chain restored from a snapshot is the arena lowering it
builds, the same language as the old lowering (one canonical shape), masks equal brute force,
and the store is bounded and keyed by every option that changes the texts."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.regex import parse, reused
from structgen.fsm.regex.definitions import PLACEHOLDER_BASE
from structgen.fsm.regex.terms import ALT, BYTES, REPEAT, UNTIL, TermArena
from structgen.fsm.spec import JsonSchema
from tests.fsm._reference import brute_force_mask
from tests.fsm.index.test_lexical_masks import _vocab

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {}}},
    "required": ["name"],
}


@pytest.fixture(autouse=True)
def _empty_store():
    reused.clear()
    clear_cache()
    yield
    reused.clear()
    clear_cache()


def _lowered(whitespace="compact", schema=SCHEMA):
    return JsonSchema(schema, whitespace=whitespace, allow_extra_properties=True).lower()


def _lower(lowered, reusable) -> tuple[TermArena, int]:
    arena = TermArena()
    root = parse.lower(lowered.pattern, arena, definitions=list(lowered.definitions), **reusable)
    return arena, root


def _shape(arena: TermArena, term: int, table: dict) -> int:
    """A number for a term's structure with ids left out (alternatives as sets), from
    ``table`` shared by the arenas compared: equal numbers, equal structures, equal
    languages."""
    memo: dict[int, int] = {}
    stack = [term]
    while stack:
        t = stack[-1]
        kind, args = arena.kind[t], arena.args[t]
        if t <= 1 or kind == BYTES:
            kids = []
        elif kind == REPEAT:
            kids = [args[0]]
        elif kind == UNTIL:
            kids = [args[2]]
        else:  # CONCAT, ALT, AND, NOT: terms only
            kids = list(args)
        todo = [k for k in kids if k not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        if t <= 1 or kind == BYTES:
            key = (kind, args)
        elif kind == REPEAT:
            key = (kind, memo[args[0]], args[1], args[2])
        elif kind == UNTIL:
            key = (kind, args[0], args[1], memo[args[2]])
        elif kind == ALT:
            key = (kind, frozenset(memo[k] for k in args))
        else:
            key = (kind, tuple(memo[k] for k in args))
        memo[t] = table.setdefault(key, len(table))
    return memo[term]


@pytest.mark.parametrize("whitespace", ["compact", "flexible", 3])
def test_restored_run_is_the_arena_lowering_builds(whitespace) -> None:
    low = _lowered(whitespace)
    # the chain (one definition per nesting level 0..10), an extra key's tail and unit
    assert len(low.reusable) == 13
    old, old_root = _lower(low, {})  # the lowering without the store (atom recipes kept:
    # whether a class was built or imported changes its intermediate terms' ids, see reused)
    lowered, root = _lower(low, {"reusable": low.reusable})  # lowered, then kept
    assert reused.num_entries() == 1
    restored, again = _lower(low, {"reusable": low.reusable})  # restored from the snapshot
    assert again == root
    for name in ("kind", "args", "nullable", "first", "depth"):
        assert getattr(restored, name) == getattr(lowered, name), name
    table: dict = {}
    assert _shape(old, old_root, table) == _shape(restored, again, table)


PREFIXES = [b"{", b'{"name":"a","tags":[', b'{"name":"a","x":{"y":[{"', b'{"name":"","']
PREFIXES += [b'{"name":"a","z":' + b'{"k":[' * 4, b'{"name":"a","tags":[[[[[[[[[[', b'{"n']
PREFIXES += [b'{"name":"a","ta', '{"name":"a","é'.encode(), b'{"name":"a","t\\u00']


def test_masks_equal_brute_force_cold_and_restored() -> None:
    _check_masks(_vocab(), PREFIXES)


@pytest.mark.slow
def test_masks_equal_brute_force_on_smollm2(smollm2_vocab) -> None:
    _check_masks(smollm2_vocab, PREFIXES[1:4] + PREFIXES[6:9])


def _check_masks(vocab, prefixes: list[bytes]) -> None:
    """Compiled with the store empty (the run lowered, then kept) and again (restored): the
    masks after each prefix equal brute force (an automaton lowered without the store)."""
    for round_ in ("lowered", "restored"):
        clear_cache()
        vocab.lexical_masks.clear()
        grammar = compile_json_schema(SCHEMA, vocab, allow_extra_properties=True)
        assert reused.num_entries() == 1, round_
        for prefix in prefixes:
            state = grammar.dfa.walk(grammar.dfa.initial, prefix)
            assert state >= 0, prefix
            got = mask_bits(grammar.token_index.bitmask(state), vocab.vocab_size)
            want = brute_force_mask(grammar, vocab, prefix)  # lowered without the store
            assert np.array_equal(got, want), (round_, prefix)


def test_store_is_keyed_by_whitespace_and_bounded(monkeypatch) -> None:
    keys = []
    for ws in ["compact", "flexible", 3, "compact"]:
        low = _lowered(ws)
        keys.append(reused.run_key(list(low.definitions), sorted(low.reusable)))
        _lower(low, {"reusable": low.reusable})
    assert len(set(keys)) == 3 and keys[0] == keys[3]
    assert reused.num_entries() == 3
    monkeypatch.setattr(reused._runs, "max_entries", 2)
    _lower(_lowered(5), {"reusable": _lowered(5).reusable})
    assert reused.num_entries() == 2  # the least recently used, "flexible" then 3, dropped
    assert reused.restore(keys[0], TermArena()) is not None  # "compact", used last
    assert reused.restore(keys[1], TermArena()) is None
    assert reused.restore(keys[2], TermArena()) is None


def test_a_run_referring_outside_itself_is_lowered_as_usual() -> None:
    outside = chr(PLACEHOLDER_BASE)  # definition 0, not reusable
    texts = ["(?:abc|abd)+xyz", "(?:" + outside + "|q)*r", "(?:" + chr(PLACEHOLDER_BASE + 1) + ")s"]
    pattern = chr(PLACEHOLDER_BASE + 2)
    plain = TermArena()
    want = parse.lower(pattern, plain, definitions=texts)
    arena = TermArena()
    got = parse.lower(pattern, arena, definitions=texts, reusable=frozenset({1, 2}))
    assert reused.num_entries() == 0
    table: dict = {}
    assert _shape(arena, got, table) == _shape(plain, want, table)
    closed = TermArena()  # definitions 0..2 refer only to each other: kept
    got = parse.lower(pattern, closed, definitions=texts, reusable=frozenset({0, 1, 2}))
    assert reused.num_entries() == 1
    assert _shape(closed, got, table) == _shape(plain, want, table)


def test_restore_needs_a_fresh_arena_and_snapshot_names_every_field() -> None:
    low = _lowered()
    arena, _ = _lower(low, {"reusable": low.reusable})
    fields = {
        *TermArena._TERM_FIELDS,
        *TermArena._MEMO_FIELDS,
        *TermArena._SCALAR_FIELDS,
        *TermArena._DERIVED_FIELDS,
        *TermArena._SETTING_FIELDS,
        *TermArena._SHARED_FIELDS,
        *TermArena._LOWERING_FIELDS,
    }
    assert set(vars(TermArena())) == fields  # a new field must be given a kind above
    with pytest.raises(ValueError, match="holds terms"):
        arena.restore(arena.snapshot())
    arena.derivative(arena.num_terms - 1, ord("{"))
    with pytest.raises(ValueError, match="derivatives"):
        arena.snapshot()
    assert not arena.is_fresh and TermArena().is_fresh
