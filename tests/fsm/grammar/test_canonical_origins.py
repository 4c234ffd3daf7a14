"""Items begun at nodes with the same completion share one origin (``EarleyCharts._canonical``).

The first element of a left-recursive list ``x*`` begins at the root and the next ones at
the node after an element; completing ``x`` at either advances the same items, so the
second element parses in the first one's chart nodes instead of building its own. Checked:
the node counts (the second declaration of c.gbnf, the second element of a list build
nothing), and membership against ``lark`` and against the same charts with canonical
origins off, on texts of several elements and their one-character mutations.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

import lark
import pytest

from structgen.fsm.grammar import compile_grammar, earley
from structgen.fsm.grammar.compile import clear_cache
from structgen.fsm.grammar.earley import EarleyCharts
from tests.fsm.grammar._gbnf_lark import gbnf_to_lark

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gbnf"
C_GBNF = (FIXTURES / "c.gbnf").read_text()
DECLS = [
    "int f(int a){int b = a*2+f(a);while(b<3){b = b+1;}return b;}",
    "char g(){if(x==1){y = -x;}else{return (y);}}",
    "float h(float q){/* c */ z = g(q, 2);// d\n}",
]


@functools.cache
def _lark_c() -> lark.Lark:
    return lark.Lark(gbnf_to_lark(C_GBNF), parser="earley", lexer="dynamic_complete")


def _lark_accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def _identity(self, lhs: int, origin: int) -> int:
    return origin


def test_second_declaration_builds_no_chart_node() -> None:
    g = compile_grammar(C_GBNF, syntax="gbnf")
    state = g.dfa.walk(g.dfa.initial, DECLS[0].encode())
    nodes = g.dfa.charts.num_nodes
    state = g.dfa.walk(state, DECLS[0].replace("f", "k").encode() * 3)
    assert g.dfa.is_accepting(state)
    assert g.dfa.charts.num_nodes == nodes


STAR_LIST = r"""
start: stmt*
stmt: CNAME "=" expr ";"
expr: INT | "(" expr ")"
%import common (CNAME, INT, WS)
%ignore WS
"""


def test_second_list_element_builds_no_chart_node(monkeypatch) -> None:
    def nodes(text: bytes) -> int:
        g = compile_grammar(STAR_LIST, syntax="lark")
        assert g.dfa.is_accepting(g.dfa.walk(g.dfa.initial, text))
        return g.dfa.charts.num_nodes

    assert nodes(b"x = (1);") == nodes(b"x = (1);" + b" y = (22);" * 5)
    clear_cache()
    try:
        with monkeypatch.context() as patch:  # without the merge: the root's element differs
            patch.setattr(earley, "HAVE_C_EARLEY", False)  # the Python charts, patchable
            patch.setattr(EarleyCharts, "_canonical", _identity)
            assert nodes(b"x = (1);") < nodes(b"x = (1);" + b" y = (22);" * 5)
    finally:
        clear_cache()


def _mutations(text: str, rng: random.Random, n: int) -> list[str]:
    chars = "(){};=+-*/<>,ab1 \n"
    out = []
    for _ in range(n):
        i = rng.randrange(len(text) + 1)
        op = rng.randrange(3)
        if op == 0:
            out.append(text[:i] + rng.choice(chars) + text[i:])
        elif op == 1 and i < len(text):
            out.append(text[:i] + text[i + 1 :])
        elif i < len(text):
            out.append(text[:i] + rng.choice(chars) + text[i + 1 :])
    return out


@pytest.mark.parametrize("seed", range(3))
def test_c_declarations_match_lark_and_the_uncanonical_charts(seed, monkeypatch) -> None:
    """Sentences of 1-3 declarations and mutations: the merged charts accept what lark and
    the charts without the merge accept."""
    rng = random.Random(seed)
    texts = []
    for _ in range(6):
        text = "".join(rng.choice(DECLS) for _ in range(rng.randrange(1, 4)))
        texts += [text, *_mutations(text, rng, 8)]
    g = compile_grammar(C_GBNF, syntax="gbnf")
    got = [g.matches(t) for t in texts]
    clear_cache()  # the compile cache must not keep the charts built without the merge
    try:
        with monkeypatch.context() as patch:
            patch.setattr(earley, "HAVE_C_EARLEY", False)  # the Python charts, patchable
            patch.setattr(EarleyCharts, "_canonical", _identity)
            plain = compile_grammar(C_GBNF, syntax="gbnf")
            plain_got = [plain.matches(t) for t in texts]
    finally:
        clear_cache()
    for text, ok, plain_ok in zip(texts, got, plain_got, strict=True):
        assert ok == _lark_accepts(_lark_c(), text), text
        assert ok == plain_ok, text
    assert plain.dfa.charts.num_nodes > g.dfa.charts.num_nodes  # the merge did something
