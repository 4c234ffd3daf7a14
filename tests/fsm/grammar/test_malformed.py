"""Malformed grammar text in every dialect: the error class, the line:column and what is
wrong (table-driven); seeded random mutations of the fixtures' valid grammars raise only
structgen's errors; and what llama.cpp's own GBNF reader accepts, case by case."""

from __future__ import annotations

import pathlib
import random

import pytest

from structgen.errors import (
    InvalidGrammarError,
    StructgenError,
    UnsupportedGrammarError,
)
from structgen.fsm.grammar import compile_grammar

from ._grammars import JSON_EBNF, JSON_GBNF, LARK_GRAMMARS

FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures" / "gbnf"
E = InvalidGrammarError

# (text, syntax, error class, line:column in the message, key phrase)
MALFORMED = [
    # GBNF: strings and character classes end on their own line
    ("root ::= [a-z", "gbnf", E, "1:10", "unterminated character class"),
    ('root ::= "x" [abc', "gbnf", E, "1:14", "unterminated character class"),
    ('root ::= "x" [abc\nvalue-array ::= "y"]', "gbnf", E, "1:14", "its line ends"),
    ("root ::= [a-", "gbnf", E, "1:10", "unterminated character class"),
    ("root ::= [a-\\", "gbnf", E, "1:10", "unterminated character class"),
    ("root ::= [^", "gbnf", E, "1:10", "unterminated character class"),
    ('root ::= "x"\n  item ::= [z-a]', "gbnf", E, "2:12", "'z'-'a' is out of order"),
    ('root ::= "abc', "gbnf", E, "1:10", "unterminated string"),
    ('root ::= "abc\\', "gbnf", E, "1:10", "unterminated string"),
    ('root ::= "ab\nc"', "gbnf", E, "1:10", "unterminated string: its line ends"),
    ('root ::= "\\q"', "gbnf", E, "1:11", "unknown escape \\q"),
    ('root ::= "\\x4"', "gbnf", E, "1:11", "bad \\x escape"),
    ("root ::= 'a'", "gbnf", E, "1:10", "double quotes"),
    # GBNF: parentheses, '::=', names
    ('root ::= ("a" | "b"', "gbnf", E, "1:10", "unbalanced '(': the text ends at 1:20"),
    ('root ::= ("a"\nnext ::= "b"', "gbnf", E, "1:10", "unbalanced '(': the next rule begins"),
    ('root ::= "a")', "gbnf", E, "1:13", "unbalanced ')'"),
    ('root "a"', "gbnf", E, "1:6", "expected '::=' after the rule name 'root'"),
    ('root ::= "a"\nitem = "b"', "gbnf", E, "2:6", "defined with '::='"),
    ('::= "a"', "gbnf", E, "1:1", "expected a rule name"),
    ('root ::= "a" ::= "b"', "gbnf", E, "1:14", "'::=' without a rule name"),
    ('root ::= "a" @', "gbnf", E, "1:14", "unexpected '@'"),
    ('root ::= x "a"', "gbnf", E, "1:10", "undefined rule 'x'"),
    ('root ::= "a"\nroot ::= "b"', "gbnf", E, "2:1", "defined twice"),
    # GBNF: repetition
    ("root ::= *", "gbnf", E, "1:10", "'*' repeats nothing"),
    ('root ::= {2} "a"', "gbnf", E, "1:10", "'{' repeats nothing"),
    ('root ::= "a"{2', "gbnf", E, "1:13", "unterminated '{'"),
    ('root ::= "a"{x}', "gbnf", E, "1:13", "bad repetition count"),
    ('root ::= "a"{-1}', "gbnf", E, "1:13", "bad repetition count"),
    ('root ::= "a"{1 2}', "gbnf", E, "1:13", "bad repetition count"),
    ('root ::= "a"{1,2,3}', "gbnf", E, "1:13", "bad repetition count"),
    ('root ::= "a"{}', "gbnf", E, "1:13", "without a number"),
    ('root ::= "a"{,}', "gbnf", E, "1:13", "without a number"),
    ('root ::= "a"{3,1}', "gbnf", E, "1:13", "max < min"),
    ('root ::= "a"{99999999999}', "gbnf", E, "1:13", "too large"),
    ('root ::= "a"' + "*" * 201, "gbnf", E, "1:213", "repetition operators"),
    ("root ::= " + "(" * 201 + '"a"' + ")" * 201, "gbnf", E, "1:211", "nest deeper"),
    # EBNF (XGrammar): the same reader, plus empty alternatives refused
    ("root ::= 'a", "ebnf", E, "1:10", "unterminated string"),
    ('root ::= "a" /* x', "ebnf", E, "1:14", "unterminated /* comment"),
    ('root ::= "a" |', "ebnf", E, "1:14", "empty alternative after '|'"),
    ('root ::= | "a"', "ebnf", E, "1:10", "empty alternative"),
    ('root ::= "a" || "b"', "ebnf", E, "1:14", "empty alternative after '|'"),
    ('root ::=\nnext ::= "b"', "ebnf", E, "2:1", "empty alternative in the rule body"),
    ('root ::= ("a" | )', "ebnf", E, "1:15", "empty alternative after '|'"),
    ("root ::= [\n]", "ebnf", E, "1:10", "unterminated character class"),
    ('root ::= "a" (= "b")', "ebnf", UnsupportedGrammarError, "1:14", "lookahead"),
    # Lark
    ('start: "a', "lark", E, "1:8", "unterminated string"),
    ('start: "a\n"', "lark", E, "1:8", "unterminated string"),
    ("start: /abc", "lark", E, "1:8", "unterminated regex"),
    ('start: ("a" | "b"', "lark", E, "1:8", "unbalanced '(': the text ends at 1:18"),
    ('start: ["a"\n  | "b"', "lark", E, "1:8", "unbalanced '['"),
    ('start: ("a"]', "lark", E, "1:8", "unbalanced '(': ']' at 1:12"),
    ('start: "a")', "lark", E, "1:11", "unbalanced ')'"),
    ('start: "a"\nb: "b" ]', "lark", E, "2:8", "unbalanced ']'"),
    ('start: "a" (b\nb: "c"', "lark", E, "2:2", "the '(' opened at 1:12 is not closed"),
    ('start "a"', "lark", E, "1:7", "expected ':'"),
    ('start: "a"\n  "b"', "lark", E, "2:3", "'|' may start a continuation line"),
    ('start: "a" ~', "lark", E, "1:13", "expected a number (at the end of the text)"),
    ('start: "a" ~ 3..1', "lark", E, "1:12", "max < min"),
    ('start: "a" ~ 99999999999', "lark", E, "1:12", "too large"),
    ('start: "ab".."c"', "lark", E, "1:8", "two single characters"),
    ('start: "a" @', "lark", E, "1:12", "unexpected character '@'"),
    ('start: "\\x"', "lark", E, "1:8", "bad escape"),
    ("start: /[a-/", "lark", E, "1:8", "regex at 1:8 is not usable"),
    ('start: "a" B\nB: /(b/', "lark", E, "2:4", "regex at 2:4 is not usable"),
    ("start: A\nA: /a**/", "lark", E, "2:4", "multiple repeat"),
    ("start: b", "lark", E, "1:8", "undefined rule 'b'"),
    ("start: VAL", "lark", E, "1:8", "undefined terminal 'VAL'"),
    ('root ::= "a" VAL', "ebnf", E, "1:14", "undefined rule 'VAL'"),
    ('start: "a"\n%ignore', "lark", E, "2:1", "%ignore needs a terminal"),
    ('start: "a"\n%ignore WS', "lark", E, "2:9", "undefined terminal 'WS'"),
    ('start: "a"\n%ignore ws\nws: " "', "lark", E, "2:9", "ws is a rule"),
    ('start: "a"\n%foo', "lark", E, "2:1", "unknown directive %foo"),
    ("start: %json {", "lark", E, "1:8", "%json needs a JSON value"),
    ('start: "a"\n%import common.FOO', "lark", UnsupportedGrammarError, "2:9", "FOO"),
    ('start: "a"\nstart: "b"', "lark", E, "2:1", "defined twice"),
    ("start: " + "(" * 201 + '"a"' + ")" * 201, "lark", E, "1:208", "nest deeper"),
]


@pytest.mark.parametrize(("text", "syntax", "error", "where", "phrase"), MALFORMED)
def test_malformed_grammar_names_what_and_where(text, syntax, error, where, phrase):
    with pytest.raises(error) as info:
        compile_grammar(text, syntax=syntax)
    message = str(info.value)
    assert type(info.value) is error, message
    assert f"{where}:" in message or f"at {where}" in message, message
    assert phrase in message, message


@pytest.mark.parametrize(
    ("text", "syntax", "inside", "outside"),
    [
        ('root ::= "a" |', "gbnf", ["a", ""], ["b"]),  # llama.cpp: an empty alternative
        ('root ::= "a" ()', "ebnf", ["a"], [""]),  # XGrammar: an empty group
        ('root ::= [a-] "x"', "gbnf", ["ax", "-x"], ["bx"]),  # '-' before ']' is a member
        ('root ::= "a"{,2}', "gbnf", ["", "aa"], ["aaa"]),
        ('root ::= "a"{ 1 , 2 }', "gbnf", ["a", "aa"], [""]),
        ('start: "a" |', "lark", ["a", ""], ["b"]),  # lark reads an empty alternative
    ],
)
def test_edge_forms_that_are_well_formed(text, syntax, inside, outside):
    g = compile_grammar(text, syntax=syntax)
    assert all(g.matches(s) for s in inside)
    assert not any(g.matches(s) for s in outside)


def test_a_deep_chain_of_rules_is_no_error():
    """Rule references have no depth limit (the lowering is iterative; longer chains in
    test_deep_chains.py): only groups nested in one rule's text do (the cases above)."""
    chain = "".join(f'a{i}: "(" a{i + 1} ")"\n' for i in range(400))
    g = compile_grammar("start: a0\n" + chain + 'a400: "x"', syntax="lark")
    assert g.matches("(" * 400 + "x" + ")" * 400)
    assert not g.matches("(" * 399 + "x" + ")" * 399)


def _valid_grammars() -> list[tuple[str, str]]:
    texts = [(p.read_text(), "gbnf") for p in sorted(FIXTURES.glob("*.gbnf"))]
    texts += [(t, "lark") for t in LARK_GRAMMARS.values()]
    return texts + [(JSON_GBNF, "gbnf"), (JSON_EBNF, "ebnf")]


_SYNTAX_CHARS = "\"'[]()|*+?{},:=\\^-/.%~<>!#\n 0a"


def _mutate(rng: random.Random, text: str) -> str:
    """One to three edits: delete, insert or replace a character, cut the text, repeat a
    slice."""
    for _ in range(rng.randint(1, 3)):
        if not text:
            break
        i, op = rng.randrange(len(text)), rng.randrange(5)
        if op == 0:
            text = text[:i] + text[i + 1 :]
        elif op == 1:
            text = text[:i] + rng.choice(_SYNTAX_CHARS) + text[i:]
        elif op == 2:
            text = text[:i]
        elif op == 3:
            j = min(len(text), i + rng.randint(1, 8))
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + rng.choice(_SYNTAX_CHARS) + text[i + 1 :]
    return text


def test_mutations_of_valid_grammars_raise_only_structgen_errors():
    rng = random.Random(24)
    grammars = _valid_grammars()
    num_failed = num_compiled = 0
    for k in range(1500):
        text, syntax = grammars[k % len(grammars)]
        mutant = _mutate(rng, text)
        try:
            g = compile_grammar(mutant, syntax=syntax, max_seconds=5)
            g.matches("1+2")
            g.matches('{"a": [1, 2]}')
            num_compiled += 1
        except StructgenError:
            num_failed += 1
        # anything else (IndexError, RecursionError, KeyError, ...) fails the test here
    assert num_failed > 300 and num_compiled > 100, (num_failed, num_compiled)


# llama.cpp's reader (llama-cpp-python 0.3.36): (text, structgen accepts, llama.cpp accepts);
# where the two differ, the comment says why (bnf.py's docstring lists the differences)
LLAMA_CASES = [
    ('root ::= "a"', True, True),
    ('root ::= "a" |', True, True),
    ("root ::= ", True, True),
    ('root ::= ()  "a"', True, True),
    ('root ::= [a-] "x"', True, True),
    ('root ::= "a"{2,3} [b]{0,}', True, True),
    ('root ::= item\nitem ::= [a-z]+ ("," item)?', True, True),
    ("root ::= [a-z", False, False),
    ('root ::= "x" [abc', False, False),
    ('root ::= "abc', False, False),
    ('root ::= ("a"', False, False),
    ('root "a"', False, False),
    ('root ::= "a"{2', False, False),
    ('root ::= "a"{-1}', False, False),
    ('root ::= "a"{}', False, False),
    ("root ::= x", False, False),
    ("root ::= 'a'", False, False),
    ('root ::= "\\q"', False, False),
    ('root ::= "a" ::= "b"', False, False),
    ('foo ::= "a"', False, False),  # no root
    ('root ::= "a" @', False, False),
    ('root ::= "a"{,2}', True, False),  # XGrammar's {,n}: llama.cpp needs the minimum
    ('root ::= "a"\nroot ::= "b"', False, True),  # llama.cpp keeps the last definition
    ("root ::= [z-a]", False, True),  # llama.cpp reads an empty range
    ('root ::= "a\nb"', False, True),  # llama.cpp reads strings across lines
    ('root ::= [abc\nvalue-array ::= "x"]', False, True),  # ... and classes
    ('root ::= root "a" | "b"', True, False),  # llama.cpp refuses left recursion
    ('root ::= "a"**', True, False),  # (a*)*: llama.cpp sees left recursion
    ('root ::= my_rule\nmy_rule ::= "a"', True, False),  # '_' in names
]


def _llama_accepts(text: str) -> bool:
    llama_cpp = pytest.importorskip("llama_cpp")
    # the grammar reader runs before the vocabulary is read; a NULL sampler: refused
    sampler = llama_cpp.llama_sampler_init_grammar(None, text.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


@pytest.mark.parametrize(("text", "ours", "theirs"), LLAMA_CASES)
def test_acceptance_against_llama_cpp(text, ours, theirs):
    assert _llama_accepts(text) is theirs
    try:
        compile_grammar(text, syntax="gbnf")
        accepted = True
    except InvalidGrammarError:
        accepted = False
    assert accepted is ours
