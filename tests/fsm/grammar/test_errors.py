"""Bad grammars get clear errors naming what and where (line:column), never a hang."""

from __future__ import annotations

import pytest

from structgen.errors import GrammarTooComplexError, InvalidGrammarError, UnsupportedGrammarError
from structgen.fsm.grammar import compile_grammar, detect_syntax


@pytest.mark.parametrize(
    ("text", "syntax", "error", "where"),
    [
        ('root ::= "a" | (', "gbnf", InvalidGrammarError, "1:17"),
        ('root ::= "a\n', "gbnf", InvalidGrammarError, "1:10"),
        ('root ::= "a"\nitem ::= [z-a]', "gbnf", InvalidGrammarError, "2:10"),
        ('root ::= x "a"', "gbnf", InvalidGrammarError, "1:10"),  # undefined rule
        ('root ::= "a"{3,1}', "gbnf", InvalidGrammarError, "1:13"),
        ('root ::= "a" (= "b")', "ebnf", UnsupportedGrammarError, "1:14"),
        ('root ::= "a"\nroot ::= "b"', "gbnf", InvalidGrammarError, "2:1"),  # llama.cpp: last wins
        ('root ::= "a" !<[7]', "gbnf", InvalidGrammarError, "1:14"),  # !<...>: any token but one
        ('root ::= "a"\n  ! <[7]>', "ebnf", InvalidGrammarError, "2:3"),
        ('start: "a" !<>', "lark", InvalidGrammarError, "1:13"),  # at the empty <>
        ('start: "a" ! "b"', "lark", InvalidGrammarError, "1:12"),
        ("root ::= !<x>", "gbnf", InvalidGrammarError, "1:10"),  # a name needs a vocabulary
        ('root ::= "a"\n  <[^7,3-1]>', "gbnf", InvalidGrammarError, "2:3"),  # empty range
        ("start: <[^]>", "lark", InvalidGrammarError, "1:8"),
        ('start: a\na: "x" )', "lark", InvalidGrammarError, "2:8"),
        ("start: b\n", "lark", InvalidGrammarError, "1:8"),  # undefined rule
        ('start: A\nA: "a" A\n', "lark", InvalidGrammarError, "2:1"),  # recursive terminal
        ("start: x\nx{t}: t\n", "lark", UnsupportedGrammarError, "2:1"),
        (
            'start: "a" _sep{b, ","}\n_sep{x, s}: x (s x)*\nb: "b"',
            "lark",
            UnsupportedGrammarError,
            "1:12",
        ),
        ("start: A\n%declare A\n", "lark", UnsupportedGrammarError, "2:1"),
        ("start: A\n%import other.A\n", "lark", UnsupportedGrammarError, "2:9"),
        ("start: /a/x\n", "lark", UnsupportedGrammarError, "1:8"),
    ],
)
def test_errors_name_line_and_column(text, syntax, error, where):
    with pytest.raises(error) as info:
        compile_grammar(text, syntax=syntax)
    assert where in str(info.value), str(info.value)


def test_auto_syntax():
    assert detect_syntax('root ::= "a"') == "gbnf"
    assert detect_syntax('start: "a"') == "lark"
    with pytest.raises(InvalidGrammarError, match="syntax="):
        detect_syntax('root ::= "a"\nstart: "b"\n')
    with pytest.raises(InvalidGrammarError, match="syntax="):
        compile_grammar("just text")
    with pytest.raises(InvalidGrammarError, match="unknown grammar syntax"):
        compile_grammar('root ::= "a"', syntax="peg")


def test_left_recursion_and_empty_language():
    g = compile_grammar('root ::= root "a" | "b"')  # left recursion: parsed, no hang
    assert g.matches("b" + "a" * 500) and not g.matches("ab")
    g = compile_grammar('root ::= root root | "x" | ""')  # ambiguous and nullable
    assert g.matches("") and g.matches("xxxx")
    with pytest.raises(InvalidGrammarError, match="derives no string"):
        compile_grammar('root ::= root "a"')


def test_budgets_are_explicit():
    text = 'root ::= "[" root* "]"'
    g = compile_grammar(text, max_configs=50)
    with pytest.raises(GrammarTooComplexError, match="50 states"):
        g.matches("[" * 200)
    with pytest.raises(GrammarTooComplexError, match="Earley items"):
        compile_grammar(text, max_items=30).matches("[" * 200)
