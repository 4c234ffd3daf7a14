"""Constraint specs (structgen/fsm/spec.py) and the grammar interfaces (structgen/fsm/base.py)."""

from __future__ import annotations

import pickle

import pytest
import torch
from pydantic import BaseModel

from structgen.errors import InvalidSchemaError, RequestError, UnsupportedRegexError
from structgen.fsm import (
    BaseCompiledGrammar,
    BaseMatcher,
    Vocabulary,
    clear_cache,
    compile_choice,
    compile_json_schema,
    compile_regex,
)
from structgen.fsm.spec import (
    Choice,
    Concatenation,
    JsonSchema,
    Regex,
    schema_for,
    spec_of,
    to_constraint,
)

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["v", "kids"],
        }
    },
    "$ref": "#/$defs/node",
}
DEEP = '{"v":1,"kids":[' * 6 + '{"v":2,"kids":[]}' + "]}" * 6


class Pet(BaseModel):
    name: str
    age: int


def _vocab() -> Vocabulary:
    pieces = [b"a", b"b", b"ab", b"{", b"}", b'"', b"1", b"<eos>"]
    return Vocabulary(pieces, eos_token_ids=[7])


def test_a_grammar_carries_its_spec_and_compiles_again_from_it():
    cases = [
        (compile_regex("[a-z]+", trigger="go:"), ["go:abc", "x go:a"], ["abc", "go:"]),
        (compile_choice(["yes", "no"]), ["yes", "no"], ["yesno", ""]),
        (compile_json_schema(TREE, trigger="</think>"), ["t</think>" + DEEP], [DEEP]),
        (compile_json_schema(Pet), ['{"name":"x","age":3}'], ['{"age":3}']),
    ]
    for grammar, good, bad in cases:
        spec = pickle.loads(pickle.dumps(spec_of(grammar)))
        clear_cache()  # the copy is compiled afresh, not found in the cache
        again = spec.compile(None)
        assert again is not grammar and type(again.spec) is type(grammar.spec)
        assert all(again.matches(t) for t in good) and not any(again.matches(t) for t in bad)
    assert isinstance(compile_json_schema(Pet).spec.schema, dict)  # no model class to pickle


def test_concatenation_joins_the_parts_and_renumbers_their_definitions():
    tree = JsonSchema(TREE)
    assert tree.lower().definitions  # recursion is shared
    both = Concatenation([tree, Choice([" and "]), tree])
    low = both.lower()
    assert len(low.definitions) == 2 * len(tree.lower().definitions)
    grammar = both.compile(None)
    assert grammar.matches(DEEP + " and " + '{"v":3,"kids":[]}')
    assert not grammar.matches(DEEP + " and ") and not grammar.matches(DEEP)
    healed = Concatenation([Choice([' "']), Regex("[a-z]+")]).compile(None)
    assert healed.matches(' "abc') and not healed.matches("abc")


@pytest.mark.parametrize("pattern", ["^b+$", r"\Ab+\Z", "(?i)b+", "(?i)^b+$", "(?is)^b+|c$"])
def test_a_regex_part_keeps_its_anchors_and_flags_to_itself(pattern):
    # a user's regex read as a whole output (fullmatch) means the same as one part of a
    # longer one: end anchors no-ops, leading global flags scoped to the part
    import re
    from itertools import product

    grammar = Concatenation([Choice(["a"]), Regex(pattern)]).compile(None)
    for n in range(4):
        for chars in product("abBc", repeat=n):
            rest = "".join(chars)
            want = re.fullmatch(pattern, rest) is not None
            assert grammar.matches("a" + rest) == want, rest
    with pytest.raises(UnsupportedRegexError, match=r"'\^' at position 1 of 'b\^c'"):
        Concatenation([Choice(["a"]), Regex("b^c")]).lower()  # the user's own text named


def test_concatenation_refuses_what_it_cannot_join():
    with pytest.raises(RequestError, match="trigger"):
        Concatenation([Regex("a", trigger="x")])
    with pytest.raises(RequestError, match="got int"):
        Concatenation([Regex("a"), 3])
    with pytest.raises(RequestError, match="at least one"):
        Concatenation([])
    raw = Regex("\U000f0000")  # a raw code point that would read as the tree's definition
    with pytest.raises(UnsupportedRegexError, match="escape"):
        Concatenation([JsonSchema(TREE), raw]).lower()
    assert Concatenation([raw, Regex("b")]).compile(None).matches("\U000f0000b")


def test_to_constraint_and_spec_of():
    grammar = compile_regex("a+")
    assert to_constraint(grammar) is grammar and spec_of(grammar) == Regex("a+")
    assert to_constraint(None) is None and spec_of(None) is None
    assert isinstance(to_constraint({"type": "integer"}), JsonSchema)
    assert to_constraint(Pet).schema is Pet
    with pytest.raises(RequestError, match="ambiguous"):
        to_constraint("a+")
    with pytest.raises(RequestError, match="unsupported constraint type int"):
        spec_of(3)


def test_schema_for():
    assert schema_for('{"type": "integer"}') == {"type": "integer"}
    assert schema_for(True) is True and schema_for(Pet)["properties"]["age"]["type"] == "integer"
    with pytest.raises(InvalidSchemaError, match="not JSON"):
        schema_for("{")
    with pytest.raises(InvalidSchemaError, match="got a value of type int"):
        schema_for(42)
    with pytest.raises(InvalidSchemaError, match=r"got the class int \(not a pydantic model\)"):
        schema_for(int)


def test_the_regex_implementation_is_a_grammar_interface_and_fills_batches():
    vocab = _vocab()
    grammar = compile_regex("ab?", vocab)
    assert isinstance(grammar, BaseCompiledGrammar) and isinstance(grammar.matcher(), BaseMatcher)
    first, second = grammar.matcher(), grammar.matcher()
    assert second.advance(0)  # "a"
    one_by_one = torch.zeros((3, 1), dtype=torch.int32)
    first.fill_bitmask(one_by_one, 2)
    second.fill_bitmask(one_by_one, 0)
    batched = torch.zeros((3, 1), dtype=torch.int32)
    BaseMatcher.fill_bitmask_batch([first, second], batched, [2, 0])
    assert torch.equal(batched, one_by_one) and batched[1].item() == 0


def test_clear_cache_drops_every_grammar_cache():
    """fsm.clear_cache empties the regex, context-free, structural-tag and select caches."""
    from structgen.fsm import compile_grammar
    from structgen.fsm.grammar import compile as cfg_compile
    from structgen.fsm.grammar import union
    from structgen.fsm.tags import grammar as tag_grammar

    text = 'root ::= "a" root | "b"'
    first = compile_grammar(text, syntax="gbnf")
    assert compile_grammar(text, syntax="gbnf") is first  # cached
    cfg_compile._cache.put(("probe",), first)
    union._cache.put(("probe",), first)
    tag_grammar._cache.put(("probe",), first)
    clear_cache()
    assert not cfg_compile._cache and not union._cache and not tag_grammar._cache
    again = compile_grammar(text, syntax="gbnf")
    assert again is not first
    assert again.matches("aab") and not again.matches("aa")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"syntax": "yaml"}, "unknown grammar syntax 'yaml'"),
        ({"start": 3}, "Grammar's start must be a string or None, got int"),
        ({"trigger": b"<tool>"}, "Grammar's trigger must be a string or None, got bytes"),
    ],
)
def test_a_grammar_spec_refuses_bad_fields_when_made_not_when_compiled(kwargs, message):
    from structgen import Grammar
    from structgen.errors import InvalidGrammarError

    with pytest.raises(InvalidGrammarError, match=message):
        Grammar('start: "a"', **kwargs)
    for syntax in ("auto", "lark", "gbnf", "ebnf"):  # every syntax compile_grammar reads
        assert Grammar('root ::= "a"', syntax=syntax).syntax == syntax


def test_compile_spec_takes_a_grammar_under_its_budgets_and_refuses_a_non_spec():
    from structgen import Grammar
    from structgen.errors import ConfigError, GrammarTooComplexError
    from structgen.fsm import compile_spec

    lark = 'start: item ("," item)*\nitem: "[" start "]" | "x"'  # not regular: a CFG
    grammar = compile_spec(Grammar(lark))
    for text in ("x", "x,[x,x]", "[[x]]", "x,", "[x", "y"):
        assert grammar.matches(text) == Grammar(lark).compile(None).matches(text)
    assert grammar.matches("x,[x,[x]]") and not grammar.matches("[x")
    with pytest.raises(GrammarTooComplexError):
        compile_spec(Grammar('start: "a" "b" "c" "d" "e" "f" "g" "h"'), max_states=2)
    with pytest.raises(ConfigError, match="got int"):
        compile_spec(3)
