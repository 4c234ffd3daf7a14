"""Special tokens in grammars (Lark, GBNF, EBNF): the mask allows exactly the named id.

Reference: Python's ``re`` over token sequences written with one private character per
special token (so ``<tool_call>`` the token and ``"<tool_call>"`` the characters differ),
every sequence of up to five tokens of a hand-built vocabulary enumerated.
"""

from __future__ import annotations

import itertools
import re

import pytest
import torch

from benchmarks.support import allowed_ids
from structgen.errors import InvalidGrammarError
from structgen.fsm import Vocabulary, compile_grammar

TOKENS = [
    b"<eos>",  # 0: EOS
    b"<|im_start|>",  # 1: special, never named
    b"<tool_call>",  # 2: special
    b"<|python_tag|>",  # 3: special
    b"a",
    b"b",
    b"<",
    b"tool_call>",
    b"ab",
    b"\xff",  # a byte-fallback piece: never spells a marker
]
SPECIAL = {1: "\x01", 2: "\x02", 3: "\x03"}


@pytest.fixture
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=[0, 1, 2, 3])


def _written(ids) -> str | None:
    out = []
    for t in ids:
        if t in SPECIAL:
            out.append(SPECIAL[t])
        else:
            try:
                out.append(TOKENS[t].decode("utf-8"))
            except UnicodeDecodeError:
                return None
    return "".join(out)


GRAMMARS = [  # (grammar text, syntax, reference regex over written sequences)
    ('root ::= "a" <tool_call> "b"+', "gbnf", "a\x02b+"),
    ('start: "a" <[3]> | <|python_tag|> "ab"', "lark", "a\x03|\x03ab"),
    ("root ::= 'a' <tool_call> | '<tool_call>' 'a'", "ebnf", "a\x02|<tool_call>a"),
    ('root ::= x*\nx ::= <tool_call> "a" | "(" x ")"', "gbnf", "(?:\x02a)*"),  # a CFG
]


@pytest.mark.parametrize("case", range(len(GRAMMARS)))
def test_masks_allow_exactly_the_named_ids(vocab: Vocabulary, case: int) -> None:
    text, syntax, reference = GRAMMARS[case]
    grammar = compile_grammar(text, vocab, syntax=syntax)
    ids = range(1, len(TOKENS))
    members = set()
    for n in range(6):
        for seq in itertools.product(ids, repeat=n):
            w = _written(seq)
            if w is not None and re.fullmatch(reference, w):
                members.add(seq)
    assert members
    prefixes = {seq[:k] for seq in members for k in range(len(seq) + 1)}
    buf = torch.zeros(1, 1, dtype=torch.int32)
    for prefix in sorted(p for p in prefixes if len(p) < 4):  # completions take <= 2 tokens
        m = grammar.matcher()
        assert all(m.advance(t) for t in prefix), prefix
        m.fill_bitmask(buf, 0)
        expected = {t for t in ids if prefix + (t,) in prefixes}
        if prefix in members:
            expected.add(0)
        assert set(allowed_ids(buf[0], len(TOKENS))) == expected, (prefix, text)
    for seq in itertools.product(ids, repeat=3):  # and nothing else is accepted
        m = grammar.matcher()
        ok = all(m.advance(t) for t in seq) and m.is_accepting()
        assert ok == (seq in members), seq


def test_errors_name_line_and_column(vocab: Vocabulary) -> None:
    with pytest.raises(InvalidGrammarError, match=r"<\|nope\|> at 2:13"):
        compile_grammar('root ::= "a" x\nx ::= "b" | <|nope|>', vocab)
    with pytest.raises(InvalidGrammarError, match="end-of-sequence"):
        compile_grammar("root ::= <[0]>", vocab)
    grammar = compile_grammar("root ::= <[4]>", vocab)  # an ordinary id: that one token
    m = grammar.matcher()
    assert m.advance(4) and m.is_accepting() and not grammar.matcher().advance(8)
    with pytest.raises(InvalidGrammarError, match=r"!<\|nope\|> at 1:10"):
        compile_grammar("root ::= !<|nope|>", vocab)  # a negated name resolves the same way
    with pytest.raises(InvalidGrammarError, match="needs a vocabulary"):
        compile_grammar("root ::= <tool_call>")
    assert compile_grammar("root ::= <[2]>").matches(b"\xff2\xff")  # by id: no vocabulary


def test_jump_forward_never_retokenizes_a_marker(vocab: Vocabulary) -> None:
    from structgen.fsm.jump_forward import plan_jump_forward

    grammar = compile_grammar('root ::= "a" <tool_call> "b"', vocab)
    m = grammar.matcher()
    assert m.advance(4)
    plan = plan_jump_forward(m, [4], lambda s: [], vocab)
    assert not plan  # the only way on is the special token: sampled, never text
    assert m.advance(2) and m.advance(5) and m.is_accepting()


def test_structural_tag_begin_as_one_special_token(vocab: Vocabulary) -> None:
    """A begin that is a special token's text: producible as that token or as characters;
    token sequences written out agree with the Python reference; other specials never."""
    from structgen.fsm.spec import StructuralTag, TagStructure
    from tests.fsm.tags._reference import tag_reference

    spec = StructuralTag([TagStructure("<tool_call>", "b", regex="a+")], at_least_one=True)
    grammar = spec.compile(vocab)
    assert spec_of_equal(grammar.spec, spec)
    ref = [("<tool_call>", lambda s: re.fullmatch("a+", s) is not None, "b")]
    ids = [t for t in range(1, len(TOKENS)) if t != 9]
    buf = torch.zeros(1, 1, dtype=torch.int32)
    seen_token = seen_chars = 0
    for n in range(5):
        for seq in itertools.product(ids, repeat=n):
            m = grammar.matcher()
            ok = all(m.advance(t) for t in seq) and m.is_accepting()
            written = b"".join(TOKENS[t] for t in seq).decode()
            expected = tag_reference(written, ["<tool_call>"], ref, at_least_one=True)
            assert ok == (not {1, 3} & set(seq) and expected), seq  # other specials: never
            if ok:
                seen_token += 2 in seq
                seen_chars += 7 in seq
    assert seen_token and seen_chars
    m = grammar.matcher()
    m.fill_bitmask(buf, 0)
    # free text or the begin token
    assert set(allowed_ids(buf[0], len(TOKENS))) == {2, 4, 5, 6, 7, 8}


def spec_of_equal(a, b) -> bool:
    return a.cache_key() == b.cache_key()


def test_jump_forward_keeps_a_special_begin_token() -> None:
    """After the begin as its special token, the forced text is appended after it: the
    plan never retokenizes the token into its characters."""
    from structgen.fsm.jump_forward import plan_jump_forward
    from structgen.fsm.spec import StructuralTag, TagStructure

    tokens = [b"<eos>", b"<tool_call>", b"<", b"tool_call>", b"{", b"1", b"}", b"x"]
    vocab = Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0, 1])
    ordinary = {t: i for i, t in enumerate(tokens) if i > 1}

    def encode(text: str) -> list[int]:  # longest match over the ordinary tokens
        data, out = text.encode(), []
        while data:
            piece = max((t for t in ordinary if data.startswith(t)), key=len)
            out.append(ordinary[piece])
            data = data[len(piece) :]
        return out

    spec = StructuralTag([TagStructure("<tool_call>", "}", regex=r"\{1")], stop_after_first=True)
    m = spec.compile(vocab).matcher()
    assert m.advance(7) and m.advance(1)  # "x", then the begin as one token
    plan = plan_jump_forward(m, [7, 1], encode, vocab)
    assert plan and plan.num_drop == 0 and plan.append == (4, 5, 6)  # '{' '1' '}'
