"""Cold masks stay exact: SmolLM2's real vocabulary, states of real JSON schemas.

The cold path builds DFA rows on demand (``ByteDFA._build_row``: one derivative for a literal,
one per live byte class otherwise) while the token-trie walk (C, or numpy) asks for them. The
reference is brute force over every token of the vocabulary: each token's bytes are walked,
byte by byte, through an independent automaton of the same pattern compiled with no rows
built (``ByteDFA.step``: one derivative per byte, never a row), and the token is allowed iff
the walk stays alive (EOS iff the state accepts).
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.index import trie
from structgen.fsm.regex.dfa import regex_to_dfa
from tests.fsm._reference import brute_force_mask

SCHEMAS = {
    # literal keys, a string, an integer, a boolean: literal rows and live-class rows
    "flat": (
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
        },
        '{"name":"Zoë \\"Z\\" ☃","age":-36}',
    ),
    # string formats and a pattern: digit classes, UTF-8 continuation states
    "formats": (
        {
            "type": "object",
            "properties": {
                "created": {"type": "string", "format": "date-time"},
                "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            },
            "required": ["created", "code"],
        },
        '{"created":"2024-03-15T09:30:00Z","code":"ADA-1815"}',
    ),
    # anyOf of objects and scalars
    "anyOf": (
        {"anyOf": [{"type": "object", "properties": {"k": {"const": "x"}}}, {"type": "number"}]},
        '{"k":"x"}',
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("walk", ["c", "numpy"])
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_cold_masks_match_brute_force(smollm2_vocab, monkeypatch, name, walk) -> None:
    if walk == "c" and not trie.HAVE_C_WALK:
        pytest.skip("C walk not built")
    monkeypatch.setattr(trie, "_c", trie._EXT if walk == "c" else None)
    schema, text = SCHEMAS[name]
    clear_cache()
    grammar = compile_json_schema(schema, smollm2_vocab)
    index, dfa = grammar.token_index, grammar.dfa
    data = text.encode()
    # a few byte offsets: start, inside a key, inside a string (after a UTF-8 lead byte
    # where there is one), inside a number or format, and the accepting end
    cuts = sorted({0, 3, len(data) // 2, len(data) - 3, len(data)})
    lead = next((i for i, b in enumerate(data) if b >= 0xC0), None)
    if lead is not None:
        cuts.append(lead + 1)
    rows_at_compile = dfa.num_rows_built
    for cut in cuts:
        state = dfa.walk(dfa.initial, data[:cut])
        assert state >= 0, cut
        got = mask_bits(index.bitmask(state), smollm2_vocab.vocab_size)
        want = brute_force_mask(grammar, smollm2_vocab, data[:cut])
        assert np.array_equal(got, want), (name, cut, np.flatnonzero(got != want)[:10])
        assert want.any()
        nxt = index.next_states(state)  # the row form of the same walk agrees
        live = nxt >= 0
        assert np.array_equal(live, want), (name, cut)
    assert dfa.num_rows_built > rows_at_compile  # the masks built rows: the cold path ran


def test_literal_and_class_rows_match_single_steps() -> None:
    """Every built row equals the per-byte derivatives of an unbuilt twin automaton."""
    pattern = r'\{"key":"(?:[^"\\]|\\.)*","n":-?[0-9]+\}'
    dfa = regex_to_dfa(pattern, eager_rows=0)
    twin = regex_to_dfa(pattern, eager_rows=0)
    assert dfa.explore()
    paths = {dfa.initial: b""}
    todo = [dfa.initial]
    while todo:
        s = todo.pop()
        row = dfa.row(s)
        ts = twin.walk(twin.initial, paths[s])
        for b in range(256):
            t = int(row[b])
            nt = twin.step(ts, b)
            assert (t >= 0) == (nt >= 0), (paths[s], b)
            if t >= 0:
                assert dfa.is_accepting(t) == twin.is_accepting(nt), (paths[s], b)
            if t >= 0 and t not in paths:
                paths[t] = paths[s] + bytes([b])
                todo.append(t)
    assert twin.num_rows_built == 0
    assert len(paths) == dfa.num_states


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_fused_walk_equals_two_call_walk(smollm2_vocab, name) -> None:
    """``walk_fused`` (a missing row built and the read byte's class derived in one
    ``row_tables(s, b)`` call) leaves the same masks, next states and row tables, PENDING
    entries included, as ``walk`` (``row_tables(s)`` then ``row_tables(s, b)``), on twin
    automata of a real schema over SmolLM2's trie; and it is the walk ``ByteDFA`` gets when
    ``walk_direct`` is off."""
    if not hasattr(trie._EXT, "walk_fused"):
        pytest.skip("C walk not built")
    schema, text = SCHEMAS[name]
    data = text.encode()
    tt = smollm2_vocab.token_trie
    clear_cache()
    pattern = compile_json_schema(schema, smollm2_vocab)
    dfas = [
        regex_to_dfa(pattern.pattern, definitions=pattern.definitions or None, eager_rows=0)
        for _ in range(2)
    ]
    trie.use_direct_rows(False)  # walk_direct (test_direct_rows.py) off: the callback walk
    try:
        assert trie._walk_c(dfas[0]) is trie._EXT.walk_fused
    finally:
        trie.use_direct_rows(True)
    calls = [0, 0]
    for k, (dfa, fn) in enumerate(zip(dfas, [trie._EXT.walk, trie._EXT.walk_fused])):
        tables = dfa.row_tables

        def counted(state=-1, byte=-1, tables=tables, k=k):
            calls[k] += 1
            return tables(state, byte)

        outs = []
        for cut in sorted({0, 3, len(data) // 2, len(data) - 3}):
            state = dfa.walk(dfa.initial, data[:cut])
            out = np.full(smollm2_vocab.vocab_size, -1, np.int32)
            mask = np.zeros((smollm2_vocab.vocab_size + 31) // 32, np.int32)
            stack = np.empty(tt.max_depth + 1, np.int32)
            fn(tt.byte, tt.depth, tt.skip, tt.token, stack, out, mask, state, counted)
            outs.append((out, mask))
        dfa.outs = outs
    a, b = dfas
    for (out_a, mask_a), (out_b, mask_b) in zip(a.outs, b.outs):
        assert np.array_equal(mask_a, mask_b) and np.array_equal(out_a, out_b)
    assert a.num_states == b.num_states and a.num_rows_built == b.num_rows_built
    rows_a, slot_a = a.row_tables()
    rows_b, slot_b = b.row_tables()
    n = a.num_states
    assert np.array_equal(slot_a[:n], slot_b[:n])
    assert np.array_equal(rows_a[: a.num_rows_built], rows_b[: b.num_rows_built])
    # never more callbacks for the same work; fewer where a row with several live classes
    # (a string's) is built during the walk
    assert calls[1] <= calls[0]
    if name == "flat":
        assert calls[1] < calls[0]
