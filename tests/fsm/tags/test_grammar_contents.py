"""Structural tags whose regions hold context-free grammars (composed with the tag).

References: the plain-Python reading of structural tags (``_reference.tag_reference``)
with a hand-written recogniser of the content language (balanced parentheses).
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch

from structgen.errors import InvalidGrammarError, UnsupportedGrammarError
from structgen.fsm import Vocabulary
from structgen.fsm.grammar.compile import CompiledCFG
from structgen.fsm.spec import StructuralTag, TagStructure
from tests.fsm.tags._reference import tag_reference

NESTED = 'root ::= x\nx ::= "1" | "(" x ")"'


def _nested(s: str) -> bool:
    n = len(s) // 2
    return len(s) % 2 == 1 and s == "(" * n + "1" + ")" * n


@pytest.mark.parametrize("at_least_one,stop_after_first", [(0, 0), (1, 1)])
def test_language_matches_reference(at_least_one: int, stop_after_first: int) -> None:
    spec = StructuralTag(
        [TagStructure("<", ">", grammar=NESTED), TagStructure("<a", ">", regex="1+")],
        ["<"],
        at_least_one=bool(at_least_one),
        stop_after_first=bool(stop_after_first),
    )
    grammar = spec.compile(None)
    assert isinstance(grammar, CompiledCFG)
    ref = [("<", _nested, ">"), ("<a", lambda s: re.fullmatch("1+", s) is not None, ">")]
    seen = {True: 0, False: 0}
    for n in range(7):
        for chars in itertools.product("<>(1a", repeat=n):
            s = "".join(chars)
            expected = tag_reference(
                s,
                ["<"],
                ref,
                at_least_one=bool(at_least_one),
                stop_after_first=bool(stop_after_first),
            )
            assert grammar.matches(s) == expected, s
            seen[expected] += 1
    assert seen[True] > 10 and seen[False]


TOKENS = [b"<eos>", b"<|im_start|>", b"<", b">", b"(", b")", b"1", b"(1)", b")>", b"a", b"<("]


def test_masks_exact_on_token_sequences() -> None:
    vocab = Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=[0, 1])
    grammar = StructuralTag([TagStructure("<", ">", grammar=NESTED)]).compile(vocab)
    ids = range(1, len(TOKENS))
    ref = [("<", _nested, ">")]

    def member(text: str) -> bool:
        return tag_reference(text, ["<"], ref)

    # every completion of a live text: optional "1", closing parentheses, the end
    endings = [""] + [pre + ")" * k + ">" for k in range(7) for pre in ("", "1")]

    def live(text: str) -> bool:
        return any(member(text + e) for e in endings)

    buf = torch.zeros(1, 1, dtype=torch.int32)
    checked = 0
    for prefix in itertools.product(ids, repeat=3):  # along every 3-token walk
        m = grammar.matcher()
        for k in range(len(prefix) + 1):
            text = b"".join(TOKENS[t] for t in prefix[:k]).decode()
            m.fill_bitmask(buf, 0)
            words = buf[0].numpy().view(np.uint32)
            got = {i for i in range(len(TOKENS)) if (words[0] >> i) & 1}
            expected = {t for t in ids if t != 1 and live(text + TOKENS[t].decode())}
            if member(text):
                expected.add(0)
            assert got == expected, prefix[:k]
            checked += 1
            if k == len(prefix) or not m.advance(prefix[k]):
                assert k == len(prefix) or prefix[k] not in got
                break
    assert checked > 20


def test_grammar_content_errors_name_the_structure() -> None:
    with pytest.raises(InvalidGrammarError, match=r"/structures/1/grammar.*1:10"):
        StructuralTag(
            [
                TagStructure("<a>", "</a>", regex="1"),
                TagStructure("<b>", "</b>", grammar="root ::= )"),
            ]
        ).compile(None)
    with pytest.raises(UnsupportedGrammarError, match="%ignore"):
        StructuralTag([TagStructure("<a>", "</a>", grammar='start: "x"+\n%ignore " "')]).compile(
            None
        )


def test_budget_closes_a_grammar_region() -> None:
    """Random walks under max_tokens with a region open: the budget closes it in time."""
    import random

    vocab = Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=[0, 1])
    grammar = StructuralTag([TagStructure("<", ">", grammar=NESTED)]).compile(vocab)
    ref = [("<", _nested, ">")]
    buf = torch.zeros(1, 1, dtype=torch.int32)
    rng = random.Random(0)
    for _ in range(8):
        m, out = grammar.matcher(max_tokens=7), b"<("
        assert m.advance(10)  # "<(": a region open, one parenthesis deep
        while not m.is_terminated():
            m.fill_bitmask(buf, 0)
            words = buf[0].numpy().view(np.uint32)
            tid = rng.choice([i for i in range(len(TOKENS)) if (words[0] >> i) & 1])
            assert m.advance(tid)
            if tid == 0:
                break
            out += TOKENS[tid]
        assert m.is_accepting() and m.num_accepted_tokens <= 8
        assert tag_reference(out.decode(), ["<"], ref), out
