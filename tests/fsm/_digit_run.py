"""A grammar with no regex text: ``DigitRun(n)`` is exactly ``n`` single-digit tokens.

It implements the grammar interfaces (``BaseCompiledGrammar``, ``BaseMatcher``) directly,
over token ids, without any pattern: a stand-in for the grammars other issues add
(context-free grammars, structural tags). Its compiled grammar refuses to be pickled, so
a test that sees it enforced in another process knows the spec crossed, not the grammar.
It lives in an importable module so that a data-parallel replica can unpickle the spec.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from structgen.errors import NoVocabularyError
from structgen.fsm import BaseCompiledGrammar, BaseMatcher
from structgen.fsm.spec import BaseSpec


@dataclass(frozen=True)
class DigitRun(BaseSpec):
    """Exactly ``length`` tokens whose text is one ASCII digit (then EOS, or the end)."""

    length: int

    def compile(self, vocab) -> DigitRunGrammar:
        return DigitRunGrammar(self, vocab)


def _words(token_ids, num_tokens: int) -> np.ndarray:
    bits = np.zeros(-(-num_tokens // 32) * 32, dtype=bool)
    bits[list(token_ids)] = True
    # bit t % 32 of word t // 32
    return np.packbits(bits, bitorder="little").view("<i4").astype(np.int32)


class DigitRunGrammar(BaseCompiledGrammar):
    def __init__(self, spec: DigitRun, vocab) -> None:
        self.spec = spec
        self.warnings = []
        self.vocab = vocab
        if vocab is not None:
            self.digit_ids = frozenset(
                t for t, b in enumerate(vocab.token_bytes) if len(b) == 1 and b.isdigit()
            )
            self.eos_ids = frozenset(vocab.eos_token_ids)
            self.digit_words = torch.from_numpy(_words(self.digit_ids, vocab.vocab_size))
            self.eos_words = torch.from_numpy(_words(self.eos_ids, vocab.vocab_size))

    def __reduce__(self):
        raise TypeError("a DigitRunGrammar never crosses a process boundary; its spec does")

    def matches(self, text) -> bool:
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return len(data) == self.spec.length and data.isdigit()

    def matcher(self, max_tokens=None) -> DigitRunMatcher:
        if self.vocab is None:
            raise NoVocabularyError("DigitRun was compiled without a vocabulary")
        return DigitRunMatcher(self)


class DigitRunMatcher(BaseMatcher):
    def __init__(self, grammar: DigitRunGrammar) -> None:
        self.grammar = grammar
        self.num_digits = 0
        self.eos_taken = False

    def _step(self, state: tuple[int, bool], token_id: int) -> tuple[int, bool] | None:
        num, eos = state
        if eos:
            return None
        if num < self.grammar.spec.length and token_id in self.grammar.digit_ids:
            return num + 1, False
        if num == self.grammar.spec.length and token_id in self.grammar.eos_ids:
            return num, True
        return None

    def fill_bitmask(self, bitmask, row) -> None:
        bitmask[row].zero_()
        if self.eos_taken:
            return
        words = (
            self.grammar.digit_words
            if self.num_digits < self.grammar.spec.length
            else self.grammar.eos_words
        )
        bitmask[row, : words.shape[0]] = words

    def advance(self, token_id) -> bool:
        nxt = self._step((self.num_digits, self.eos_taken), int(token_id))
        if nxt is None:
            return False
        self.num_digits, self.eos_taken = nxt
        return True

    def validate(self, token_ids) -> int:
        state = (self.num_digits, self.eos_taken)
        for i, t in enumerate(token_ids):
            state = self._step(state, int(t))
            if state is None:
                return i
        return len(token_ids)

    def rollback(self, n) -> None:
        n = max(0, min(int(n), self.num_digits + int(self.eos_taken)))
        if n and self.eos_taken:
            self.eos_taken, n = False, n - 1
        self.num_digits -= n

    def forced_bytes(self) -> bytes:
        return b""

    def is_accepting(self) -> bool:
        return self.num_digits == self.grammar.spec.length

    def is_terminated(self) -> bool:
        return self.eos_taken or self.is_accepting()

    def fork(self) -> DigitRunMatcher:
        other = DigitRunMatcher(self.grammar)
        other.num_digits, other.eos_taken = self.num_digits, self.eos_taken
        return other

    def reset(self) -> None:
        self.num_digits, self.eos_taken = 0, False
