"""GrammarPool: a thread-parallel batch fill writes the same bits as the serial fill.

Reference: the serial ``BaseMatcher.fill_bitmask_batch`` (each row by its matcher's own
``fill_bitmask``) on an independent fresh compile of the same schemas, and each row's
warm mask from a third compile. Cold rows matter most (the C trie walk runs with the GIL
released there), so every repeat compiles afresh (``clear_cache``): serial and parallel
fills both start from empty DFAs and mask caches.
"""

from __future__ import annotations

import random

import pytest
import torch

from benchmarks.support import allowed_ids
from structgen.errors import ConfigError, GrammarTooComplexError
from structgen.fsm import BaseMatcher, Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.grammar_pool import GrammarPool

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}},
    {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "number"}},
            "tag": {"enum": ["red", "green", "blue"]},
        },
        "required": ["items"],
    },
    {"type": "array", "items": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}},
    {"type": "string", "pattern": "^[a-z]{2,6}-[0-9]+$"},
    {"type": "object", "additionalProperties": {"type": "string", "maxLength": 5}},
]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    """~3,000 tokens: every byte of a JSON alphabet plus random multi-byte pieces of it,
    so that masks have many live tokens and tokens share prefixes (a real trie walk)."""
    rng = random.Random(7)
    alphabet = b'{}[]":, \n0123456789.-+eEabcdefghijklmnopqrstuvwxyzABCNTF_\\/'
    pieces = {bytes([b]) for b in alphabet}
    while len(pieces) < 3000:
        pieces.add(bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 7))))
    tokens = [b"<eos>"] + sorted(pieces)
    return Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0])


def _paths(vocab: Vocabulary, rng: random.Random) -> list[tuple[int, list[int]]]:
    """(schema index, tokens) pairs: random allowed-token walks of several lengths."""
    clear_cache()
    words = -(-vocab.vocab_size // 32)
    row = torch.zeros((1, words), dtype=torch.int32)
    out = []
    for k, schema in enumerate(SCHEMAS):
        grammar = compile_json_schema(schema, vocab)
        for length in (0, 1, 3, 6, 10, 16):
            m, tokens = grammar.matcher(), []
            for _ in range(length):
                if m.is_terminated():
                    break
                m.fill_bitmask(row, 0)
                bits = [t for t in allowed_ids(row[0]) if 0 < t < vocab.vocab_size]
                if not bits:
                    break
                tokens.append(rng.choice(bits))
                assert m.advance(tokens[-1])
            out.append((k, tokens))
    return out


def _matchers(vocab: Vocabulary, paths) -> list[BaseMatcher]:
    """Fresh compiles (cold DFAs and masks), one matcher per path at the path's end."""
    clear_cache()
    grammars = [compile_json_schema(s, vocab) for s in SCHEMAS]
    out = []
    for k, tokens in paths:
        m = grammars[k].matcher()
        for t in tokens:
            assert m.advance(t)
        out.append(m)
    return out


@pytest.mark.parametrize("num_threads", [2, 4])
def test_parallel_batch_fill_is_bit_identical_to_serial(vocab, num_threads) -> None:
    _check_parallel_fill(vocab, num_threads)


@pytest.mark.slow
def test_parallel_batch_fill_on_the_smollm2_vocabulary(smollm2_vocab) -> None:
    """49,152 real tokens: long C walks, run by two threads at once with the GIL released."""
    _check_parallel_fill(smollm2_vocab, 2)


def _check_parallel_fill(vocab: Vocabulary, num_threads: int) -> None:
    rng = random.Random(num_threads)
    paths = _paths(vocab, rng)
    words = -(-vocab.vocab_size // 32) + 1  # a word past the vocabulary: must be zeroed
    pool = GrammarPool(num_threads)
    try:
        warm = _matchers(vocab, paths)
        reference = torch.full((len(paths), words), -1, dtype=torch.int32)
        for row, m in enumerate(warm):
            m.fill_bitmask(reference, row)
        for repeat in range(3):
            order = list(range(len(paths)))
            rng.shuffle(order)  # rows of one grammar interleaved with the others'
            rows = [order.index(i) for i in range(len(paths))]
            serial = torch.full((len(paths), words), -1, dtype=torch.int32)
            errors = BaseMatcher.fill_bitmask_batch(_matchers(vocab, paths), serial, rows)
            assert errors == [None] * len(paths)
            parallel = torch.full((len(paths), words), -1, dtype=torch.int32)
            errors = BaseMatcher.fill_bitmask_batch(
                _matchers(vocab, paths), parallel, rows, pool=pool
            )
            assert errors == [None] * len(paths)
            assert torch.equal(parallel, serial), f"repeat {repeat}"
            assert torch.equal(parallel[rows], reference)
            # the same matchers again: now warm, written by the calling thread
            again = torch.zeros_like(parallel)
            assert pool.fill_bitmask_batch(_matchers(vocab, paths), again, rows) == [None] * len(
                paths
            )
            assert torch.equal(again, serial)
    finally:
        pool.close()
    assert (reference[:, -1] == 0).all() and int((reference != 0).sum()) > 4 * len(paths)


class _Broken(BaseMatcher):
    """A matcher whose mask cannot be built (as a lazy state past a budget)."""

    def fill_bitmask(self, bitmask, row):
        raise GrammarTooComplexError("state budget exceeded at /properties/x")

    def advance(self, token_id):
        return False

    def validate(self, token_ids):
        return 0

    def rollback(self, n):
        pass

    def forced_bytes(self):
        return b""

    def is_accepting(self):
        return False

    def is_terminated(self):
        return False

    def fork(self):
        return self

    def reset(self):
        pass


@pytest.mark.parametrize("num_threads", [None, 1, 3])
def test_a_failing_matcher_fails_its_row_only(vocab, num_threads) -> None:
    clear_cache()
    grammar = compile_json_schema(SCHEMAS[0], vocab)
    other = compile_json_schema(SCHEMAS[2], vocab)
    matchers = [grammar.matcher(), _Broken(), other.matcher(), grammar.matcher()]
    words = -(-vocab.vocab_size // 32)
    bitmask = torch.zeros((4, words), dtype=torch.int32)
    pool = GrammarPool(num_threads) if num_threads else None
    try:
        errors = BaseMatcher.fill_bitmask_batch(matchers, bitmask, [0, 1, 2, 3], pool=pool)
    finally:
        if pool is not None:
            pool.close()
    assert [type(e) for e in errors] == [type(None), GrammarTooComplexError] + [type(None)] * 2
    expected = torch.zeros((1, words), dtype=torch.int32)
    for row in (0, 2, 3):
        matchers[row].fill_bitmask(expected, 0)
        assert torch.equal(bitmask[row], expected[0])
    assert torch.equal(bitmask[1], torch.zeros(words, dtype=torch.int32))


def test_pool_rejects_bad_sizes_and_lengths(vocab) -> None:
    with pytest.raises(ConfigError, match="num_threads"):
        GrammarPool(0)
    pool = GrammarPool(2)
    try:
        with pytest.raises(ValueError, match="2 matchers for 1 rows"):
            pool.fill_bitmask_batch([_Broken(), _Broken()], torch.zeros((2, 1)), [0])
        assert pool.submit(lambda x: x + 1, 41).result() == 42
    finally:
        pool.close()
        pool.close()  # idempotent
