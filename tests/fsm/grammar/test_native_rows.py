"""The grammar automaton's rows built in C (``csrc/cfgrows.c``) equal the Python reference.

Both automata share one grammar's charts and lexers; walked breadth-first from the start,
each configuration of the C-built automaton must hold the same lexemes and accepting flag
as its twin in the Python one, and every byte must lead to twins (the configuration ids
may be numbered differently: a one-to-one map is built and checked as the walk goes). Also:
``union_state``, and a budget error raised by the Earley parser in the middle of a C row
(the row stays unbuilt and the automaton goes on correctly once the budget allows it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structgen.errors import GrammarTooComplexError
from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.automaton import HAVE_C_ROWS, GrammarAutomaton
from structgen.fsm.grammar.compile import clear_cache
from structgen.fsm.grammar.earley import EarleyCharts
from tests.fsm.grammar._grammars import ARITHMETIC, BALANCED, NESTED_LISTS, STATEMENTS

pytestmark = pytest.mark.skipif(not HAVE_C_ROWS, reason="the _cfgrows C extension is not built")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"
DATA = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "grammars"


def _twins(built, native: bool) -> GrammarAutomaton:
    """A fresh automaton over ``built``'s charts and lexers (its lead-in kept)."""
    lexers, lead_in = built.lexers, None
    if built.trigger_id >= 0:
        lexers, lead_in = lexers[: built.trigger_id], lexers[built.trigger_id]
    return GrammarAutomaton(
        built.charts, lexers, sorted(built.ignore), lead_in=lead_in, native=native
    )


def _same_automaton(ref: GrammarAutomaton, nat: GrammarAutomaton, rows: int) -> int:
    """Walk both breadth-first over ``rows`` rows, asserting twins; the rows compared."""
    twin = {ref.initial: nat.initial}
    queue, done = [ref.initial], 0
    while done < len(queue) and done < rows:
        a = queue[done]
        b = twin[a]
        done += 1
        assert nat.lexemes(b) == ref.lexemes(a)
        assert nat.is_accepting(b) == ref.is_accepting(a)
        ra, rb = ref.row(a).tolist(), nat.row(b).tolist()
        for byte in range(256):
            x, y = ra[byte], rb[byte]
            assert (x < 0) == (y < 0), (a, byte)
            if x < 0:
                continue
            if x in twin:
                assert twin[x] == y, (a, byte)
            else:
                twin[x] = y
                queue.append(x)
    assert len(set(twin.values())) == len(twin)  # one-to-one
    return done


def _compiled(source: str, syntax: str, **kwargs):
    return compile_grammar(source, syntax=syntax, **kwargs).dfa


CASES = {
    **{
        f"gbnf:{n}": ((FIXTURES / f"{n}.gbnf").read_text(), "gbnf")
        for n in ("c", "json", "json_arr")
    },
    **{
        f"data:{p.name}": (p.read_text(), "lark" if p.suffix == ".lark" else "gbnf")
        for p in sorted(DATA.iterdir())
    },
    "arithmetic": (ARITHMETIC, "lark"),
    "balanced": (BALANCED, "lark"),
    "nested_lists": (NESTED_LISTS, "lark"),
    "statements": (STATEMENTS, "lark"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_c_rows_build_the_python_automaton(name: str) -> None:
    source, syntax = CASES[name]
    built = _compiled(source, syntax)
    if not isinstance(built, GrammarAutomaton):
        pytest.skip("a regular grammar: a plain DFA, no grammar automaton")
    ref, nat = _twins(built, native=False), _twins(built, native=True)
    assert nat.native and not ref.native
    assert _same_automaton(ref, nat, 600) >= min(600, ref.num_states)


def test_c_rows_with_a_trigger_lead_in() -> None:
    built = _compiled(ARITHMETIC, "lark", trigger="<calc>")
    assert built.trigger_id >= 0
    _same_automaton(_twins(built, native=False), _twins(built, native=True), 400)


@pytest.mark.parametrize(
    ("name", "trigger"), [("statements", None), ("arithmetic", "<calc>"), ("gbnf:c", None)]
)
def test_lexeme_ends_by_a_c_call_equal_the_callback(name, trigger, monkeypatch) -> None:
    """Over C charts the row builder reaches a lexeme's end node by a C call to their scan
    (``Core.set_charts``: ``_c_end`` is never called, ``%ignore`` lexemes and the lead-in end
    at their own node); over Python charts it calls ``_c_end``. Same automaton."""
    source, syntax = CASES[name]
    built = _compiled(source, syntax, trigger=trigger)
    cfg = built.charts.cfg
    nullable = {t for t in range(len(cfg.terminals)) if built.charts._nullable(-1 - t)}
    lexers, lead_in = built.lexers, None
    if built.trigger_id >= 0:
        lexers, lead_in = lexers[: built.trigger_id], lexers[built.trigger_id]
    callers = []  # the automaton of each _c_end call
    real = GrammarAutomaton._c_end
    monkeypatch.setattr(
        GrammarAutomaton,
        "_c_end",
        lambda self, t, node: callers.append(self) or real(self, t, node),
    )

    def automaton(native_charts: bool) -> GrammarAutomaton:
        charts = EarleyCharts(cfg, nullable, native=native_charts)
        return GrammarAutomaton(charts, lexers, sorted(built.ignore), lead_in=lead_in)

    direct, called = automaton(True), automaton(False)
    assert direct.charts.native and not called.charts.native
    assert _same_automaton(called, direct, 500) >= min(500, called.num_states)
    assert callers and all(a is called for a in callers)


def test_union_state_matches() -> None:
    built = _compiled(STATEMENTS, "lark")
    ref, nat = _twins(built, native=False), _twins(built, native=True)
    a, b = ref.walk(ref.initial, b"x = 1"), nat.walk(nat.initial, b"x = 1")
    c, d = ref.walk(ref.initial, b"if (y"), nat.walk(nat.initial, b"if (y")
    u, v = ref.union_state(a, c), nat.union_state(b, d)
    assert nat.lexemes(v) == ref.lexemes(u)
    assert nat.is_accepting(v) == ref.is_accepting(u)
    assert nat.union_state(b, b) == b
    for text in (b" + 2;", b") {}", b" == 3) { z = 4; }"):
        x, y = ref.walk(u, text), nat.walk(v, text)
        assert (x < 0) == (y < 0)
        if x >= 0:
            assert nat.lexemes(y) == ref.lexemes(x)
            assert nat.is_accepting(y) == ref.is_accepting(x)


def test_budget_error_in_a_c_row_leaves_it_unbuilt() -> None:
    source = (FIXTURES / "c.gbnf").read_text()
    ref = _twins(_compiled(source, "gbnf"), native=False)
    built = _compiled(source, "gbnf")
    nat = _twins(built, native=True)
    charts = built.charts
    budget = charts.max_items
    charts.max_items = charts.num_items  # the next new chart node raises
    failed = None
    for state in range(10_000):
        if state >= nat.num_states:
            break
        try:
            nat.row(state)
        except GrammarTooComplexError:
            failed = state
            break
    assert failed is not None, "no row needed a new chart node"
    assert nat._slot[failed] < 0  # not published
    charts.max_items = budget
    assert _same_automaton(ref, nat, 800) == 800


def test_lexer_rows_built_on_demand() -> None:
    """A compile builds the lexer rows of the terminals the start expects and no other (the
    terminals share one automaton: the rows built are those of the expected terminals'
    start states); a lexer's "can start a lexeme" (read from its first bytes) equals its
    first row's."""
    clear_cache()  # a fresh compile: the cached one's lexers were walked by other tests
    built = _compiled((DATA / "sql_select.lark").read_text(), "lark")
    charts = built.charts
    expected = set(charts.expected[charts.root]) | set(built.ignore)
    shared = built.lexers[0].dfa
    assert all(lexer.dfa is shared for lexer in built.lexers)
    starts = {built.lexers[t].initial for t in expected}
    assert 0 < shared.num_rows_built <= len(starts)
    rows = {s for s in range(shared.num_states) if built.lexers[0].has_row(s)}
    assert rows <= starts
    for t, lexer in enumerate(built.lexers):
        if t not in expected and lexer.initial not in starts:
            assert not lexer.has_row(lexer.initial), t
    for t, lexer in enumerate(built.lexers):
        assert built._movable[t] == bool((lexer.row(lexer.initial) >= 0).any()), t


def test_row_tables_callback_is_c_and_answers_as_python() -> None:
    """Native, the token-trie walk's callback is ``Core.row_tables``: it builds a missing row
    (through the table growths: far more rows than the first capacity) and answers the
    same read-only views as the Python path, one tuple while no table grew."""
    built = _compiled((FIXTURES / "json.gbnf").read_text(), "gbnf")
    ref, nat = _twins(built, native=False), _twins(built, native=True)
    assert type(nat.row_tables).__name__ == "builtin_function_or_method"
    assert _same_automaton(ref, nat, 700) == 700  # row() builds through row_tables
    rows, slot = nat.row_tables()
    assert not rows.flags.writeable and not slot.flags.writeable
    assert rows.base is nat._rows and slot.base is nat._slot
    assert nat.row_tables() is nat.row_tables(0)  # built: the cached answer
    state = next(s for s in range(nat.num_states) if nat._slot[s] < 0)
    rows, slot = nat.row_tables(state)
    assert slot[state] >= 0 and nat.num_rows_built == 701
    assert rows[slot[state]].tolist() == nat.row(state).tolist()
    with pytest.raises(IndexError):
        nat.row_tables(10**9)


def test_row_budget_raised_through_the_c_callback() -> None:
    """``max_states`` reached, the C callback leaves the row to the Python path, which
    raises ``GrammarTooComplexError`` and builds nothing."""
    built = _compiled((FIXTURES / "json.gbnf").read_text(), "gbnf")
    nat = _twins(built, native=True)
    nat.max_states = 5
    with pytest.raises(GrammarTooComplexError):
        for state in range(10_000):
            nat.row_tables(state)
    assert nat.num_rows_built == 5
    assert nat._slot[state] < 0


def test_rows_built_from_two_threads() -> None:
    """Two threads building rows through the C callback (its lock is the automaton's) give
    the Python reference's automaton."""
    import threading

    built = _compiled((FIXTURES / "c.gbnf").read_text(), "gbnf")
    ref, nat = _twins(built, native=False), _twins(built, native=True)
    errors: list[BaseException] = []

    def build(order: int) -> None:
        try:
            for text in (b"int f(int a){return a+1;}", b"while(x<3){x = x*2;}")[::order]:
                state = nat.initial
                for byte in text * 3:
                    if state < 0:
                        break
                    state = int(nat.row_tables(state)[0][nat._slot[state]][byte])
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(k,)) for k in (1, -1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert _same_automaton(ref, nat, 500) >= min(500, ref.num_states)


def test_row_tables_after_the_automaton_is_gone() -> None:
    """The core holds its automaton weakly: its callback then raises, never crashes."""
    built = _compiled(ARITHMETIC, "lark")
    callback = _twins(built, native=True).row_tables
    with pytest.raises(RuntimeError, match="gone"):
        callback(0)


def _random_texts(ref: GrammarAutomaton, rng, count: int, length: int) -> list[bytes]:
    """``count`` texts of up to ``length`` bytes the grammar reads (each byte drawn from the
    live bytes of the reference's rows), a dead byte appended to every fourth."""
    texts = []
    for k in range(count):
        state, out = ref.initial, bytearray()
        for _ in range(length):
            live = [b for b, x in enumerate(ref.row(state).tolist()) if x >= 0]
            if not live:
                break
            byte = live[rng.randrange(len(live))]
            out.append(byte)
            state = int(ref.row(state)[byte])
        if k % 4 == 3:
            dead = [b for b, x in enumerate(ref.row(state).tolist()) if x < 0] if state >= 0 else []
            if dead:
                out.append(dead[rng.randrange(len(dead))])
        texts.append(bytes(out))
    return texts


@pytest.mark.parametrize("name", sorted(CASES))
def test_c_walk_without_rows_equals_the_rows_walk(name: str) -> None:
    """``Core.walk`` (the cold step's walk over a token's bytes: each missing row's entry
    stepped alone, no row built; a built row read) reaches the configuration the Python
    rows reach, chunk by chunk over random texts, whichever rows were built before; it
    declines (None, nothing changed) where a new configuration per byte may not fit."""
    import random

    source, syntax = CASES[name]
    built = _compiled(source, syntax)
    if not isinstance(built, GrammarAutomaton):
        pytest.skip("a regular grammar: a plain DFA, no grammar automaton")
    ref, nat = _twins(built, native=False), _twins(built, native=True)
    rng = random.Random(name)
    walked = 0
    for i, text in enumerate(_random_texts(ref, rng, 24, 60)):
        a, b, at = ref.initial, nat.initial, 0
        while at < len(text) and a >= 0:
            chunk = text[at : at + rng.randint(1, 9)]
            at += len(chunk)
            if i % 3 == 1:  # some rows built on the C side first: the walk reads them
                nat.row(b)
            rows = nat.num_rows_built
            a, b = ref.walk(a, chunk), nat._core.walk(b, chunk)
            assert nat.num_rows_built == rows  # no row built by the walk
            walked += len(chunk)
            assert (a < 0) == (b < 0), (text, at)
            if a >= 0:
                assert nat.lexemes(b) == ref.lexemes(a), (text, at)
                assert nat.is_accepting(b) == ref.is_accepting(a), (text, at)
        if i % 4 == 3 and at == len(text):
            assert a == b == -1  # the dead byte appended
    assert walked > 300
    # one state's rows then built by the C rows: the walk's configurations are theirs
    assert _same_automaton(ref, nat, 200) >= min(200, ref.num_states)
    states = nat.num_states
    assert nat._core.walk(nat.initial, b"x" * nat._slot.shape[0]) is None
    assert nat.num_states == states
    with pytest.raises(IndexError):
        nat._core.walk(10**6, b"x")


def test_cold_steps_walk_tokens_without_rows() -> None:
    """A native grammar's cold plan steps tokens with ``Core.walk``: forcing the recursive
    schema's instance builds rows only for masks, none for advances, and the masks along
    it equal the tokens' bytes stepped through an automaton compiled apart (brute force)."""
    import numpy as np

    from structgen.fsm.index.vocabulary import Vocabulary
    from tests.fsm.grammar.test_node_free_masks import (
        RECURSIVE,
        _bits,
        _compile,
        _reference_bits,
        _small_vocab,
        _token_data,
    )

    vocab = _small_vocab()
    ref_vocab = Vocabulary(vocab.token_bytes, vocab.eos_token_ids, vocab.special_token_ids)
    ref = _compile(RECURSIVE["schema"], ref_vocab).dfa
    g = _compile(RECURSIVE["schema"], vocab)
    plan = g.token_index.cold_plan
    assert plan is not None and plan[-1] == g.dfa._core.walk
    data, done = json.dumps(RECURSIVE["instance"], separators=(",", ":")).encode(), b""
    token_data = _token_data(vocab)
    m, ref_state, advances = g.matcher(), ref.initial, 0
    while done != data:
        bits = _bits(m, vocab)
        assert np.array_equal(bits, _reference_bits(ref, ref_state, vocab, token_data)), done
        rest = data[len(done) :]
        tid = max(
            (t for t in np.flatnonzero(bits).tolist() if rest.startswith(vocab.token_bytes[t])),
            key=lambda t: len(vocab.token_bytes[t]),
        )
        rows = g.dfa.num_rows_built
        assert m.advance(tid)
        assert g.dfa.num_rows_built == rows, done
        advances += len(vocab.token_bytes[tid]) > 1
        done += vocab.token_bytes[tid]
        ref_state = ref.walk(ref_state, vocab.token_bytes[tid])
    assert advances > 10
