"""llama.cpp's own grammars (``tests/fixtures/gbnf``, see its README) read as GBNF (#24).

Each file compiles, and membership equals the reference on random sentences and their
mutations: the reference is the ``lark`` package (``parser="earley",
lexer="dynamic_complete"``) reading the Lark text an independent GBNF reader
(``_gbnf_lark``) writes. Valid sentences are random derivations of structgen's parse of
the file (``_derive``), so the reference also checks that parse.
"""

from __future__ import annotations

import functools
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.fsm.grammar import compile_grammar, parse_grammar
from tests.fsm.grammar._derive import derive, mutate
from tests.fsm.grammar._gbnf_lark import gbnf_to_lark
from tests.fsm.grammar.test_masks import _walk_and_check

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.gbnf"))
SETTINGS = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _text(name: str) -> str:
    return (FIXTURES / f"{name}.gbnf").read_text(encoding="utf-8")


@functools.cache
def _compiled(name: str):
    return compile_grammar(_text(name), syntax="gbnf")


@functools.cache
def _lark(name: str) -> lark.Lark:
    return lark.Lark(gbnf_to_lark(_text(name)), parser="earley", lexer="dynamic_complete")


def _lark_accepts(name: str, text: str) -> bool:
    try:
        _lark(name).parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def test_fixtures_present():
    assert len(NAMES) == 8, NAMES


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(data=st.data())
def test_llama_cpp_grammar_matches_lark(name, data):
    grammar = _compiled(name)
    sentence = derive(parse_grammar(_text(name), "gbnf"), data)
    assert _lark_accepts(name, sentence), sentence  # the derivation is a sentence
    assert grammar.matches(sentence), sentence
    mutated = mutate(sentence, data)
    assert grammar.matches(mutated) == _lark_accepts(name, mutated), mutated


@pytest.mark.slow
@pytest.mark.parametrize("name", ["arithmetic", "c", "json"])  # the context-free ones
def test_llama_cpp_grammar_masks_smollm2_vocab(name, smollm2_vocab):
    """Masks of states along random walks equal each token's bytes walked through the
    grammar, over SmolLM2's vocabulary; EOS and completions checked by the reference."""
    _walk_and_check(
        _text(name),
        smollm2_vocab,
        walks=1,
        steps=5,
        checked=4,
        seed=5,
        syntax="gbnf",
        reference=gbnf_to_lark(_text(name)),
    )


HAND_PICKED = [  # characters the mutations do not draw, at the edges of the files' classes
    ("list", "- caf\u00e9 \U0001f600\n"),
    ("list", "- a\u2028b\n"),
    ("list", "- a\x85\n"),
    ("list", "- a\x0bb\n- c\n"),
    ("json", '{"a": "\x7f"}'),
    ("json", '{"a": "\x1f"}'),
    ("json", '{"a": "\\u00e9\\n"}'),
    ("json", '{"a": 1e5}'),
    ("json", '{"a": 10e5}'),
    ("json", '{"a": 1e05}'),
    ("json", '{"a":\n\t\t[]}'),
    ("json_arr", '[\n{"a": [1, 2]},\n"x"]'),
    ("json_arr", '[\n{"a": [1, 2]},\n"x"] '),
    ("japanese", "\u3042\u30a2\u3001\u4e00 \u9fff"),
    ("japanese", "\u3042\u3040"),
    ("english", "Hi! [x] \\ `y` ~z"),
    ("english", "caf\u00e9"),
    ("chess", "1. e4 e5\n2. exd5 Nxd5+\n"),
    ("chess", "1. O-O-O O-O#\n10. a8=Q Kh1\n"),
    ("chess", "1. e4 e5\n0. d4 d5\n"),
    ("c", "int f(){/* a * / b */// x\nreturn 1;}"),
    ("c", "int f(){/* a */ */return 1;}"),
    ("arithmetic", "a=\t\n(b)\n"),
]


@pytest.mark.parametrize("name, text", HAND_PICKED)
def test_llama_cpp_grammar_hand_picked(name, text):
    assert _compiled(name).matches(text) == _lark_accepts(name, text)


def test_newline_after_bar_continues_the_rule():
    """llama.cpp: a newline after ``|`` continues the rule (structgen reads every newline
    as whitespace, a superset of llama.cpp's line rules: the module docstring of bnf.py)."""
    grammar = compile_grammar('root ::= "a" |\n  "b"\nother ::= "c"', syntax="gbnf")
    assert grammar.matches("b") and not grammar.matches("c")
