"""Membership equals the reference on random sentences and their mutations.

Lark grammars: the reference is the ``lark`` package (``parser="earley"``,
``lexer="dynamic_complete"``: every split of the text into terminals is tried, which is
structgen's lexeme semantics; ``test_lark_dynamic_difference`` pins where Lark's greedy
``dynamic`` lexer differs). Valid sentences come from random derivations of the grammar's
IR (``_derive``), invalid candidates from mutations of them. The JSON grammar in GBNF
and EBNF is checked against ``json.loads`` (constants such as ``NaN`` refused).
"""

from __future__ import annotations

import functools
import json

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.fsm.grammar import compile_grammar, parse_grammar
from tests.fsm.grammar._derive import derive, mutate
from tests.fsm.grammar._grammars import JSON_EBNF, JSON_GBNF, LARK_GRAMMARS

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@functools.cache
def _lark(name: str) -> lark.Lark:
    return lark.Lark(LARK_GRAMMARS[name], parser="earley", lexer="dynamic_complete")


def _lark_accepts(name: str, text: str) -> bool:
    try:
        _lark(name).parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(LARK_GRAMMARS))
@SETTINGS
@given(data=st.data())
def test_lark_grammar_matches_lark(name, data):
    text = LARK_GRAMMARS[name]
    grammar = compile_grammar(text, syntax="lark")
    sentence = derive(parse_grammar(text, "lark"), data)
    assert _lark_accepts(name, sentence), sentence  # the derivation is a sentence
    assert grammar.matches(sentence), sentence
    mutated = mutate(sentence, data)
    assert grammar.matches(mutated) == _lark_accepts(name, mutated), mutated


def _json_accepts(text: str) -> bool:
    def refuse(constant):
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize(("text", "syntax"), [(JSON_GBNF, "gbnf"), (JSON_EBNF, "ebnf")])
@SETTINGS
@given(value=JSON_VALUES, indent=st.sampled_from([None, 1]), data=st.data())
def test_json_bnf_matches_json_loads(text, syntax, value, indent, data):
    grammar = compile_grammar(text, syntax=syntax)
    doc = json.dumps(value, indent=indent, ensure_ascii=data.draw(st.booleans()))
    assert grammar.matches(doc), doc
    mutated = mutate(doc, data)
    assert grammar.matches(mutated) == _json_accepts(mutated), mutated


@pytest.mark.parametrize(
    ("doc", "ok"),
    [
        ("{}", True),
        (' [1, -0.5e+3, "a\\u00e9", {"k": [true, null]}] ', True),
        ("[01]", False),
        ('{"a" 1}', False),
        ('"\\x"', False),
        ("[1,]", False),
        ("-", False),
        (
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
            True,
        ),
    ],
)
def test_json_gbnf_hand_checked(doc, ok):
    assert compile_grammar(JSON_GBNF).matches(doc) is ok
    assert _json_accepts(doc) is ok


def test_lark_dynamic_difference():
    """A terminal that could end early: Lark's ``dynamic`` lexer matches ``/a+/`` greedily
    and rejects ``aa`` for ``A "a"``; structgen (and ``dynamic_complete``) accept it."""
    text = 'start: A "a"\nA: /a+/\n'
    assert compile_grammar(text).matches("aa")
    greedy = lark.Lark(text, parser="earley", lexer="dynamic")
    with pytest.raises(lark.exceptions.LarkError):
        greedy.parse("aa")
    lark.Lark(text, parser="earley", lexer="dynamic_complete").parse("aa")


def test_regular_grammar_takes_the_regex_path():
    from structgen.fsm.compiler import CompiledGrammar

    g = compile_grammar('root ::= "a" [b-d]{2,3} ("," [0-9]+)*')
    assert isinstance(g, CompiledGrammar)
    assert g.matches("abc,1,23") and not g.matches("ab,1")
    lark_regular = compile_grammar('start: WORD ("," WORD)*\n%import common.WORD\n%ignore " "\n')
    assert isinstance(lark_regular, CompiledGrammar)
    assert lark_regular.matches(" ab , cd ") and not lark_regular.matches("a b")


def test_repeated_statements_reuse_chart_nodes():
    """A node is its incomplete items: the 50th statement parses in the nodes of the 2nd."""
    g = compile_grammar(LARK_GRAMMARS["statements"])
    state = g.dfa.walk(g.dfa.initial, b"x = 1; if (y < 2) { z = 3; } else { w = 4; }\n" * 2)
    nodes = g.dfa.charts.num_nodes
    g.dfa.walk(state, b"x = 1; if (y < 2) { z = 3; } else { w = 4; }\n" * 48)
    assert g.dfa.charts.num_nodes == nodes


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("- " * 300 + "1", True),
        ("-" * 300, False),
        ("!" + "~" * 40 + "-" * 40 + "1", True),
        ("+" * 30 + "1" + "!" * 29, True),
        ("+" * 30 + "1" + "!" * 30, False),
        ("+" * 30 + "(1)" + "!" * 12, True),
        ("[" + ", ".join(["-1"] * 40) + "]", True),
        ("[" + ", ".join(["-1"] * 40) + ",]", False),
        ("[1, [--2, !~3], (-[4])]", True),
        ("!-~1", False),
    ],
)
def test_right_recursive_chains_match_lark(text, ok):
    """Leo's merged chains (``EarleyCharts._item``) accept what lark accepts."""
    assert _lark_accepts("right_recursive", text) == ok
    assert compile_grammar(LARK_GRAMMARS["right_recursive"]).matches(text) == ok


def test_right_recursion_stays_in_a_few_chart_nodes():
    """Runs of prefix operators and right-recursive lists grow no chart nodes past their
    first levels (a chain's items start where its top does): 4 and 300 levels build the
    same nodes."""

    def nodes(k: int) -> int:
        g = compile_grammar(LARK_GRAMMARS["right_recursive"])
        text = b"[" + b"- " * k + b"1, " + b"-1, " * k + b"!" + b"~" * k + b"-" * k + b"1]"
        assert g.dfa.is_accepting(g.dfa.walk(g.dfa.initial, text))
        return g.dfa.charts.num_nodes

    assert nodes(300) == nodes(4)


TOOL_CALL = r"""
start: call+
call: "<call>" ("get_weather" | "search") ":" args "</call>"
args: %json {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["city"], "additionalProperties": false}
"""  # noqa: E501


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('<call>search:{"city":"Paris"}</call>', True),
        ('<call>get_weather:{"city":"Oslo","days":3}</call><call>search:{"city":"x"}</call>', True),
        ('<call>search:{"city":"Paris","days":0}</call>', False),  # minimum 1
        ('<call>search:{"days":2}</call>', False),  # required
        ('<call>search:{"city":"P","x":1}</call>', False),  # additionalProperties
        ('<call>find:{"city":"P"}</call>', False),
    ],
)
def test_lark_json_embeds_a_schema(text, ok):
    """``%json``: the outer grammar as lark reads it with a placeholder terminal, the
    embedded value as ``jsonschema`` validates it."""
    import jsonschema

    assert compile_grammar(TOOL_CALL).matches(text) is ok
    outer = TOOL_CALL.split("args:")[0] + "args: /\\{[^<]*\\}/\n"
    try:
        tree_ok = (
            lark.Lark(outer, parser="earley", lexer="dynamic_complete").parse(text) is not None
        )
    except lark.exceptions.LarkError:
        tree_ok = False
    schema = json.loads(TOOL_CALL.split("%json")[1].strip())
    values = [json.loads(a.split(":", 1)[1]) for a in text.split("</call>")[:-1]] if tree_ok else []
    valid = tree_ok and all(jsonschema.Draft202012Validator(schema).is_valid(v) for v in values)
    assert valid is ok


LINE_START_BARS = [
    'start: "a" (\n  | "b")\n',  # an empty first alternative inside brackets
    'start: ("a"\n  | "b")\n',
    'start: ["a"\n  | "b"] "c"\n',
    'start: "x"\n  | ("a"\n     | "b")\n',
    'start: item+\nitem: ("a"\n      | "b" "c"\n      | "d")\n',
]


@pytest.mark.parametrize("grammar", LINE_START_BARS)
def test_a_bar_starting_a_line_inside_brackets_matches_lark(grammar):
    """Lark reads a ``|`` at the start of a line as an alternative anywhere, brackets
    included (its grammar's ``_VBAR: _NL? "|"``); membership equals lark's on every short
    text over the grammar's letters."""
    import itertools

    ref = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
    ours = compile_grammar(grammar, syntax="lark")
    for n in range(4):
        for letters in itertools.product("abcdx", repeat=n):
            text = "".join(letters)
            try:
                ref.parse(text)
                want = True
            except lark.exceptions.LarkError:
                want = False
            assert ours.matches(text) == want, (grammar, text)
