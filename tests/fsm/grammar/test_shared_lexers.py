"""The lexers built on one arena with shared definitions equal the per-terminal lexers.

``compile._lexers`` lowers each shared definition of a grammar once for all terminals
(``parse.SharedDefinitions``); the reference is the per-terminal compile
(``regex_to_dfa`` of each terminal's own bundled pattern, what ``_lexer`` does without
shared definitions). Each pair of lexers is compared exactly: a breadth-first walk of the
product automaton checks that both accept at the same places and die on the same bytes.
Then whole grammars compiled both ways agree with lark on sentences and mutations.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import deque
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.fsm import compile_json_schema
from structgen.fsm.deadline import Deadline
from structgen.fsm.grammar import compile as grammar_compile
from structgen.fsm.grammar import parse_grammar
from structgen.fsm.grammar.compile import compile_grammar_def
from structgen.fsm.grammar.lower import lower_grammar
from structgen.fsm.grammar.schema_rules import rules_grammar
from tests.fsm.grammar._derive import derive, mutate
from tests.fsm.grammar._grammars import JSON_GBNF, LARK_GRAMMARS

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "grammars"
MAX_PAIRS = 20_000


def _same_language(a, b) -> bool:
    """Exact equality of two ``ByteDFA`` languages (product walk; None = empty)."""
    if a is None or b is None:
        return a is b
    seen = {(a.initial, b.initial)}
    todo = deque(seen)
    while todo:
        s, t = todo.popleft()
        if a.is_accepting(s) != b.is_accepting(t):
            return False
        ra, rb = a.row(s), b.row(t)
        if ((ra < 0) != (rb < 0)).any():
            return False
        for byte in range(256):
            if ra[byte] >= 0:
                pair = (int(ra[byte]), int(rb[byte]))
                if pair not in seen:
                    seen.add(pair)
                    todo.append(pair)
        assert len(seen) < MAX_PAIRS, "lexer too large for the exact check"
    return True


def _grammars():
    out = [(f"lark:{name}", text, "lark") for name, text in sorted(LARK_GRAMMARS.items())]
    out.append(("gbnf:json", JSON_GBNF, "gbnf"))
    for path in sorted(BENCH.iterdir()):
        syntax = "lark" if path.suffix == ".lark" else "gbnf"
        out.append((f"bench:{path.name}", path.read_text(encoding="utf-8"), syntax))
    return out


def _per_terminal(cfg):
    """The same grammar without recorded sources: each terminal compiled on its own."""
    return dataclasses.replace(cfg, sources=[])


@pytest.mark.parametrize("name,text,syntax", _grammars(), ids=[g[0] for g in _grammars()])
def test_shared_lexers_equal_per_terminal_lexers(name, text, syntax) -> None:
    cfg = lower_grammar(parse_grammar(text, syntax))
    if not hasattr(cfg, "sources"):
        pytest.skip("a regular grammar: one regex, no lexers")
    assert len(cfg.sources) == len(cfg.terminals)
    deadline = Deadline(60)
    shared = grammar_compile._lexers(cfg, 100_000, deadline)
    alone = grammar_compile._lexers(_per_terminal(cfg), 100_000, deadline)
    arenas = {id(d.arena) for d in shared if d is not None}
    assert len(arenas) <= 1  # one arena for every terminal
    for t, (x, y) in enumerate(zip(shared, alone)):
        assert _same_language(x, y), (name, t, cfg.terminals[t][0])


def _recursive_schema_gdef():
    from structgen.fsm.json_schema.convert import JsonSchemaConverter

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+$"},
            "size": {"type": "integer", "minimum": 0},
            "kids": {"type": "array", "items": {"$ref": "#"}},
            "meta": {"anyOf": [{"type": "null"}, {"$ref": "#"}]},
        },
        "required": ["name"],
    }
    conv = JsonSchemaConverter(
        schema,
        whitespace="compact",
        strict=True,
        allow_extra_properties=False,
        max_recursion_depth=10,
    )
    conv.rules = True
    pattern = conv.convert_root()
    return schema, rules_grammar(pattern, conv.sharing.definitions, conv.sharing.rules)


def test_recursive_schema_lexers_equal_per_terminal_lexers() -> None:
    """A recursive JSON Schema's terminals bundle large shared definitions (the case the
    sharing is for): every lexer equals its per-terminal compile, and the grammar matches
    as the per-terminal grammar and ``jsonschema`` do."""
    import jsonschema

    schema, gdef = _recursive_schema_gdef()
    cfg = lower_grammar(gdef)
    deadline = Deadline(60)
    shared = grammar_compile._lexers(cfg, 100_000, deadline)
    alone = grammar_compile._lexers(_per_terminal(cfg), 100_000, deadline)
    for t, (x, y) in enumerate(zip(shared, alone)):
        assert _same_language(x, y), t
    g = compile_json_schema(schema)
    texts = [
        '{"name":"a"}',
        '{"name":"a","size":3,"kids":[{"name":"b","kids":[]}]}',
        '{"name":"a","meta":{"name":"b","meta":null}}',
        '{"name":"A"}',
        '{"name":"a","size":-1}',
        '{"name":"a","kids":[{"size":1}]}',
        '{"size":1}',
    ]
    for text in texts:
        want = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        assert g.matches(text) == want, text


@functools.cache
def _both_ways(name: str):
    """(lark reference, [grammar with shared lexers, grammar with per-terminal lexers])."""
    text = LARK_GRAMMARS[name]
    gdef = parse_grammar(text, "lark")
    deadline = Deadline(60)
    both = [compile_grammar_def(gdef, None, None, deadline=deadline)]
    real_lower = grammar_compile.lower_grammar
    try:  # the per-terminal path: the same grammar without recorded sources
        grammar_compile.lower_grammar = lambda g, *rest: _per_terminal(real_lower(g, *rest))
        both.append(compile_grammar_def(gdef, None, None, deadline=deadline))
    finally:
        grammar_compile.lower_grammar = real_lower
    return gdef, lark.Lark(text, parser="earley", lexer="dynamic_complete"), both


@pytest.mark.parametrize("name", sorted(LARK_GRAMMARS))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_grammar_compiled_both_ways_matches_as_lark(name, data) -> None:
    gdef, ref, both = _both_ways(name)
    s = derive(gdef, data)
    for candidate in (s, mutate(s, data)):
        try:
            ref.parse(candidate)
            want = True
        except lark.exceptions.LarkError:
            want = False
        assert [g.matches(candidate) for g in both] == [want, want], candidate


@pytest.mark.parametrize("name,text,syntax", _grammars()[:8], ids=[g[0] for g in _grammars()[:8]])
def test_batched_lexers_equal_one_by_one(name, text, syntax) -> None:
    """``SharedLexers.lexers`` (one lock hold, ``ByteDFA.states_of_terms``) gives every
    terminal the start state and the automaton the states, in order, that one
    ``SharedLexers`` call per terminal gives (the reference: the path ``_lexer`` takes);
    a root repeated keeps its state; ``EMPTY`` raises as ``state_of_term`` does."""
    from structgen.fsm.grammar.lexers import SharedLexers
    from structgen.fsm.regex.parse import SharedDefinitions
    from structgen.fsm.regex.terms import EMPTY, TermArena

    cfg = lower_grammar(parse_grammar(text, syntax))
    if not hasattr(cfg, "sources"):
        pytest.skip("a regular grammar: one regex, no lexers")
    shared = SharedDefinitions(TermArena(), cfg.definitions, Deadline(60), cfg.reusable, cfg.seeds)
    roots = [shared.lower(*src) for src in cfg.sources]
    roots = [r for r in roots if r is not None and r != EMPTY]
    roots += roots[:2]  # repeated roots
    one, batched = SharedLexers(100_000, 60.0), SharedLexers(100_000, 60.0)
    alone = [one(shared.arena, r) for r in roots]
    together = batched.lexers(shared.arena, roots)
    assert [x.initial for x in together] == [x.initial for x in alone]
    assert batched.dfa._terms == one.dfa._terms
    assert (batched.dfa.accepting == one.dfa.accepting).all()
    assert (batched.dfa.num_out == one.dfa.num_out).all()
    assert all(x.dfa is batched.dfa and x.arena is shared.arena for x in together)
    with pytest.raises(ValueError, match="EMPTY"):
        batched.lexers(shared.arena, [roots[0], EMPTY])
