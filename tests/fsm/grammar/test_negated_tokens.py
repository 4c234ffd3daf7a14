"""``!<X>`` in grammars: exactly one token that is not X (Lark, GBNF, EBNF).

Reference: the ``regex`` module over token sequences *written out* with a boundary
character after every token (``BOUNDARY``, above any byte) and one private character per
special token, so a reference pattern sees where each token ends: ``!<X>`` is one whole
token (it starts at a boundary and runs to the next) that is an ordinary token or a
special token the grammar names, other than X; a grammar's literal text may be split
between tokens anywhere. Masks are compared with the reference's partial matches (every
literal character of these grammars is a token, so a partial match can always be
finished), acceptance over every sequence of up to four tokens.
"""

from __future__ import annotations

import functools
import itertools
import random

import numpy as np
import pytest
import torch

from structgen.fsm import Vocabulary, compile_grammar
from structgen.fsm.index.vocabulary import special_token_marker

regex = pytest.importorskip("regex")

TOKENS = [
    b"<eos>",  # 0: EOS
    b"<|im_start|>",  # 1: special
    b"<tool_call>",  # 2: special
    b"<|python_tag|>",  # 3: special
    b"a",
    b"b",
    b"<",
    b"tool_call>",
    b"ab",
    b"\xff",  # byte fallback: no byte path in a grammar naming tokens; a token edge takes it
    b"(",
    b")",
]
SPECIAL = {0, 1, 2, 3}
IDS = range(1, len(TOKENS))
BOUNDARY = "\u0100"


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=sorted(SPECIAL))


def written(ids, tokens=TOKENS, special=SPECIAL) -> str:
    """Each token's bytes as latin-1 characters (a special token: one private character),
    then ``BOUNDARY``."""
    return "".join(
        (chr(0xE000 + t) if t in special else tokens[t].decode("latin-1")) + BOUNDARY for t in ids
    )


def lit(text: str) -> str:
    """Literal text, split between tokens anywhere."""
    return "".join(regex.escape(chr(b)) + BOUNDARY + "?" for b in text.encode())


def tok(t: int) -> str:
    """The special token ``t``."""
    return chr(0xE000 + t) + BOUNDARY


def wild(excluded: int, named=()) -> str:
    """``!<excluded>``: one whole ordinary token (0xFF bytes too) or named special token."""
    others = "".join("|" + chr(0xE000 + t) for t in named if t != excluded)
    return f"(?:(?<={BOUNDARY})|^)(?:[\\x00-\\xff]+{others}){BOUNDARY}"


def wild_but(ordinary: list[int], named=()) -> str:
    """``<[^...]>`` excluding the ordinary tokens ``ordinary`` (specials never named)."""
    texts = "|".join(regex.escape(TOKENS[t].decode()) for t in ordinary)
    return f"(?:(?!(?:{texts}){BOUNDARY}){wild(-1, named)})"


CASES = [  # (grammar, syntax, reference pattern, ids named by <...>)
    ('root ::= !<tool_call> "a"', "gbnf", wild(2) + lit("a"), ()),
    (
        "root ::= <tool_call> !<tool_call>* <tool_call>",
        "gbnf",
        tok(2) + f"(?:{wild(2, [2])})*" + tok(2),
        (2,),
    ),
    (
        'start: !<[2]>+ "ab" | <|python_tag|>\n',
        "lark",
        f"(?:{wild(2, [3])})+{lit('ab')}|{tok(3)}",
        (3,),
    ),
    ("root ::= ('a' | !<tool_call>)? 'b'", "ebnf", f"(?:{lit('a')}|{wild(2)})?{lit('b')}", ()),
    ("start: !<|im_start|>*\n", "lark", f"(?:{wild(1)})*", ()),
    (  # X named elsewhere (allowable), excluded at the edge
        'start: "a" !<tool_call> "b" <tool_call>\n',
        "lark",
        lit("a") + wild(2, [2]) + lit("b") + tok(2),
        (2,),
    ),
    ('root ::= !<[4]>{2} "a"', "gbnf", f"(?:(?!a{BOUNDARY}){wild(4)}){{2}}{lit('a')}", ()),
    (  # llguidance's spelling: any token but several, ranges
        'start: <[^4,8]> "b" | <[^5-6]>+ "a"\n',
        "lark",
        f"{wild_but([4, 8])}{lit('b')}|{wild_but([5, 6])}+{lit('a')}",
        (),
    ),
    (  # recursive: an Earley grammar
        'root ::= x\nx ::= "(" x ")" | !<[3]> "a"',
        "gbnf",
        f"(?P<x>{lit('(')}(?&x){lit(')')}|{wild(3)}{lit('a')})",
        (),
    ),
]


def _allowed(matcher, n: int) -> set[int]:
    buf = torch.zeros(1, (n + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(buf, 0)
    words = buf[0].numpy().view(np.uint32)
    return {i for i in range(n) if (words[i // 32] >> (i % 32)) & 1}


@pytest.mark.parametrize("case", range(len(CASES)))
def test_masks_and_acceptance_match_the_token_reference(vocab: Vocabulary, case: int) -> None:
    text, syntax, reference, _ = CASES[case]
    check_reference(compile_grammar(text, vocab, syntax=syntax), regex.compile(reference), text)


def check_reference(grammar, pattern, text: str) -> None:
    """Acceptance over every sequence of up to four tokens of ``IDS`` and masks at every
    prefix of up to three the reference can continue, against ``pattern`` (written out)."""
    seen = 0
    for n in range(5):
        for seq in itertools.product(IDS, repeat=n):
            m = grammar.matcher()
            ok = all(m.advance(t) for t in seq) and m.is_accepting()
            expected = pattern.fullmatch(written(seq)) is not None
            assert ok == expected, (text, seq)
            seen += expected
    assert seen
    prefixes = [()]
    while prefixes:  # every prefix of up to three tokens the reference can continue
        prefix = prefixes.pop()
        m = grammar.matcher()
        assert all(m.advance(t) for t in prefix), prefix
        expected = {t for t in IDS if pattern.fullmatch(written(prefix + (t,)), partial=True)}
        if pattern.fullmatch(written(prefix)):
            expected.add(0)
        assert _allowed(m, len(TOKENS)) == expected, (text, prefix)
        if len(prefix) < 3:
            prefixes.extend(prefix + (t,) for t in expected if t)


def test_exactly_one_token_before_the_text(vocab: Vocabulary) -> None:
    grammar = compile_grammar('root ::= !<tool_call> "a"', vocab)
    for seq, ok in (
        ([8, 4], True),  # "ab" as the one token, then "a"
        ([5, 4], True),
        ([4, 4], True),
        ([4, 5, 4], False),  # "a", "b" then "a": two tokens, though "ab" is one token's text
        ([5, 5, 4], False),
        ([4], False),
        ([2, 4], False),  # the excluded token
        ([1, 4], False),  # a special token the grammar does not name
        ([9, 4], True),  # a 0xFF byte: one ordinary token (never a byte path)
        ([9, 9, 4], False),
    ):
        m = grammar.matcher()
        assert (all(m.advance(t) for t in seq) and m.is_accepting()) == ok, seq
    m = grammar.matcher()
    assert m.advance(5) and _allowed(m, len(TOKENS)) == {4}  # after one token: only "a"


@pytest.mark.parametrize("case", [2, 3, 7, 8])
def test_budget_masks_are_exact(vocab: Vocabulary, case: int) -> None:
    """With ``max_tokens`` the mask allows a token iff a member within the budget follows."""
    text, syntax, reference, _ = CASES[case]
    check_budget(compile_grammar(text, vocab, syntax=syntax), regex.compile(reference))


def check_budget(grammar, pattern) -> None:
    """Masks under ``max_tokens`` 1 to 4 at every prefix of a member within the budget."""
    for budget in (1, 2, 3, 4):
        members = {
            seq
            for n in range(budget + 1)
            for seq in itertools.product(IDS, repeat=n)
            if pattern.fullmatch(written(seq))
        }
        prefixes = {seq[:k] for seq in members for k in range(len(seq) + 1)}
        for prefix in prefixes:
            m = grammar.matcher(max_tokens=budget)
            assert all(m.advance(t) for t in prefix)
            expected = {t for t in IDS if prefix + (t,) in prefixes}
            if prefix in members:
                expected.add(0)
            assert _allowed(m, len(TOKENS)) == expected, (budget, prefix)


def test_validate_rollback_and_fork_agree_with_advance(vocab: Vocabulary) -> None:
    """Speculative decoding's calls (``validate``, ``rollback``) and ``fork`` across the
    union states of a token that both spells text and takes ``!<X>``."""
    rng = random.Random(0)
    for text, syntax, _, _ in (CASES[3], CASES[8], CASES[7]):
        grammar = compile_grammar(text, vocab, syntax=syntax)
        for _ in range(30):
            m = grammar.matcher()
            masks, walk = [], []
            for _ in range(6):
                allowed = sorted(_allowed(m, len(TOKENS)) - {0})
                masks.append(_allowed(m, len(TOKENS)))
                if not allowed:
                    break
                walk.append(rng.choice(allowed))
                assert m.advance(walk[-1])
            fresh = grammar.matcher()
            assert fresh.validate(walk + [1]) == len(walk)  # 1 (special, not named): never
            for k in range(len(walk), 0, -1):
                m.rollback(1)
                assert _allowed(m, len(TOKENS)) == masks[k - 1], (text, walk, k)
                other = m.fork()
                assert other.advance(walk[k - 1]) and m.num_accepted_tokens == k - 1


def test_jump_forward_stops_at_the_token_edge(vocab: Vocabulary) -> None:
    from structgen.fsm.jump_forward import plan_jump_forward

    grammar = compile_grammar('root ::= "ab" !<tool_call> "ab"', vocab)
    m = grammar.matcher()
    assert m.forced_bytes() == b"ab"  # the text before the edge, never its marker
    assert m.advance(8) and m.forced_bytes() == b""
    assert not plan_jump_forward(m, [8], lambda s: [], vocab)  # the one token is sampled
    assert m.advance(5) and m.forced_bytes() == b"ab"


def test_matches_reads_text(vocab: Vocabulary) -> None:
    """``matches()`` has no tokens: ``!<X>`` reads one or more characters, or the marker
    of a special token the grammar names other than X; whatever the matcher accepts
    (named special tokens written as their markers) matches."""
    g = compile_grammar('root ::= !<tool_call> "a"', vocab)
    assert g.matches("xyz a") and g.matches("é a") and not g.matches("a")
    assert not g.matches(special_token_marker(2) + b"a")
    m2 = special_token_marker(2).decode("latin-1")
    g = compile_grammar(CASES[1][0], vocab)
    assert g.matches(f"{m2}reasoning, at length{m2}".encode("latin-1"))
    assert not g.matches(f"{m2}{m2}{m2}".encode("latin-1"))
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
    assert compile_grammar("root ::= !<[5]>").matches("no vocabulary")  # by id


def test_dialects_read_the_same_grammar(vocab: Vocabulary) -> None:
    """The same grammar in the three dialects has the same masks along every short walk."""
    texts = [
        ('root ::= "a" !<tool_call>* <tool_call>', "gbnf"),
        ("root ::= 'a' !<[2]>* <[2]>", "ebnf"),
        ('start: "a" !<tool_call>* <tool_call>\n', "lark"),
    ]
    check_dialects_agree(vocab, texts)


def check_dialects_agree(vocab: Vocabulary, texts: list[tuple[str, str]]) -> None:
    """The grammars ``(text, syntax)`` accept the same prefix of every 3-token walk over
    ``IDS`` and give the same mask where each stops.
    """
    grammars = [compile_grammar(t, vocab, syntax=s) for t, s in texts]
    for seq in itertools.product(IDS, repeat=3):
        results = []
        for grammar in grammars:
            m = grammar.matcher()
            n = 0
            while n < len(seq) and m.advance(seq[n]):
                n += 1
            results.append((n, frozenset(_allowed(m, len(TOKENS)))))
        assert len(set(results)) == 1, seq


@pytest.mark.slow
def test_smollm2_masks_brute_force(smollm2_tokenizer, smollm2_vocab) -> None:
    """Every one of SmolLM2's 49,152 tokens at states of ``!<X>`` grammars, against the
    written-out reference; the ordinary tokens ``!<X>`` allows are llguidance's
    ``<[^X]>`` minus special tokens (llguidance also allows every other
    special token and EOS there; structgen only those the grammar names)."""
    vocab = smollm2_vocab
    special = vocab.special_token_texts
    start, repo = special["<|im_start|>"], special["<repo_name>"]
    check = functools.partial(check_all_tokens, vocab)

    enc = lambda s: smollm2_tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    grammar = compile_grammar(
        'root ::= "Hi" !<|im_start|>{0,3} " end" <repo_name>', vocab, syntax="gbnf"
    )
    pattern = regex.compile(
        lit("Hi") + f"(?:{wild(start, [repo])}){{0,3}}" + lit(" end") + tok(repo)
    )
    for prefix in ([], enc("Hi"), enc("Hi") + enc(" end"), enc("Hi") + [repo] + enc(" end")):
        check(grammar, pattern, prefix)
    grammar = compile_grammar("start: <repo_name> !<repo_name>* <repo_name>\n", vocab)
    pattern = regex.compile(tok(repo) + f"(?:{wild(repo, [repo])})*" + tok(repo))
    for prefix in ([repo], [repo] + enc(" some reasoning")):
        check(grammar, pattern, prefix)

    grammar = compile_grammar('root ::= x\nx ::= "(" x ")" | !<|im_start|>* " end"', vocab)
    pattern = regex.compile(f"(?P<x>{lit('(')}(?&x){lit(')')}|(?:{wild(start)})*{lit(' end')})")
    for prefix in (enc("(("), enc("((") + enc(" foo bar"), enc("((") + enc(" end")):
        check(grammar, pattern, prefix)

    pytest.importorskip("llguidance")
    import llguidance
    import llguidance.hf
    import llguidance.torch

    lt = llguidance.hf.from_tokenizer(smollm2_tokenizer)
    for ours_text, theirs_text, excluded in (
        ('root ::= !<[1]> "x"', 'start: <[^1]> "x"', {1}),
        ('start: <[^1,3-5,300]> "x"\n', 'start: <[^1,3-5,300]> "x"', {1, 3, 4, 5, 300}),
    ):
        ours = _allowed(compile_grammar(ours_text, vocab).matcher(), vocab.vocab_size)
        grammar = llguidance.LLMatcher.grammar_from_lark(theirs_text)
        peer = llguidance.LLMatcher(lt, grammar)
        buf = llguidance.torch.allocate_token_bitmask(1, lt.vocab_size)
        llguidance.torch.fill_next_token_bitmask(peer, buf, 0)
        theirs = _allowed_tensor(buf, vocab.vocab_size)
        assert ours == theirs - vocab.special_token_ids, ours_text
        assert not excluded & (ours | theirs) and len(ours) > 40_000


_WRITTEN: dict[str, list[str]] = {}  # vocabulary fingerprint -> each token written out


def check_all_tokens(vocab: Vocabulary, grammar, pattern, prefix: list[int]) -> set[int]:
    """The mask after ``prefix`` over every token of ``vocab`` against the written-out
    reference ``pattern`` (EOS where it matches whole); the allowed ids."""
    m = grammar.matcher()
    assert all(m.advance(t) for t in prefix), prefix
    texts = _WRITTEN.get(vocab.fingerprint)
    if texts is None:  # each token written out once per vocabulary
        ids = range(vocab.vocab_size)
        texts = _WRITTEN[vocab.fingerprint] = [
            written([t], vocab.token_bytes, vocab.special_token_ids) for t in ids
        ]
    head = written(prefix, vocab.token_bytes, vocab.special_token_ids)
    eos = vocab.eos_token_ids
    expected = {
        t
        for t in range(vocab.vocab_size)
        if t not in eos and pattern.fullmatch(head + texts[t], partial=True)
    }
    if pattern.fullmatch(head):
        expected |= eos
    got = _allowed(m, vocab.vocab_size)
    assert got == expected, (prefix, sorted(got ^ expected)[:10])
    return got


def _allowed_tensor(buf: torch.Tensor, n: int) -> set[int]:
    words = buf[0].numpy().view(np.uint32)
    return {i for i in range(n) if (words[i // 32] >> (i % 32)) & 1}


def test_select_options_name_tokens(vocab: Vocabulary) -> None:
    """A grammar option of ``select`` may name special tokens (``<X>`` and ``!<X>``), as
    a grammar may: the alternation's masks match the reference."""
    from structgen.fsm.grammar.union import GrammarAlternatives
    from structgen.fsm.spec import Grammar

    options = ("b", Grammar('root ::= <tool_call> "a"'), Grammar('root ::= !<tool_call> "a"'))
    grammar = GrammarAlternatives(text="", options=options).compile(vocab)
    pattern = regex.compile(f"{lit('b')}|{tok(2)}{lit('a')}|{wild(2, [2])}{lit('a')}")
    for n in range(4):
        for seq in itertools.product(IDS, repeat=n):
            m = grammar.matcher()
            ok = all(m.advance(t) for t in seq) and m.is_accepting()
            assert ok == (pattern.fullmatch(written(seq)) is not None), seq
    assert grammar.matches("b") and grammar.matches("xa") and not grammar.matches("a")


def test_budget_witness_crosses_token_edges(vocab: Vocabulary) -> None:
    """The budget's greedy witness reads a wildcard marker as one token, so a long run of
    ``!<X>`` needs no token search (a search allowed one state would give up)."""
    from structgen.fsm.index.budget import CompletionBudget

    grammar = compile_grammar('root ::= !<[4]>{30} "a"', vocab)
    budget = CompletionBudget(grammar.token_index, max_search_states=1)
    assert budget.upper(grammar.token_index.dfa.initial) == 31
    m = grammar.matcher(max_tokens=31)
    assert _allowed(m, len(TOKENS)) == {5, 6, 7, 8, 9, 10, 11}  # ordinary tokens but "a"
    for _ in range(30):
        assert m.advance(8)
    assert _allowed(m, len(TOKENS)) == {4}
    assert m.advance(4) and m.is_terminated()


def test_structural_tag_content_with_a_token_edge(vocab: Vocabulary) -> None:
    """A structural tag's grammar content may hold ``!<X>``: one token, then the rest."""
    from structgen.fsm.spec import StructuralTag, TagStructure

    tag = TagStructure("(", ")", grammar='root ::= !<tool_call> "a"')
    grammar = StructuralTag([tag], at_least_one=True).compile(vocab)
    for seq, ok in (
        ([10, 5, 4, 11], True),
        ([10, 8, 4, 11], True),  # "ab" is the one token
        ([10, 4, 5, 4, 11], False),  # two tokens before "a"
        ([10, 2, 4, 11], False),  # the excluded token
        ([10, 1, 4, 11], False),  # a special token nothing names
        ([4, 10, 5, 4, 11, 5], True),  # free text around the region
    ):
        m = grammar.matcher()
        assert (all(m.advance(t) for t in seq) and m.is_accepting()) == ok, seq


def test_parallel_batch_fill_is_bit_identical(vocab: Vocabulary) -> None:
    """A ``GrammarPool`` fills cold rows of ``!<X>`` grammars (one thread per automaton)
    with the serial fill's bits."""
    from structgen.fsm import BaseMatcher
    from structgen.fsm.grammar.compile import clear_cache
    from structgen.fsm.grammar_pool import GrammarPool

    rng = random.Random(1)
    walks = []  # (case, tokens): every prefix of one random walk per grammar
    for k, (text, syntax, _, _) in enumerate(CASES):
        m, seq = compile_grammar(text, vocab, syntax=syntax).matcher(), []
        for _ in range(4):
            walks.append((k, list(seq)))
            allowed = sorted(_allowed(m, len(TOKENS)) - {0})
            if not allowed:
                break
            seq.append(rng.choice(allowed))
            assert m.advance(seq[-1])

    def matchers() -> list:
        clear_cache()  # cold automata and masks
        grammars = [compile_grammar(t, vocab, syntax=s) for t, s, _, _ in CASES]
        out = []
        for k, seq in walks:
            m = grammars[k].matcher()
            assert all(m.advance(t) for t in seq)
            out.append(m)
        return out

    rows = list(range(len(walks)))
    serial = torch.full((len(walks), 1), -1, dtype=torch.int32)
    assert BaseMatcher.fill_bitmask_batch(matchers(), serial, rows) == [None] * len(rows)
    pool = GrammarPool(2)
    try:
        parallel = torch.full((len(walks), 1), -1, dtype=torch.int32)
        errors = BaseMatcher.fill_bitmask_batch(matchers(), parallel, rows, pool=pool)
        assert errors == [None] * len(rows)
    finally:
        pool.close()
    assert torch.equal(parallel, serial)


def test_wildcard_marker_round_trip() -> None:
    """A marker writes its ids with runs as ranges (a long ``<[^a-b]>`` stays short) and
    ``wildcard_ids`` reads back exactly the set."""
    from structgen.fsm.index.vocabulary import wildcard_ids, wildcard_marker

    assert wildcard_marker([5, 1, 3, 4, 300, 301]) == b"\xff!1,3-5,300-301\xff"
    assert wildcard_marker(7) == b"\xff!7\xff"
    assert wildcard_marker(range(128000, 128256)) == b"\xff!128000-128255\xff"
    rng = random.Random(3)
    for _ in range(200):
        ids = {rng.randrange(40) for _ in range(rng.randint(1, 12))}
        assert wildcard_ids(wildcard_marker(ids)[2:-1]) == ids


def test_special_token_walk_only_when_the_text_names_one(vocab: Vocabulary, monkeypatch) -> None:
    """A ``<`` that names no token (an operator in a literal) skips the special-token walk;
    every written form that names one still takes it."""
    from structgen.fsm.grammar import compile as grammar_compile

    def walked(*args, **kwargs):
        raise AssertionError("special-token walk")

    monkeypatch.setattr(grammar_compile, "resolve_special_tokens", walked)
    grammar_compile.clear_cache()
    g = compile_grammar('start: "a" ("<" | "<>" | "< b >") "b"', vocab, syntax="lark")
    assert g.matches("a<b") and g.matches("a<>b") and not g.matches("a>b")
    assert compile_grammar('root ::= "(" [<] ")"', vocab, syntax="gbnf").matches("(<)")
    for form in ("<tool_call>", "<|im_start|>", "<[2]>", "!<tool_call>", "<[^1,2-3]>"):
        with pytest.raises(AssertionError, match="special-token walk"):
            compile_grammar(f'start: "a" {form}', vocab, syntax="lark")
        with pytest.raises(AssertionError, match="special-token walk"):
            compile_grammar(f'root ::= "a" {form}', vocab, syntax="gbnf")
