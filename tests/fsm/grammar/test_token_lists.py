"""llguidance's ``<[*]>`` (any one token) and ``<[1,5-7]>`` (one token among those ids) in
grammars (Lark, GBNF, EBNF).

Reference: as ``test_negated_tokens`` (token sequences written out with a boundary after
every token, one private character per special token): ``<[*]>`` is one whole token that
``!<X>`` may take with nothing excluded (an ordinary token, one holding the byte 0xFF
too, or a special token the grammar names); ``<[...]>`` one whole token among the listed
ids (a listed special token is named), and so is a single ``<[id]>`` naming an ordinary
token.
"""

from __future__ import annotations

import itertools

import pytest

from structgen.errors import InvalidGrammarError
from structgen.fsm import Vocabulary, compile_grammar
from structgen.fsm.index.vocabulary import special_token_marker, wildcard_ids, wildcard_marker

from .test_negated_tokens import (
    BOUNDARY,
    IDS,
    SPECIAL,
    TOKENS,
    _allowed,
    _allowed_tensor,
    check_all_tokens,
    check_budget,
    check_dialects_agree,
    check_reference,
    lit,
    tok,
    wild,
    written,
)

regex = pytest.importorskip("regex")


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=sorted(SPECIAL))


def only(ids, tokens=TOKENS, special=SPECIAL) -> str:
    """``<[ids]>``: one whole token among ``ids``."""
    texts = "|".join(regex.escape(written([t], tokens, special)[:-1]) for t in ids)
    return f"(?:(?<={BOUNDARY})|^)(?:{texts}){BOUNDARY}"


ANY = wild(-1)  # ``<[*]>`` in a grammar that names no special token

CASES = [  # (grammar, syntax, reference pattern, special ids the grammar names)
    ('start: <[*]> "a"\n', "lark", ANY + lit("a"), ()),
    ('root ::= <[4,8]> "b"', "gbnf", only([4, 8]) + lit("b"), ()),
    (  # listed special tokens are named: <[*]> may take them too
        "root ::= <[2-3]> 'a' | <[*]>{2}",
        "ebnf",
        f"{only([2, 3])}{lit('a')}|(?:{wild(-1, [2, 3])}){{2}}",
        (2, 3),
    ),
    (
        "root ::= <tool_call> <[5-7,10]>* <tool_call>",
        "gbnf",
        f"{tok(2)}(?:{only([5, 6, 7, 10])})*{tok(2)}",
        (2,),
    ),
    ('root ::= <[8-9]> "a"', "gbnf", only([8, 9]) + lit("a"), ()),  # 9 holds 0xFF
    ('root ::= <[9]> "a" <[4]>', "gbnf", only([9]) + lit("a") + only([4]), ()),  # ordinary ids
    ("start: (<[5]> | <[8]>)+ <[3]>\n", "lark", f"(?:{only([5])}|{only([8])})+{tok(3)}", (3,)),
    (  # !<X> takes the special token a list names
        "start: <[3,4]> !<tool_call>\n",
        "lark",
        only([3, 4]) + wild(2, [3]),
        (3,),
    ),
    (  # recursive: an Earley grammar
        'root ::= x\nx ::= "(" x ")" | <[*]> | <[4,5]> "b"',
        "gbnf",
        f"(?P<x>{lit('(')}(?&x){lit(')')}|{ANY}|{only([4, 5])}{lit('b')})",
        (),
    ),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_masks_and_acceptance_match_the_token_reference(vocab: Vocabulary, case: int) -> None:
    text, syntax, reference, _ = CASES[case]
    check_reference(compile_grammar(text, vocab, syntax=syntax), regex.compile(reference), text)


@pytest.mark.parametrize("case", [2, 3, 5, 8])
def test_budget_masks_are_exact(vocab: Vocabulary, case: int) -> None:
    text, syntax, reference, _ = CASES[case]
    check_budget(compile_grammar(text, vocab, syntax=syntax), regex.compile(reference))


@pytest.mark.parametrize(
    ("text", "cases"),
    [
        (
            'root ::= <[*]> "a"',
            [
                ([8, 4], True),  # "ab" as the one token, then "a"
                ([4, 5, 4], False),  # two tokens, though "ab" is one token's text
                ([1, 4], False),  # a special token nothing names
                ([9, 4], True),  # a 0xFF byte: one token
                ([9, 9, 4], False),
                ([4], False),
            ],
        ),
        (
            'root ::= <[4,8]> "b"',
            [
                ([8, 5], True),
                ([4, 5], True),
                ([4, 5, 5], False),
                ([5, 5], False),  # not listed
                ([4, 4, 5], False),  # "aa" is two tokens
            ],
        ),
    ],
)
def test_exactly_one_token(vocab: Vocabulary, text: str, cases) -> None:
    grammar = compile_grammar(text, vocab)
    for seq, ok in cases:
        m = grammar.matcher()
        assert (all(m.advance(t) for t in seq) and m.is_accepting()) == ok, (text, seq)


def test_dialects_read_the_same_grammar(vocab: Vocabulary) -> None:
    texts = [
        ('root ::= "a" <[*]> <[2,4-5]>', "gbnf"),
        ("root ::= 'a' <[*]> <[2,4-5]>", "ebnf"),
        ('start: "a" <[*]> <[2,4-5]>\n', "lark"),
    ]
    check_dialects_agree(vocab, texts)


def test_matches_reads_text(vocab: Vocabulary) -> None:
    """``matches()`` reads a list or ``<[*]>`` as one or more characters or the marker of
    a special token it may take; whatever the matcher accepts matches."""
    g = compile_grammar('root ::= <[4,8]> "b"', vocab)
    assert g.matches("ab") and g.matches("xyzb") and not g.matches("b")
    m3 = special_token_marker(3)
    assert compile_grammar("root ::= <[3,4]> 'b'", vocab, syntax="ebnf").matches(m3 + b"b")
    assert not compile_grammar("root ::= <[4,5]> 'b'", vocab, syntax="ebnf").matches(m3 + b"b")
    for text, syntax, _, named in CASES:
        grammar = compile_grammar(text, vocab, syntax=syntax)
        for n in range(4):
            for seq in itertools.product([t for t in IDS if t != 9], repeat=n):
                m = grammar.matcher()
                if all(m.advance(t) for t in seq) and m.is_accepting():
                    data = b"".join(
                        special_token_marker(t) if t in named else TOKENS[t] for t in seq
                    )
                    assert grammar.matches(data), (text, seq)
    assert compile_grammar("root ::= <[*]> <[5,7]>").matches("no vocabulary")


def test_jump_forward_stops_at_the_token_edge(vocab: Vocabulary) -> None:
    grammar = compile_grammar('root ::= "ab" <[8-8]> "ab"', vocab)
    m = grammar.matcher()
    assert m.forced_bytes() == b"ab"
    assert m.advance(8) and m.forced_bytes() == b""  # the one listed token is sampled
    assert _allowed(m, len(TOKENS)) == {8}
    assert m.advance(8) and m.forced_bytes() == b"ab"


@pytest.mark.parametrize(
    ("text", "syntax", "where", "says"),
    [
        ('root ::= "a" <[]>', "gbnf", "1:14", "lists no token"),
        ("root ::= 'a'\n  | <[7-5]>", "ebnf", "2:5", "range 7-5 is empty"),
        ('start: "a" <[*,1]>\n', "lark", "1:12", "stands alone"),
        ('start: "a"\n    | <[^*]>\n', "lark", "2:7", "excludes every token"),
        ("root ::= !<[1,2]>", "gbnf", "1:10", "<[^a,b-c]>"),
        ("root ::= <[1,]>", "gbnf", "1:10", "separated by ','"),
        ("root ::= <[1-2-3]>", "gbnf", "1:10", "separated by ','"),
        ("root ::= <[a]>", "gbnf", "1:10", "separated by ','"),
        ("root ::= <[0,4]>", "gbnf", "1:10", "end-of-sequence"),  # 0: EOS
        ("root ::= <[4,12]>", "gbnf", "1:10", "has 12 tokens"),
        (f"root ::= <[0-{1 << 19}]>", "gbnf", "1:10", "too large"),
    ],
)
def test_malformed_lists_name_their_place(
    vocab: Vocabulary, text: str, syntax: str, where: str, says: str
) -> None:
    with pytest.raises(InvalidGrammarError) as info:
        compile_grammar(text, vocab, syntax=syntax)
    assert f"at {where}" in str(info.value) and says in str(info.value), str(info.value)


def test_marker_forms() -> None:
    assert wildcard_marker([]) == b"\xff!\xff"  # <[*]>: excludes nothing
    assert wildcard_marker([5, 1, 6], only=True) == b"\xff=1,5-6\xff"
    assert wildcard_ids(b"") == frozenset()
    with pytest.raises(ValueError):
        wildcard_marker([], only=True)


@pytest.mark.slow
def test_smollm2_masks_brute_force(smollm2_tokenizer, smollm2_vocab) -> None:
    """Every one of SmolLM2's 49,152 tokens at states of ``<[*]>`` and list grammars,
    against the written-out reference, and against llguidance's own masks for the same
    grammar: a list (or a single ordinary ``<[id]>``) allows exactly llguidance's ids;
    ``<[*]>`` llguidance's minus special tokens and EOS (which structgen allows only where
    named)."""
    vocab = smollm2_vocab
    tokens, special = vocab.token_bytes, vocab.special_token_ids
    repo = vocab.special_token_texts["<repo_name>"]
    enc = lambda s: smollm2_tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    grammar = compile_grammar('root ::= "Hi" <[*]>{0,2} " end" <[1,3-5,300,1000-1010]>', vocab)
    listed = [1, 3, 4, 5, 300, *range(1000, 1011)]
    pattern = regex.compile(
        lit("Hi")
        + f"(?:{wild(-1, [1, 3, 4, 5])}){{0,2}}"
        + lit(" end")
        + only(listed, tokens, special)
    )
    for prefix in ([], enc("Hi"), enc("Hi") + [3], enc("Hi") + enc(" end")):
        check_all_tokens(vocab, grammar, pattern, prefix)
    grammar = compile_grammar(f"start: <repo_name> <[*]>* <[{repo}]>\n", vocab)
    pattern = regex.compile(tok(repo) + f"(?:{wild(-1, [repo])})*" + tok(repo))
    for prefix in ([repo], [repo] + enc(" some reasoning")):
        check_all_tokens(vocab, grammar, pattern, prefix)

    pytest.importorskip("llguidance")
    import llguidance
    import llguidance.hf
    import llguidance.torch

    lt = llguidance.hf.from_tokenizer(smollm2_tokenizer)
    for text, drop in (
        ('start: <[*]> "x"', special | vocab.eos_token_ids),
        ('start: <[1,3-5,300,1000-1010]> "x"', set()),
        ('start: <[7-9]> "x"', set()),
        ('start: <[300]> "x"', set()),  # one ordinary id
        ('start: <[4000-4000]> "x"', set()),
        ('start: <[12000-12003]> "x"', set()),
    ):
        ours = _allowed(compile_grammar(text + "\n", vocab).matcher(), vocab.vocab_size)
        peer = llguidance.LLMatcher(lt, llguidance.LLMatcher.grammar_from_lark(text))
        buf = llguidance.torch.allocate_token_bitmask(1, lt.vocab_size)
        llguidance.torch.fill_next_token_bitmask(peer, buf, 0)
        theirs = _allowed_tensor(buf, vocab.vocab_size)
        assert ours == theirs - drop, text
        assert ours


@pytest.fixture(scope="module")
def byte_fallback_tokenizer():
    """A SentencePiece-style BPE with byte fallback (``<0x00>`` .. ``<0xFF>``, so tokens
    holding 0x80..0xFF alone), built in memory with the ``tokenizers`` library."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    pieces = {"<unk>": 0, "<s>": 1, "</s>": 2, "<tool_call>": 3}
    pieces.update({f"<0x{b:02X}>": 4 + b for b in range(256)})
    for piece in ("a", "b", "ab", "▁a", "x", "▁"):
        pieces[piece] = len(pieces)
    model = tokenizers.models.BPE(
        vocab=pieces, merges=[("a", "b"), ("▁", "a")], byte_fallback=True, unk_token="<unk>"
    )
    tok = tokenizers.Tokenizer(model)
    tok.decoder = tokenizers.decoders.Sequence(
        [
            tokenizers.decoders.Replace("▁", " "),
            tokenizers.decoders.ByteFallback(),
            tokenizers.decoders.Fuse(),
        ]
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        additional_special_tokens=["<tool_call>"],
    )


def test_byte_fallback_masks_match_llguidance(byte_fallback_tokenizer) -> None:
    """Token edges over a byte-fallback vocabulary against llguidance's own masks, before
    and after the ``<0xFF>`` token: the ordinary tokens agree exactly (those holding 0xFF
    included); llguidance's ``<[*]>`` / ``<[^...]>`` also allow every special token and
    EOS, which structgen allows only where the grammar names them."""
    pytest.importorskip("llguidance")
    import llguidance
    import llguidance.hf
    import llguidance.torch

    vocab = Vocabulary.from_tokenizer(byte_fallback_tokenizer)
    lt = llguidance.hf.from_tokenizer(byte_fallback_tokenizer)
    ff, x = 4 + 0xFF, byte_fallback_tokenizer.convert_tokens_to_ids("x")
    assert vocab.token_bytes[ff] == b"\xff" and lt.vocab_size == vocab.vocab_size
    drop = vocab.special_token_ids | vocab.eos_token_ids
    for ours_text, theirs_text, drops in (
        ('start: <[*]> "x"', 'start: <[*]> "x"', drop),
        ('start: !<[5]> "x"', 'start: <[^5]> "x"', drop),
        ('start: <[^3,100-120]> "x"', 'start: <[^3,100-120]> "x"', drop),
        (f'start: <[{ff}]> "x"', f'start: <[{ff}]> "x"', set()),
        (f'start: <[{ff - 1}-{ff}]> "x"', f'start: <[{ff - 1}-{ff}]> "x"', set()),
    ):
        ours_m = compile_grammar(ours_text + "\n", vocab).matcher()
        peer = llguidance.LLMatcher(lt, llguidance.LLMatcher.grammar_from_lark(theirs_text))
        buf = llguidance.torch.allocate_token_bitmask(1, lt.vocab_size)
        llguidance.torch.fill_next_token_bitmask(peer, buf, 0)
        theirs = _allowed_tensor(buf, vocab.vocab_size)
        ours = _allowed(ours_m, vocab.vocab_size)
        assert ours == theirs - drops, (ours_text, sorted(ours ^ theirs)[:8])
        assert ff in ours
        assert ours_m.advance(ff) and peer.consume_token(ff)
        llguidance.torch.fill_next_token_bitmask(peer, buf, 0)
        # "x" as its token or its byte-fallback token <0x78> (llguidance: the first only)
        assert _allowed(ours_m, vocab.vocab_size) == {x, 4 + ord("x")}
        assert _allowed_tensor(buf, vocab.vocab_size) == {x}
        assert not ours_m.fork().advance(ff) and ours_m.advance(x) and ours_m.is_accepting()
