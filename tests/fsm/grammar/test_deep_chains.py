"""Grammars whose rule references chain thousands of rules deep (#24).

The lowering, the analyses (productive and nullable nonterminals, regular rules, shortest
derivations) and the regex text of regular rules are iterative, so a chain of 10,000 rules
compiles within the default CPU budget and matches exactly. References:

* the language written out: the chains below derive ``"(" * k + "a" + ")" * k`` (or
  ``"x" * k + "y"``), checked on seeded valid strings and mutations of them;
* ``lark`` (Earley, dynamic lexer) on a 30-rule chain of the same shape (lark takes ~25 s
  to build a 1,000-rule chain, so the long chains use the written-out language);
* masks by brute force over a small vocabulary: a token is allowed exactly when the text
  so far plus its bytes is a prefix of a word of the language.
"""

from __future__ import annotations

import random
import re

import lark
import numpy as np
import pytest

from structgen.errors import InvalidGrammarError
from structgen.fsm import Vocabulary
from structgen.fsm.compiler import CompiledGrammar
from structgen.fsm.grammar import compile_grammar
from structgen.fsm.grammar.compile import CompiledCFG
from tests.fsm.grammar.test_masks import _mask_bits

_NESTED = re.compile(r"(\(*)a(\)*)")


def _nested_chain(n: int, syntax: str, bottom: str = '"a" | "(" r0 ")"') -> str:
    """r0 -> r1 -> ... -> rn, rn -> bottom: a chain of n unit rules."""
    if syntax == "lark":
        rules = "".join(f"r{i}: r{i + 1}\n" for i in range(n))
        return f"start: r0\n{rules}r{n}: {bottom}\n"
    rules = "".join(f"r{i} ::= r{i + 1}\n" for i in range(n))
    return f"root ::= r0\n{rules}r{n} ::= {bottom}\n"


def _in_nested(text: str) -> bool:
    m = _NESTED.fullmatch(text)
    return m is not None and len(m.group(1)) == len(m.group(2))


def _viable_nested(text: str) -> bool:
    """``text`` is a prefix of a word of ``_in_nested``'s language."""
    m = re.fullmatch(r"(\(*)(?:a(\)*))?", text)
    return m is not None and len(m.group(2) or "") <= len(m.group(1))


def _samples(rng: random.Random, alphabet: str, valid: list[str], num: int) -> list[str]:
    """``valid`` and ``num`` seeded mutations of them (delete, insert, replace, cut)."""
    out = list(valid)
    for _ in range(num):
        s = rng.choice(valid)
        i = rng.randrange(len(s) + 1)
        op = rng.randrange(4)
        if op == 0 and s:
            s = s[: min(i, len(s) - 1)] + s[min(i, len(s) - 1) + 1 :]
        elif op == 1:
            s = s[:i] + rng.choice(alphabet) + s[i:]
        elif op == 2 and i < len(s):
            s = s[:i] + rng.choice(alphabet) + s[i + 1 :]
        else:
            s = s[:i]
        out.append(s)
    return out


@pytest.mark.parametrize("syntax", ["gbnf", "lark"])
@pytest.mark.parametrize("depth", [1_000, 10_000])
def test_recursive_chain_compiles_and_matches_its_language(depth, syntax):
    g = compile_grammar(_nested_chain(depth, syntax), syntax=syntax)
    assert isinstance(g, CompiledCFG)
    rng = random.Random(depth)
    valid = ["(" * k + "a" + ")" * k for k in range(6)]
    for s in _samples(rng, "()a", valid, 60):
        assert g.matches(s) == _in_nested(s), s


@pytest.mark.parametrize("depth", [1_000, 10_000])
def test_regular_chain_is_one_regex(depth):
    """No rule recurses: the chain is written as regex text (one definition per rule) and
    compiled to one DFA; each rule may stop with "y" or go on with "x"."""
    rules = "".join(f'r{i} ::= "x" r{i + 1} | "y"\n' for i in range(depth))
    g = compile_grammar(f'root ::= r0\n{rules}r{depth} ::= "z"\n', syntax="gbnf")
    assert isinstance(g, CompiledGrammar)
    assert g.matches("y") and g.matches("x" * 7 + "y") and not g.matches("x" * 3)
    if depth <= 1_000:  # the lazy DFA builds a state per "x": the long walk once
        assert g.matches("x" * depth + "z") and not g.matches("x" * (depth - 1) + "z")
        assert not g.matches("x" * depth + "y")


def test_chain_matches_lark():
    text = _nested_chain(30, "lark", '"a" | "(" r0 ")" | r0 "b"')
    g = compile_grammar(text, syntax="lark")
    parser = lark.Lark(text, parser="earley", lexer="dynamic")

    def accepts(s: str) -> bool:
        try:
            parser.parse(s)
        except lark.exceptions.LarkError:
            return False
        return True

    rng = random.Random(5)
    valid = ["a", "ab", "(a)", "(ab)b", "((a)b)", "(((a)))bb"]
    for s in _samples(rng, "()ab", valid, 40):
        assert g.matches(s) == accepts(s), s


def test_deep_chain_nullable_and_unproductive():
    """The worklist analyses on a 10,000-rule chain: nullable through the whole chain, and
    a chain that only recurses derives nothing."""
    g = compile_grammar(_nested_chain(10_000, "gbnf", '"" | "(" r0 ")"'), syntax="gbnf")
    assert g.matches("") and g.matches("(())") and not g.matches("(()")
    with pytest.raises(InvalidGrammarError, match="derives no string"):
        compile_grammar(_nested_chain(10_000, "gbnf", '"(" r0 ")"'), syntax="gbnf")


def test_deep_terminal_chain_and_its_cycle():
    """Lark terminals referring to terminals 10,000 deep: one regex; a cycle at the bottom
    is refused naming the cycle's ends, not the whole chain."""
    chain = "".join(f"T{i}: T{i + 1}\n" for i in range(10_000))
    g = compile_grammar(f'start: T0\n{chain}T10000: "a"\n', syntax="lark")
    assert g.matches("a") and not g.matches("aa")
    with pytest.raises(InvalidGrammarError, match=r"T5000 at 5002:1 is recursive") as info:
        compile_grammar(f'start: T0\n{chain}T10000: "a" T5000\n', syntax="lark")
    assert "4992 more" in str(info.value) and len(str(info.value)) < 300


def test_shortest_completion_through_a_deep_chain():
    """The budget's completions (shortest derivations, shortest way up) on a 10,000-rule
    chain: after k open parentheses the shortest completion is "a" and k closing ones."""
    g = compile_grammar(_nested_chain(10_000, "gbnf"), syntax="gbnf")
    dfa = g.dfa
    for k in (0, 1, 4):
        assert dfa.shortest_completion(dfa.walk(dfa.initial, b"(" * k)) == b"a" + b")" * k
    assert dfa.shortest_completion(dfa.walk(dfa.initial, b"((a)")) == b")"


_TOKENS = [b"<eos>", b"(", b"((", b"(((", b")", b"))", b"a", b"a)", b"(a", b"(a)", b"x", b")("]


def test_masks_of_a_deep_chain_by_brute_force():
    vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    grammar = compile_grammar(_nested_chain(1_000, "gbnf"), vocab, syntax="gbnf")
    rng = random.Random(11)
    for _ in range(4):
        matcher, text = grammar.matcher(), ""
        for _ in range(10):
            allowed = _mask_bits(matcher, vocab.vocab_size)
            assert allowed[0] == _in_nested(text), text
            for tid in range(1, len(_TOKENS)):
                assert allowed[tid] == _viable_nested(text + _TOKENS[tid].decode()), (text, tid)
            live = [t for t in np.flatnonzero(allowed).tolist() if t]
            if not live:
                break
            tid = rng.choice(live)
            assert matcher.advance(tid)
            text += _TOKENS[tid].decode()
