"""Jump-forward plans: canonical retokenization with the tail, boundary cases, validity."""

from __future__ import annotations

import random

import pytest

from benchmarks.support import allowed_ids, planned_walk
from structgen.fsm import Vocabulary, compile_choice, compile_json_schema, compile_regex
from structgen.fsm.jump_forward import JumpForwardPlan, complete_utf8_prefix_len, plan_jump_forward

_CORPUS = [
    "Hello world! Hello there, hello world.",
    '{"name":"Ada","age":36,"tags":["x","y"],"ok":true}',
    '{"reservationID":"R-1","specialRequests":["window seat","vegan"]}',
    "日本語 日本 日曜日 旅行 本日 日本語のテキスト",
    "the quick brown fox jumps over the lazy dog",
] * 30


@pytest.fixture(scope="module")
def bpe():
    """A small byte-level BPE (tokenizers library) and its Vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS, trainer)
    vocab = Vocabulary.from_tokenizer(tok, eos_token_ids=[0])

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    return encode, vocab


def _apply(matcher, generated: list[int], plan: JumpForwardPlan) -> list[int]:
    """Apply a plan the way the engine does; every appended token must be accepted."""
    matcher.rollback(plan.num_drop)
    for t in plan.append:
        assert matcher.advance(t)
    return generated[: len(generated) - plan.num_drop] + list(plan.append)


def _feed(grammar, ids: list[int]):
    m = grammar.matcher()
    for t in ids:
        assert m.advance(t)
    return m


def test_complete_utf8_prefix_len() -> None:
    assert complete_utf8_prefix_len("日本".encode()) == 6
    assert complete_utf8_prefix_len("日".encode() + b"\xe6\x9c") == 3
    assert complete_utf8_prefix_len(b"ab\xc3") == 2 and complete_utf8_prefix_len(b"") == 0


def test_forced_text_merges_with_previous_token(bpe) -> None:
    encode, vocab = bpe
    grammar = compile_regex(r"Hello world|Hi", vocab)
    he = encode("He")
    assert len(he) == 1  # "He" is one token of this BPE
    m = _feed(grammar, he)
    plan = plan_jump_forward(m, he, encode, vocab)
    assert plan.num_drop == 1  # "He" + "llo" retokenizes as "Hello"
    out = _apply(m, he, plan)
    assert out == encode("Hello world") and m.is_terminated()
    naive = encode("llo world")
    assert out[len(he) - 1 :] != he + naive


def test_forced_text_ending_mid_character(bpe) -> None:
    encode, vocab = bpe
    grammar = compile_choice(["ab日本", "ab旅"], vocab)  # 日 E6 97 A5, 旅 E6 97 85
    m = grammar.matcher()
    assert m.forced_bytes() == b"ab\xe6\x97"
    plan = plan_jump_forward(m, [], encode, vocab)
    assert vocab.decode(plan.append) in (b"ab", b"a", b"")  # never the partial character
    gen = _apply(m, [], plan)
    assert vocab.decode(gen) == b"ab"[: len(vocab.decode(gen))]
    # only a partial character is forced: no jump at all
    m2 = compile_choice(["日本", "旅"], vocab).matcher()
    assert m2.forced_bytes() == b"\xe6\x97" and not plan_jump_forward(m2, [], encode, vocab)


def test_cjk_alternatives_sharing_a_first_byte(bpe) -> None:
    encode, vocab = bpe
    assert len(encode(" 日本")) == 1 and len(encode(" 日曜日")) == 1  # merges past " 日"
    grammar = compile_choice([" 日本語", " 日曜日"], vocab)  # 本 E6 9C AC, 曜 E6 9B 9C
    m = grammar.matcher()
    assert m.forced_bytes() == " 日".encode() + b"\xe6"
    plan = plan_jump_forward(m, [], encode, vocab)
    # " 日" must not be appended alone: with "本" or "曜" after it the canonical split differs
    assert not plan
    for target in (" 日本語", " 日曜日"):
        assert list(plan.append) == encode(target)[: len(plan.append)]


def test_no_merge_past_the_forced_text_in_json(bpe) -> None:
    encode, vocab = bpe
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    grammar = compile_json_schema(schema, vocab)
    m = grammar.matcher()
    plan = plan_jump_forward(m, [], encode, vocab)
    gen = _apply(m, [], plan)
    text = vocab.decode(gen)
    assert b'{"name":"'.startswith(text) and text  # part of the forced key, nothing more
    full = encode('{"name":"Ada","age":36}')
    assert gen == full[: len(gen)]  # canonical: a prefix of the whole document's tokens


def test_plan_is_valid_or_empty_on_random_walks(bpe) -> None:
    encode, vocab = bpe
    schema = {
        "type": "object",
        "properties": {
            "reservationID": {"type": "string", "maxLength": 8},
            "specialRequests": {
                "type": "array",
                "items": {"enum": ["window seat", "vegan", "日本"]},
            },
        },
        "required": ["reservationID", "specialRequests"],
    }
    grammar = compile_json_schema(schema, vocab)
    rng = random.Random(0)
    import torch

    mask = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    num_plans = 0
    for _ in range(30):
        m, gen = grammar.matcher(max_tokens=60), []
        while not m.is_terminated() and len(gen) < 60:
            plan = plan_jump_forward(m, gen, encode, vocab, max_append=60 - len(gen))
            if plan:
                before = vocab.decode(gen) + m.forced_bytes()
                gen = _apply(m, gen, plan)
                assert before.startswith(vocab.decode(gen)[: len(before)])
                num_plans += 1
                continue
            m.fill_bitmask(mask, 0)
            allowed = allowed_ids(mask[0], vocab.vocab_size)
            tok = rng.choice(allowed)
            assert m.advance(tok)
            if tok in vocab.eos_token_ids:
                break
            gen.append(tok)
        assert grammar.matches(vocab.decode(gen)), vocab.decode(gen)
    assert num_plans > 30


def test_no_jump_without_forced_text(bpe) -> None:
    encode, vocab = bpe
    m = compile_regex(r"[ab]+", vocab).matcher()
    assert plan_jump_forward(m, [], encode, vocab) == JumpForwardPlan()


def test_bad_tokenizer_gives_no_jump(bpe) -> None:
    _, vocab = bpe
    m = compile_regex(r"Hello world", vocab).matcher()

    def broken(text: str) -> list[int]:
        raise RuntimeError("boom")

    assert not plan_jump_forward(m, [], broken, vocab)
    assert not plan_jump_forward(m, [], lambda t: [1, 2, 3], vocab)  # round trip fails


@pytest.mark.slow
def test_smollm2_retokenizes_key_with_closing_quote(smollm2_tokenizer, smollm2_vocab) -> None:
    def encode(text: str) -> list[int]:
        return smollm2_tokenizer.encode(text, add_special_tokens=False)

    vocab = smollm2_vocab
    schema = {
        "type": "object",
        "properties": {
            "reservationID": {"type": "string"},
            "specialRequests": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["reservationID", "specialRequests"],
    }
    grammar = compile_json_schema(schema, vocab)
    prefix = encode('{"reservationID":"R12')
    m = _feed(grammar, prefix)
    gen = list(prefix)
    quote = encode('"')
    assert len(quote) == 1 and m.advance(quote[0])
    gen += quote
    assert m.forced_bytes() == b',"specialRequests":['  # then '"' or ']'
    plan = plan_jump_forward(m, gen, encode, vocab)
    assert plan
    gen = _apply(m, gen, plan)
    text = vocab.decode(gen).decode()
    assert text.startswith('{"reservationID":"R12",')
    whole = encode('{"reservationID":"R12","specialRequests":["window"]}')
    assert gen == whole[: len(gen)]  # the same split the tokenizer itself makes
    # CJK alternatives sharing a first byte, with the real tokenizer
    grammar = compile_choice(["日本語", "日曜日"], vocab)
    m = grammar.matcher()
    plan = plan_jump_forward(m, [], encode, vocab)
    for target in ("日本語", "日曜日"):
        assert list(plan.append) == encode(target)[: len(plan.append)]


def _probes_reference(matcher, state_after, text, ids, encode) -> int:
    """The boundary rule by brute force: every character the grammar lets follow is encoded
    after the whole text, no cache; the count of ``ids`` every probe agrees on."""
    from structgen.fsm.jump_forward import _next_chars

    if not (matcher._dfa.row(state_after) >= 0).any():
        return len(ids)
    keep = len(ids)
    for ch in _next_chars(matcher._dfa, state_after):
        try:
            probe = encode(text + ch.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        n = 0
        while n < len(ids) and n < len(probe) and probe[n] == ids[n]:
            n += 1
        keep = min(keep, n)
    return keep


def _planned_walks(grammars, encode, vocab, seed: int) -> list:
    """Plans along a seeded random token walk (plans applied as the engine applies them)
    on each grammar, in order."""
    rng = random.Random(seed)
    plans = []
    for grammar in grammars:
        plans.extend(planned_walk(grammar.matcher(), encode, vocab, rng, 80))
    return plans


@pytest.mark.parametrize("kind", ["copy", "schema"])
def test_boundary_probes_equal_brute_force_across_grammars(
    kind, smollm2_tokenizer, smollm2_vocab, monkeypatch
) -> None:
    """The boundary rule's probes, shared by every grammar of a vocabulary, give what
    encoding every probe afresh gives: at every call along random walks on six contact
    cards' copy grammars (each its own grammar, so later cards reuse earlier cards' probes)
    or on plain schemas, and the plans are those of the brute-force rule."""
    import structgen.fsm.jump_forward as jf
    from tests.fsm._contact_cards import contact_card_grammars

    def encode(text: str) -> list[int]:
        return smollm2_tokenizer.encode(text, add_special_tokens=False)

    vocab = smollm2_vocab
    if kind == "copy":
        grammars = list(contact_card_grammars(vocab, 6, seed=3))
    else:
        grammars = [
            compile_json_schema(
                {
                    "type": "object",
                    "properties": {
                        key: {"type": "string", "maxLength": 8},
                        "kind": {"enum": ["person", "company", "place"]},
                        "tags": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
                    },
                    "required": [key, "kind", "tags"],
                },
                vocab,
            )
            for key in ("name", "title", "label")
        ]
    # brute force
    monkeypatch.setattr(
        jf,
        "_safe_prefix_len",
        lambda m, s, text, ids, enc, voc: _probes_reference(m, s, text, ids, enc),
    )
    expected = _planned_walks(grammars, encode, vocab, seed=7)
    monkeypatch.undo()
    # the shared probes, every call checked against brute force; "engine": the engine's
    # encode (a partial over a tokenizer with a backend), so only the last pre-tokens probe
    real, calls = jf._safe_prefix_len, [0]

    def checked(m, s, text, ids, enc, voc):
        calls[0] += 1
        keep = real(m, s, text, ids, enc, voc)
        assert keep == _probes_reference(m, s, text, ids, encode), (text, s)
        return keep

    monkeypatch.setattr(jf, "_safe_prefix_len", checked)
    encodes = {}
    for form in ("function", "engine"):
        for size in (0, jf._PROBE_CACHE_SIZE):  # 0: nothing shared, every probe encoded
            monkeypatch.setattr(jf, "_PROBE_CACHE_SIZE", size)
            jf._boundary_caches.clear()
            jf._probe_caches.clear()
            counting = _CountingTokenizer(smollm2_tokenizer)
            enc = counting.encode_text if form == "function" else counting.engine_encode()
            assert _planned_walks(grammars, enc, vocab, seed=7) == expected
            encodes[form, size] = counting.calls
    assert jf._pre_token_split(counting.engine_encode(), '","email":"') > 0  # known
    assert sum(bool(p) for p in expected) >= 9 and calls[0] >= 100
    shared = jf._PROBE_CACHE_SIZE
    if kind == "copy":  # later cards reuse earlier cards' probes, more by pre-tokens
        assert encodes["function", shared] < 0.8 * encodes["function", 0], encodes
        assert encodes["engine", shared] < 0.6 * encodes["function", shared], encodes


class _CountingTokenizer:
    """A tokenizer's ``encode`` and ``backend_tokenizer``, counting encodes."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.calls = tokenizer, 0
        self.backend_tokenizer = tokenizer.backend_tokenizer

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        self.calls += 1
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens)

    def encode_text(self, text: str) -> list[int]:
        return self.encode(text, add_special_tokens=False)

    def engine_encode(self):
        import functools

        return functools.partial(self.encode, add_special_tokens=False)


@pytest.mark.parametrize("pre", ["byte_level", "digits_then_byte_level"])
def test_boundary_keep_on_last_pre_tokens_equals_brute_force(
    pre, smollm2_tokenizer, smollm2_vocab
) -> None:
    """Probing only the text's last two pre-tokens gives, for every single next character,
    what encoding the whole text with it gives: random texts built from contractions cut
    short (``'r`` + ``e``), whitespace runs, newlines, digits, CJK and punctuation, on
    SmolLM2's byte-level BPE and on the same model behind single digits (the GGUF loader's
    other pre-tokenizer, through ``structgen.runtime.tokenizer.Tokenizer``)."""
    import functools

    from tokenizers import Tokenizer as Backend
    from tokenizers import pre_tokenizers

    import structgen.fsm.jump_forward as jf
    from structgen.runtime.tokenizer import Tokenizer

    backend = smollm2_tokenizer.backend_tokenizer
    if pre == "digits_then_byte_level":
        backend = Backend.from_str(backend.to_str())
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    tokenizer = Tokenizer(backend)
    encode = functools.partial(tokenizer.encode, add_special_tokens=False)
    vocab = smollm2_vocab
    parts = ["'", "'r", "'l", "'v", "s", "re", "ll", " ", "  ", "\n", "\n\n", " \n", "\t",
             "12", "3", "2026", "a", "Bo", "name", '"', '",', ":", ".", "-", "日本", "é", "?!",
             "<|im_end", "|"]  # fmt: skip
    nexts = sorted({ch for p in parts for ch in p} | {"e", "x", "9", ">", "\u00a0"})
    rng = random.Random(3)
    jf._probe_caches.clear()
    split = 0
    for _ in range(400):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(1, 8)))
        ids = encode(text)
        split += jf._pre_token_split(encode, text) > 0
        for ch in rng.sample(nexts, 12):
            probe = encode(text + ch)
            n = 0
            while n < len(ids) and n < len(probe) and probe[n] == ids[n]:
                n += 1
            assert jf._boundary_keep(text, ids, [ch.encode()], encode, vocab) == n, (text, ch)
    assert split > 200  # the last pre-tokens were probed, not the whole text
    for text in ('x"<|im_end|', "said <|im_start|"):  # an added token one character away
        ids, probe = encode(text), encode(text + ">")
        n = 0
        while n < len(ids) and n < len(probe) and probe[n] == ids[n]:
            n += 1
        assert n < len(ids) - 2  # the added token takes the text's last tokens
        assert jf._boundary_keep(text, ids, [b">"], encode, vocab) == n
